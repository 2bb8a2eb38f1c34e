// The body of SGLang's native POST /generate, parsed into native types: `text` (a string or a list
// of strings) or `input_ids` (token ids or a list of them), `sampling_params`, `return_logprob`,
// `top_logprobs_num`, `stream` and `rid`. Any problem is an ApiError(400) naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "server/constraint_spec.h"

namespace fission::server {

struct GenerateRequest {
  bool is_text = true;
  std::vector<std::string> texts;                    // is_text
  std::vector<std::vector<std::int32_t>> input_ids;  // !is_text
  bool batch = false;  // a list of prompts: the answer is a list too
  engine::SamplingParams params;
  bool return_logprob = false;
  bool stream = false;
  std::string rid;  // "" when none; /abort_request names requests by it
  std::optional<ConstraintSpec> constraint;  // sampling_params' regex, ebnf or json_schema
  std::size_t num_prompts() const { return is_text ? texts.size() : input_ids.size(); }
};

GenerateRequest ParseGenerateRequest(const std::string& body);

}  // namespace fission::server
