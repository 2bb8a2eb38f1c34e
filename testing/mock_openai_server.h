// A scripted OpenAI-compatible server for testing the tools and measuring the client: a script
// decides, per request, which text chunks to stream, after which delays, with which usage block,
// and whether to fail. It serves /v1/completions, /v1/chat/completions and SGLang's /generate
// (streaming or not), /v1/models, /get_server_info, /health and the profiler's /start_profile and
// /stop_profile.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "serving_bench/backend.h"
#include "http/url.h"

namespace fission::serving_bench {

struct MockChunk {
  double delay_ms = 0;  // after the previous piece (the first: after the request arrived)
  std::string text;
  std::int64_t tokens = 1;  // tokens this chunk stands for (SGLang's cumulative completion_tokens)
};

struct MockReply {
  int status = 200;  // anything else: that status with a JSON error body, no stream
  std::vector<MockChunk> chunks;
  // The usage block's completion_tokens, sent in a final chunk; nullopt sends no usage.
  std::optional<std::int64_t> completion_tokens;
  std::int64_t prompt_tokens = 0;
  double tail_delay_ms = 0;  // before the usage chunk and [DONE]
  std::string stream_error;  // when set: an {"error": ...} chunk after the text chunks
  bool drop_connection = false;  // cut the connection after the text chunks
};

// Called for every generation request with its JSON body, the API it came on and its arrival
// index (0, 1, ...). May run on several threads at once.
using MockScript = std::function<MockReply(const Json& body, ApiKind api, int index)>;

struct TimedPiece {
  double at_ms = 0;  // since the request arrived
  std::string bytes;
  bool finish = false;  // the response ends after this piece
  bool abort = false;   // the connection is cut instead of sending this piece
};

// The response of a streaming request as the mock sends it: SSE bytes with their scripted times.
std::vector<TimedPiece> RenderStream(const MockReply& reply, ApiKind api, const std::string& model);
// The JSON body of a non-streaming answer.
std::string RenderJson(const MockReply& reply, ApiKind api, const std::string& model);

class MockOpenAiServer {
 public:
  struct Options {
    std::string model = "mock-model";
    int io_threads = 2;
    std::optional<double> accept_length;  // reported by /get_server_info when set
  };
  MockOpenAiServer(MockScript script, Options options);
  explicit MockOpenAiServer(MockScript script) : MockOpenAiServer(std::move(script), Options()) {}
  ~MockOpenAiServer();

  http::Url url() const;
  int requests_seen() const;
  // The bodies received, in arrival order.
  std::vector<Json> bodies() const;
  // "/start_profile@N", "/stop_profile@N": the control calls, N requests having arrived before.
  std::vector<std::string> control_calls() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fission::serving_bench
