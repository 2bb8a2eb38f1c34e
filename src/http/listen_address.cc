#include "http/listen_address.h"

#include <utility>  // before Boost: its 1.74 coroutine header needs std::exchange
#include <boost/asio.hpp>

#include "base/error.h"

namespace fission::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::string ResolveListenAddress(const std::string& host) {
  boost::system::error_code ec;
  const asio::ip::address literal = asio::ip::make_address(host, ec);
  if (!ec) return literal.to_string();
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  const auto results = resolver.resolve(host, "", tcp::resolver::passive, ec);
  if (ec || results.empty())
    Fail("--host '", host, "' is neither an IP address nor a name this machine resolves",
         ec ? ": " + ec.message() : std::string());
  for (const auto& entry : results)
    if (entry.endpoint().address().is_v4()) return entry.endpoint().address().to_string();
  return results.begin()->endpoint().address().to_string();
}

void CheckCanListen(const std::string& host, int port) {
  const std::string address = ResolveListenAddress(host);
  if (port == 0) return;
  asio::io_context ioc;
  tcp::acceptor probe(ioc);
  boost::system::error_code ec;
  const tcp::endpoint endpoint(asio::ip::make_address(address), static_cast<unsigned short>(port));
  probe.open(endpoint.protocol(), ec);
  if (!ec) probe.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) probe.bind(endpoint, ec);
  if (ec) Fail("cannot listen on ", host, ":", port, " (", address, "): ", ec.message());
}

}  // namespace fission::http
