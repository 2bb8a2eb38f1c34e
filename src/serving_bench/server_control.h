// The control requests `fission bench` makes besides the measured ones: the model name from
// /v1/models, SGLang's /get_server_info (and the speculative accept length in it), and the
// profiler's /start_profile and /stop_profile.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "http/message.h"
#include "http/url.h"

namespace fission::serving_bench {

// The first /v1/models entry; an Error naming the URL when the server does not answer.
std::string DiscoverModel(const http::Url& url, const std::vector<http::Header>& headers);

// /get_server_info's JSON, or null when the server has none.
Json FetchServerInfo(const http::Url& url, const std::vector<http::Header>& headers);

// SGLang's avg_spec_accept_length inside /get_server_info (under decode[0] for PD servers).
std::optional<double> AcceptLength(const Json& info);

// POSTs {} to `path` (/start_profile, /stop_profile); "" on HTTP 200, else what went wrong.
std::string PostControl(const http::Url& url, const std::string& path, const std::vector<http::Header>& headers);

}  // namespace fission::serving_bench
