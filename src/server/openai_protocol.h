// The OpenAI-compatible request bodies (/v1/completions, /v1/chat/completions) parsed into native
// types. Field names, defaults and the SGLang extras follow what OpenAI clients, lm-eval and
// bench_serving send; a malformed body or a bad field is an ApiError(400) naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"  // OrderedJson: messages and tools keep the client's key order
#include "engine/sampling_params.h"
#include "server/constraint_spec.h"

namespace fission::server {

struct PromptInput {
  bool is_text = true;
  std::string text;
  std::vector<std::int32_t> ids;
};

struct StreamOptions {
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage: a last chunk with usage
  bool continuous_usage_stats = false;  // usage on every chunk
};

struct CompletionRequest {
  std::string model;
  std::vector<std::string> rids;  // SGLang's `rid`, for /abort_request
  std::vector<PromptInput> prompts;
  engine::SamplingParams params;
  bool echo = false;
  int logprobs = -1;  // -1: none; otherwise the number of alternatives per token (0..20)
  bool skip_special_tokens = true;
  StreamOptions stream;
  std::optional<ConstraintSpec> constraint;  // regex, ebnf, json_schema or response_format
};

struct ChatRequest {
  std::string model;
  std::vector<std::string> rids;
  OrderedJson messages;                                  // array of message objects
  OrderedJson tools = nullptr;                           // array or null
  OrderedJson tool_choice = "auto";                      // "none" | "auto" | "required" | {function}
  bool parallel_tool_calls = true;                       // a forced choice may make several calls
  OrderedJson response_format = nullptr;                 // passed to the chat template
  std::optional<ConstraintSpec> constraint;              // regex, ebnf, json_schema or response_format
  OrderedJson chat_template_kwargs = OrderedJson::object();
  // OpenAI's reasoning_effort (a string), null when absent: the chat_template_kwargs
  // reasoning_effort unless those set their own (request_decoding.h).
  OrderedJson reasoning_effort = nullptr;
  engine::SamplingParams params;
  bool max_tokens_given = false;  // otherwise the engine runs to the context length
  bool logprobs = false;
  int top_logprobs = 0;
  bool skip_special_tokens = true;
  bool separate_reasoning = true;  // with a reasoning parser: thinking goes to reasoning_content
  bool stream_reasoning = true;
  bool continue_final_message = false;
  StreamOptions stream;
};

CompletionRequest ParseCompletionRequest(const std::string& body);
ChatRequest ParseChatRequest(const std::string& body);

}  // namespace fission::server
