// Where `fission serve` listens: --host as SGLang takes it (an IPv4 or IPv6 literal, `localhost`,
// `0.0.0.0`, `::`, or any name the resolver knows), checked before the model loads.
#pragma once

#include <string>

namespace fission::http {

// The numeric address `host` names: a literal as written, else the first IPv4 address the resolver
// gives (IPv6 when it gives none). Throws fission::Error naming the host when nothing resolves.
std::string ResolveListenAddress(const std::string& host);

// Throws fission::Error when no socket can listen on host:port now (the name does not resolve, the
// port is taken, or binding is not permitted): said before anything expensive starts. Port 0 (any
// free port) only checks the host.
void CheckCanListen(const std::string& host, int port);

}  // namespace fission::http
