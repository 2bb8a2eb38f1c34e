#include "serving_bench/server_control.h"

#include <chrono>

#include "base/error.h"
#include "http/client.h"

namespace fission::serving_bench {

namespace {

http::ClientResponse Send(http::ClientRequest req, const std::vector<http::Header>& headers) {
  http::HttpClient client;
  req.headers = headers;
  req.timeout = std::chrono::seconds(30);
  return client.Fetch(req);
}

}  // namespace

std::string DiscoverModel(const http::Url& url, const std::vector<http::Header>& headers) {
  const http::ClientResponse r = Send(http::ClientRequest::Get(url, "/v1/models"), headers);
  if (!r.error.empty() || r.status != 200) {
    Fail("--model not given and ", url.ToString(), "/v1/models failed (",
         r.error.empty() ? StrCat("HTTP ", r.status) : r.error, "); pass --model and check --host/--port");
  }
  const Json j = ParseJson(r.body, "/v1/models response");
  const Json& data = RequireField(j, "data", "/v1/models response");
  if (!data.is_array() || data.empty()) Fail("/v1/models lists no model; pass --model");
  return GetString(data[0], "id", "/v1/models entry");
}

Json FetchServerInfo(const http::Url& url, const std::vector<http::Header>& headers) {
  const http::ClientResponse r = Send(http::ClientRequest::Get(url, "/get_server_info"), headers);
  if (!r.error.empty() || r.status != 200) return nullptr;
  try {
    return Json::parse(r.body);
  } catch (const Json::exception&) {
    return nullptr;
  }
}

std::optional<double> AcceptLength(const Json& info) {
  const Json* root = &info;
  if (info.is_object() && info.contains("decode") && info["decode"].is_array() && !info["decode"].empty()) {
    root = &info["decode"][0];
  }
  if (!root->is_object() || !root->contains("internal_states")) return std::nullopt;
  const Json& states = (*root)["internal_states"];
  if (!states.is_array() || states.empty() || !states[0].is_object()) return std::nullopt;
  auto it = states[0].find("avg_spec_accept_length");
  if (it == states[0].end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string PostControl(const http::Url& url, const std::string& path, const std::vector<http::Header>& headers) {
  const http::ClientResponse r = Send(http::ClientRequest::Post(url, path, "{}"), headers);
  if (!r.error.empty()) return r.error;
  if (r.status != 200) return StrCat("HTTP ", r.status, r.body.empty() ? "" : ": ", r.body.substr(0, 200));
  return "";
}

}  // namespace fission::serving_bench
