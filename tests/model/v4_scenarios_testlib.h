// DeepSeek-V4 step scenarios shared by the CPU tests (v4_model_test.cc) and the CUDA ones
// (model_cuda/v4_model_cuda_test.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "model/causal_lm.h"

namespace fission::model {

// The logits of every position of `tokens` prefilled in chunks of the given sizes (the last chunk
// takes the rest), with pages of `page_size` positions (a page holds several entries of one ratio
// and a part of one entry of another).
std::vector<std::vector<float>> V4ChunkedPrefill(CausalLM& model, const std::vector<std::int32_t>& tokens,
                                                 const std::vector<std::size_t>& chunks, std::int64_t page_size);

// Chunked prompts of several sequences, prefill and decode in one step, then 32 greedy steps;
// every logits row, and the tokens (recorded from `model` when `tokens` is empty, else forced).
std::vector<std::vector<float>> V4MixedScenario(CausalLM& model, std::vector<std::int32_t>* tokens);

}  // namespace fission::model
