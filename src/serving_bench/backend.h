// What each --backend sends and how its streamed answer is measured.
//
// Measurement rules (bench_serving's): the clock starts when the request is sent; TTFT is the time
// to the first chunk with non-empty content (`choices[0].text` on /v1/completions,
// `choices[0].delta.content` on /v1/chat/completions, where reasoning_content does not count, and
// `text` on /generate); every later content chunk adds one inter-token gap (for SGLang's native
// /generate, a chunk that carries k new tokens adds k equal gaps); the end-to-end
// latency runs to the last line of the stream (including a trailing usage chunk and [DONE]);
// output tokens come from the usage block. A request succeeds when its status is 200 and at least
// one text chunk arrived; anything else is a failure with its reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/json.h"
#include "serving_bench/metrics.h"
#include "http/message.h"

namespace fission::serving_bench {

enum class ApiKind {
  kCompletions,      // POST /v1/completions
  kChatCompletions,  // POST /v1/chat/completions
  kSglangGenerate,   // POST /generate
};

struct Backend {
  std::string name;
  ApiKind api = ApiKind::kCompletions;
  // Throws fission::Error listing the known backends.
  static Backend Parse(const std::string& name);
  std::string Path() const;
};

struct RequestSettings {
  std::string model;
  bool stream = true;
  bool ignore_eos = false;
  Json extra_body = Json::object();  // merged last, so it can override anything
};

// The JSON body for one request: the row's token ids replace its text when it has them (an Error
// on the chat route), and its LoRA adapter is named as bench_serving names it.
std::string BuildRequestBody(const Backend& backend, const RequestSettings& settings, const DatasetRow& row);

// Turns one response into a RequestOutput. Feed it from the HTTP client's callbacks; all times
// are relative to `sent`.
class StreamMeasurer {
 public:
  StreamMeasurer(const Backend& backend, bool stream, http::Clock::time_point sent, std::int64_t prompt_len);

  void OnStatus(int status);
  void OnData(std::string_view data, http::Clock::time_point when);
  // `transport_error` is the client's error text ("" when the response completed).
  RequestOutput Finish(const std::string& transport_error, http::Clock::time_point when);

 private:
  void OnLine(std::string_view line, http::Clock::time_point when);
  void OnEvent(const Json& data, http::Clock::time_point when);
  void OnTextChunk(http::Clock::time_point when, std::int64_t new_tokens);
  void Fail(std::string error);
  double Since(http::Clock::time_point t) const { return std::chrono::duration<double>(t - sent_).count(); }

  Backend backend_;
  bool stream_;
  http::Clock::time_point sent_;
  int status_ = 0;
  std::string body_;     // non-streaming body, or the error body of a non-200 answer
  std::string partial_;  // incomplete SSE line
  RequestOutput out_;
  bool got_text_ = false;
  http::Clock::time_point last_token_;
  http::Clock::time_point last_line_;
  bool any_line_ = false;
  std::int64_t sglang_tokens_ = 0;  // completion_tokens seen so far on /generate
};

}  // namespace fission::serving_bench
