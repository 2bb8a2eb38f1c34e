// A small deterministic CausalLM for engine tests that genuinely uses its paged memory.
//
// Every layer's KV row of a token holds values derived from (token id, position, layer). The logits
// of a query are a pseudo-random function of ALL rows of its sequence up to and including it, read
// back through the block table: so a wrong page, slot, position, chunk boundary or prefix-cache
// page changes the logits, and with them the output. ReferenceLogits computes the same function
// straight from the token ids, with no cache, as an independent oracle.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/detokenizer.h"
#include "engine/engine.h"
#include "model/causal_lm.h"
#include "model/model_memory.h"

namespace fission::engine::testing {

class FakeCausalLM : public model::CausalLM {
 public:
  explicit FakeCausalLM(std::int64_t vocab_size = 101, int num_layers = 2, std::int64_t max_positions = 4096)
      : vocab_size_(vocab_size), num_layers_(num_layers), max_positions_(max_positions) {}

  std::string architecture() const override { return "FakeCausalLM"; }
  std::int64_t vocab_size() const override { return vocab_size_; }
  std::int64_t max_position_embeddings() const override { return max_positions_; }
  model::MemorySpec Memory() const override;
  void AllocateMemory(const model::MemoryPlan& plan) override;
  model::StepLogits Forward(const model::ForwardBatch& batch) override;
  // The allocated memory's plan (engine tests check its sizing).
  const model::MemoryPlan& memory_plan() const { return memory_->plan(); }

  // The logits after `tokens` (of the last position), computed without any cache.
  std::vector<float> ReferenceLogits(const std::vector<std::int32_t>& tokens) const;
  // Greedy continuation of `prompt` by the reference logits.
  std::vector<std::int32_t> ReferenceGreedy(const std::vector<std::int32_t>& prompt, int max_new_tokens) const;

  // Makes the next Forward throw (to test failure handling).
  void FailNextForward() { fail_next_ = true; }
  // Statistics of the calls so far.
  std::int64_t forward_calls() const { return forward_calls_; }
  std::int64_t max_tokens_in_step() const { return max_tokens_in_step_; }
  std::int64_t mixed_steps() const { return mixed_steps_; }  // steps with both prefill and decode work

  // Pretends to run on a device with this much memory (for KV pool sizing); unset: host memory.
  void set_device_memory(std::optional<kernels::DeviceMemory> memory) { device_memory_ = memory; }
  std::optional<kernels::DeviceMemory> device_memory() override { return device_memory_; }

  // Cost knob for benchmarks: skip computing logits (all zeros).
  void set_zero_logits(bool zero) { zero_logits_ = zero; }

 private:
  std::int64_t vocab_size_;
  int num_layers_;
  std::int64_t max_positions_;
  bool fail_next_ = false;
  bool zero_logits_ = false;
  std::optional<kernels::DeviceMemory> device_memory_;
  std::unique_ptr<model::ModelMemory> memory_;
  std::int64_t forward_calls_ = 0;
  std::int64_t max_tokens_in_step_ = 0;
  std::int64_t mixed_steps_ = 0;
};

// Each token id decodes to a short piece of text; pieces have 1 to 3 characters so that stop
// strings can straddle token boundaries.
class FakeDetokenizer : public Detokenizer {
 public:
  std::string Decode(const std::vector<std::int32_t>& ids) const override;
  static std::string Piece(std::int32_t id);
};

// What a request produced, collected from its callbacks.
struct Collected {
  std::vector<std::int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  std::vector<TokenLogprob> prompt_logprobs;
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;
  std::optional<std::string> matched_stop_string;
  std::optional<std::int32_t> matched_stop_token;
  int reports = 0;
  int finished_reports = 0;
  std::int32_t cached_tokens = 0;
};

// Submits requests whose outputs are collected into `out` (one entry per request and index).
class Collector {
 public:
  // Returns the request id; outputs land in results(id)[index].
  std::int64_t Submit(Engine& engine, std::vector<std::int32_t> prompt, SamplingParams params);
  std::vector<Collected>& results(std::int64_t id) { return results_.at(id); }

 private:
  std::map<std::int64_t, std::vector<Collected>> results_;
};

// A greedy request that ignores EOS and runs `max_new_tokens`.
SamplingParams Greedy(int max_new_tokens);
// A deterministic pseudo-random prompt.
std::vector<std::int32_t> MakePrompt(std::uint64_t seed, int length, std::int64_t vocab_size);

}  // namespace fission::engine::testing
