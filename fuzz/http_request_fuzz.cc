// Fuzzes what a request goes through before it reaches the engine: the HTTP request parser, then
// the decoding of the generation routes (the JSON reader with its bounds, field validation, the
// model check, the chat template and the tokenizer of the demo model). Every input must end as a
// decoded request or as a 4xx answer: a 5xx status, any other exception or a crash is a finding.
//
// The first byte picks what the rest is: a raw HTTP request (routed by its path), or the body of
// /v1/completions, /v1/chat/completions or /generate.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>

#include "http/request_parser.h"
#include "server/api_error.h"
#include "server/request_decoding.h"
#include "tokenizer/chat_template.h"

namespace {

using namespace fission;
using namespace fission::server;

struct Setup {
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<tokenizer::ChatTemplate> chat_template;
  std::unique_ptr<StructuredOutputs> structured_outputs;
  RouteContext context;
};

const Setup& TheSetup() {
  static const Setup* setup = [] {
    auto* s = new Setup;
    const std::string dir = std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3";
    s->tokenizer = tokenizer::Tokenizer::Load(dir);
    s->chat_template = std::make_unique<tokenizer::ChatTemplate>(
        tokenizer::ChatTemplate::ForModel(s->tokenizer->config(), std::nullopt));
    RouteContext& c = s->context;
    c.tokenizer = s->tokenizer.get();
    c.chat_template = s->chat_template.get();
    c.served_model_name = "demo";
    c.model_path = dir;
    c.parses_tool_calls = true;
    c.tool_call_parser = "qwen";
    // Constraints compile too, so the grammar compilers see what clients send.
    s->structured_outputs = std::make_unique<StructuredOutputs>(*s->tokenizer, s->tokenizer->vocab_size());
    c.structured_outputs = s->structured_outputs.get();
    c.context_length = 2048;
    c.vocab_size = s->tokenizer->vocab_size();
    c.kv_capacity_tokens = 16384;
    c.max_prompt_bytes = MaxPromptBytes(*s->tokenizer, c.context_length);
    return s;
  }();
  return *setup;
}

[[noreturn]] void Finding(const std::string& what) {
  std::fprintf(stderr, "http_request_fuzz: %s\n", what.c_str());
  std::abort();
}

void CheckClientStatus(int status, const std::string& message) {
  if (status < 400 || status >= 500) Finding("status " + std::to_string(status) + ": " + message);
}

// Decodes `body` as `path` does; only ApiErrors of 4xx may come out.
void Decode(std::string_view path, const std::string& body) {
  const RouteContext& c = TheSetup().context;
  try {
    if (path == "/v1/completions") DecodeCompletion(body, c);
    if (path == "/v1/chat/completions") DecodeChat(body, c);
    if (path == "/generate") DecodeGenerate(body, c);
  } catch (const ApiError& e) {
    CheckClientStatus(e.status(), e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      const http::ParseResult parsed = http::ParseRequest(rest, 1 << 20);
      if (parsed.outcome == http::ParseResult::Outcome::kMalformed) CheckClientStatus(parsed.status, parsed.error);
      if (parsed.outcome == http::ParseResult::Outcome::kComplete) Decode(parsed.request.path, parsed.request.body);
      break;
    }
    case 1:
      Decode("/v1/completions", std::string(rest));
      break;
    case 2:
      Decode("/v1/chat/completions", std::string(rest));
      break;
    default:
      Decode("/generate", std::string(rest));
  }
  return 0;
}
