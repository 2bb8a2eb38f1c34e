// What the generation routes make of a request body before the engine sees it: the fields parsed
// and validated, the model name checked, the chat template rendered and the prompts tokenized.
// Decoding needs the tokenizer and the engine's limits but not the engine, so the fuzz target
// runs exactly what the routes run. Every problem is an ApiError with a 4xx status naming the
// field; no value a client sent is quoted beyond a short prefix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "server/native_protocol.h"
#include "server/openai_protocol.h"
#include "server/reasoning_parser.h"
#include "server/structured_output.h"
#include "server/tool_call_parser.h"
#include "tokenizer/chat_renderer.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {

// The most completions one request may ask for (prompts × n).
inline constexpr std::size_t kMaxChoicesPerRequest = 1024;

// The longest model name a request may send.
inline constexpr std::size_t kMaxModelNameBytes = 1024;

struct RouteContext {
  const tokenizer::Tokenizer* tokenizer = nullptr;
  // The chat template or the model's own encoder; null: chat is refused with the error below.
  const tokenizer::ChatRenderer* chat_template = nullptr;
  std::string chat_template_error;
  std::string served_model_name;  // what answers are named when a request names no model
  std::string model_path;
  bool parses_tool_calls = false;  // a --tool-call-parser is set: the request's tool schemas are read
  std::string tool_call_parser;    // its name
  const ReasoningParser* reasoning_parser = nullptr;
  // Compiles constraints (structured outputs); null: they are off and a request asking for one
  // gets a 400.
  StructuredOutputs* structured_outputs = nullptr;
  std::int64_t context_length = 0;
  std::int64_t vocab_size = 0;
  std::int64_t kv_capacity_tokens = 0;
  // Prompt text longer than this is refused before it is tokenized (MaxPromptBytes).
  std::size_t max_prompt_bytes = 0;
  // Keys a chat request's chat_template_kwargs gets when it does not set them.
  OrderedJson default_chat_template_kwargs = OrderedJson::object();
};

// The prompt text a server tokenizes for `context_length` tokens: twice the context times the
// longest token's text, since no token stands for more text than that (the factor leaves room
// for normalizers). Longer text is refused at once, however cheap its tokens would be.
std::size_t MaxPromptBytes(const tokenizer::Tokenizer& tokenizer, std::int64_t context_length);

struct DecodedCompletion {
  CompletionRequest request;
  std::string model;  // as answers name it
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::string> texts;  // each prompt's text, for echo
};

struct DecodedChat {
  ChatRequest request;
  std::string model;
  std::vector<std::int32_t> prompt;
  std::vector<ToolSpec> tools;  // read only with a tool-call parser
};

struct DecodedGenerate {
  GenerateRequest request;
  std::vector<std::vector<std::int32_t>> prompts;
};

DecodedCompletion DecodeCompletion(const std::string& body, const RouteContext& context);
DecodedChat DecodeChat(const std::string& body, const RouteContext& context);
DecodedGenerate DecodeGenerate(const std::string& body, const RouteContext& context);

}  // namespace fission::server
