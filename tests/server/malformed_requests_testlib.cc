#include "server/malformed_requests_testlib.h"

#include "base/json.h"

namespace fission::server {
namespace {

const char* kPrompt = "Question: Lee has 9 shells and finds 6 more. How many shells does he have?\nAnswer:";

struct Route {
  const char* path;
  Json body;
};

// A valid body per route, which the classes below break.
std::vector<Route> ValidBodies() {
  return {
      {"/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0.5}, {"stop", {"Q"}}}},
      {"/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}}},
      {"/generate", {{"text", kPrompt}, {"sampling_params", {{"max_new_tokens", 4}, {"temperature", 0}}}}},
  };
}

std::string Nested(std::mt19937_64& rng) {
  const int depth = 200 + static_cast<int>(rng() % 20000);
  const bool arrays = rng() % 2 == 0;
  if (arrays) return std::string(depth, '[') + std::string(depth, ']');
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s += std::string(depth, '}');
  return s;
}

// Replaces the value of `key` (at the top level, or in sampling_params for /generate) by raw text.
std::string WithRawField(const Route& route, const std::string& key, const std::string& raw) {
  Json body = route.body;
  const bool native = std::string(route.path) == "/generate" && key != "text" && key != "input_ids" && key != "rid";
  Json& where = native ? body["sampling_params"] : body;
  where[key] = "@@RAW@@";
  std::string text = body.dump();
  text.replace(text.find("\"@@RAW@@\""), 9, raw);
  return text;
}

// One field of the wrong type or out of range, among those the route reads.
std::string Wrong(const Route& route, std::mt19937_64& rng) {
  using Fields = std::vector<std::pair<std::string, Json>>;
  static const Fields kOpenAi = {
      {"max_tokens", -1},    {"max_tokens", "many"}, {"temperature", "hot"},       {"temperature", -1},
      {"top_p", 2},          {"top_k", "k"},         {"n", 0},                     {"n", 1000},
      {"stop", 7},           {"stop", {1, 2}},       {"seed", "s"},                {"presence_penalty", 9},
      {"frequency_penalty", -9}, {"stream", 1},      {"stream_options", 3},        {"model", 42},
      {"rid", 7},            {"regex", "(unclosed"},        {"logit_bias", {{"1", 100}}}, {"min_p", 5},
      {"stop_token_ids", "x"}, {"repetition_penalty", 0}, {"logprobs", 99}};
  static const Fields kCompletion = {{"prompt", 5}, {"prompt", Json::object()}, {"echo", "yes"}, {"suffix", "x"}};
  static const Fields kChat = {{"messages", "hi"}, {"messages", {{{"content", "x"}}}}, {"top_logprobs", 50},
                               {"tools", 3}, {"tool_choice", "maybe"},
                               {"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}},
                               {"response_format", {{"type", "json_schema"}}}};
  static const Fields kSampling = {{"max_new_tokens", -5}, {"temperature", "hot"}, {"top_p", 2}, {"n", 0},
                                   {"stop", 7}, {"stream_options", 3}, {"min_new_tokens", 99}};
  static const Fields kNative = {{"input_ids", {1, -4}}, {"input_ids", {1, "x"}}, {"top_logprobs_num", -1},
                                 {"return_logprob", "yes"}, {"stream", 1}, {"text", 5}};
  Json body = route.body;
  const std::string path = route.path;
  if (path == "/generate") {
    const bool sampling = rng() % 2 == 0;
    const auto& [key, value] = sampling ? kSampling[rng() % kSampling.size()] : kNative[rng() % kNative.size()];
    (sampling ? body["sampling_params"] : body)[key] = value;
    return body.dump();
  }
  const Fields& own = path == "/v1/chat/completions" ? kChat : kCompletion;
  const bool shared = rng() % 3 != 0;
  const auto& [key, value] = shared ? kOpenAi[rng() % kOpenAi.size()] : own[rng() % own.size()];
  body[key] = value;
  return body.dump();
}

std::string OneOf(std::mt19937_64& rng, const std::vector<std::string>& options) { return options[rng() % options.size()]; }

std::string Make(Malformed kind, const Route& route, std::mt19937_64& rng) {
  const std::string valid = route.body.dump();
  const std::string path = route.path;
  switch (kind) {
    case Malformed::kTruncatedJson:
      return valid.substr(0, rng() % (valid.size() - 1));
    case Malformed::kWrongField:
      return Wrong(route, rng);
    case Malformed::kJunkBytes: {
      std::string junk(1 + rng() % 64, '\0');
      for (char& c : junk) c = static_cast<char>(rng() % 256);
      if (junk[0] == '{' || junk[0] == '[' || junk[0] == '"' || (junk[0] >= '0' && junk[0] <= '9')) junk[0] = '#';
      return junk;
    }
    case Malformed::kDeepNesting: {
      const std::string key = path == "/v1/chat/completions" ? "messages" : path == "/generate" ? "text" : "prompt";
      return WithRawField(route, OneOf(rng, {key, "temperature", "stop"}), Nested(rng));
    }
    case Malformed::kNumberOverflow:
      return WithRawField(route, OneOf(rng, {"temperature", "top_p", "max_tokens", "seed"}),
                          OneOf(rng, {"1e400", "-1e400", "1e999999", "123e45678"}));
    case Malformed::kHugeInteger: {
      if (path == "/generate")
        return WithRawField(route, OneOf(rng, {"input_ids", "max_new_tokens", "n"}),
                            OneOf(rng, {"[4294967297]", "4294967301", "18446744073709551616", "[18446744073709551615]"}));
      return WithRawField(route, OneOf(rng, {"max_tokens", "n", "logprobs", "top_k"}),
                          OneOf(rng, {"4294967297", "4294967301", "18446744073709551616", "-9223372036854775809"}));
    }
    case Malformed::kHugeValue: {
      const std::string huge(1 << 16, "xyz"[rng() % 3]);
      if (path == "/v1/chat/completions" && rng() % 2)
        return Json{{"messages", {{{"role", huge}, {"content", "hi"}}}}}.dump();
      if (path == "/generate") return WithRawField(route, huge, "1");
      return WithRawField(route, "model", "\"" + huge + "\"");
    }
    case Malformed::kEmptyList:
      if (path == "/generate") return OneOf(rng, {R"({"text":[]})", R"({"input_ids":[]})", R"({"input_ids":[[]]})"});
      if (path == "/v1/chat/completions") return R"({"messages":[]})";
      return OneOf(rng, {R"({"prompt":[]})", R"({"prompt":[[]]})", R"({"prompt":[[1],[]]})"});
    case Malformed::kOverLimit: {
      // The demo model's context is 2048 tokens.
      std::string ids = "5";
      for (int i = 1; i < 2048; ++i) ids += ",5";
      if (path == "/generate") return R"({"input_ids":[)" + ids + "]}";
      if (path == "/v1/chat/completions") return R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":5000})";
      return OneOf(rng, {R"({"prompt":[)" + ids + R"(],"max_tokens":0})", R"({"prompt":"hi","max_tokens":2047})"});
    }
    case Malformed::kCount:
      break;
  }
  return "";
}

}  // namespace

const char* MalformedName(Malformed kind) {
  static const char* kNames[] = {"truncated JSON", "wrong field", "junk bytes", "deep nesting", "number overflow",
                                 "huge integer", "huge value", "empty list", "over limit"};
  return kNames[static_cast<int>(kind)];
}

std::vector<MalformedRequest> MalformedRequests(std::mt19937_64& rng, int count) {
  const std::vector<Route> routes = ValidBodies();
  std::vector<MalformedRequest> requests;
  requests.reserve(count);
  for (int i = 0; i < count; ++i) {
    const Malformed kind = static_cast<Malformed>(i % static_cast<int>(Malformed::kCount));
    const Route& route = routes[rng() % routes.size()];
    requests.push_back({kind, route.path, Make(kind, route, rng)});
  }
  return requests;
}

std::vector<std::string> MalformedFraming() {
  return {
      "GARBAGE\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n{\"a\":",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n0\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
      "GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n",
      "DELETE /health HTTP/1.1\r\nHost: x\r\n\r\n",
      "HEAD /generate HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      "POST /v1/completions HTTP/9.9\r\nHost: x\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n[]",
      "POST /v1/completions HTTP/1.0\r\nContent-Length: 12\r\n\r\n{\"prompt\":3}",
      "GET /" + std::string(100000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(100000, 'b') + "\r\n\r\n",
      "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{\"text\":1",
      "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{}",
  };
}

}  // namespace fission::server
