#include "engine/sampling_params.h"

#include <cmath>

#include "base/error.h"

namespace fission::engine {

void SamplingParams::Validate(std::int64_t vocab_size) const {
  if (!std::isfinite(temperature) || temperature < 0.0)
    Fail("temperature must be a finite number >= 0 (0 means greedy), got ", temperature);
  if (!std::isfinite(top_p) || top_p <= 0.0 || top_p > 1.0) Fail("top_p must be in (0, 1], got ", top_p);
  if (top_k < -1) Fail("top_k must be -1 (disabled), 0 (disabled) or >= 1, got ", top_k);
  if (!std::isfinite(min_p) || min_p < 0.0 || min_p > 1.0) Fail("min_p must be in [0, 1], got ", min_p);
  if (max_new_tokens < 0) Fail("max_new_tokens must be >= 0, got ", max_new_tokens);
  if (min_new_tokens < 0 || min_new_tokens > max_new_tokens)
    Fail("min_new_tokens must be in [0, max_new_tokens=", max_new_tokens, "], got ", min_new_tokens);
  for (std::size_t i = 0; i < stop.size(); ++i)
    if (stop[i].empty()) Fail("stop[", i, "] must be a non-empty string");
  for (std::size_t i = 0; i < stop_token_ids.size(); ++i)
    if (stop_token_ids[i] < 0 || stop_token_ids[i] >= vocab_size)
      Fail("stop_token_ids[", i, "] must be in [0, ", vocab_size, "), got ", stop_token_ids[i]);
  if (n < 1 || n > 128) Fail("n must be in [1, 128], got ", n);
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0 || repetition_penalty > 2.0)
    Fail("repetition_penalty must be in (0, 2], got ", repetition_penalty);
  if (!std::isfinite(frequency_penalty) || frequency_penalty < -2.0 || frequency_penalty > 2.0)
    Fail("frequency_penalty must be in [-2, 2], got ", frequency_penalty);
  if (!std::isfinite(presence_penalty) || presence_penalty < -2.0 || presence_penalty > 2.0)
    Fail("presence_penalty must be in [-2, 2], got ", presence_penalty);
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs)
    Fail("top_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", top_logprobs);
  if (top_logprobs > 0 && !logprobs && !prompt_logprobs)
    Fail("top_logprobs must be 0 unless logprobs or prompt_logprobs is set, got ", top_logprobs);
}

}  // namespace fission::engine
