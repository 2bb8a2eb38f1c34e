// A deterministic CausalLM with the two kinds of memory the model contract allows beyond one row
// per token: a per-request state (a running hash of the sequence, in its state slot) and a paged
// class of one entry per 4 tokens (the sum and count of those tokens' ids). A query's logits are a
// pseudo-random function of the state after it and of every entry of its sequence up to it, read
// back through the block table, so a wrong state slot, a slot shared by two sequences, a state not
// started afresh after preemption, a wrong page or a chunk cut in the middle of an entry changes
// the output. ReferenceGreedy computes the same function from the token ids alone.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "model/causal_lm.h"
#include "model/model_memory.h"

namespace fission::engine::testing {

class FakeStatefulLM : public model::CausalLM {
 public:
  static constexpr std::int32_t kTokensPerEntry = 4;
  // `state_entries`: entries of the per-request class (only the first holds the state; more make
  // a slot bigger, as a window ring is).
  explicit FakeStatefulLM(std::int32_t state_entries = 1, std::int64_t vocab_size = 97)
      : state_entries_(state_entries), vocab_size_(vocab_size) {}

  std::string architecture() const override { return "FakeStatefulLM"; }
  std::int64_t vocab_size() const override { return vocab_size_; }
  std::int64_t max_position_embeddings() const override { return 4096; }
  model::MemorySpec Memory() const override;
  void AllocateMemory(const model::MemoryPlan& plan) override;
  model::StepLogits Forward(const model::ForwardBatch& batch) override;

  std::vector<std::int32_t> ReferenceGreedy(const std::vector<std::int32_t>& prompt, int max_new_tokens) const;
  const model::MemoryPlan& memory_plan() const { return memory_->plan(); }
  // The most sequences one step ran, and every state slot a step named.
  int max_sequences_in_step() const { return max_sequences_in_step_; }
  const std::set<std::int32_t>& slots_seen() const { return slots_seen_; }

 private:
  std::vector<float> Logits(std::uint64_t state, std::span<const std::int32_t> table, std::int32_t position) const;

  std::int32_t state_entries_;
  std::int64_t vocab_size_;
  std::unique_ptr<model::ModelMemory> memory_;
  int max_sequences_in_step_ = 0;
  std::set<std::int32_t> slots_seen_;
};

}  // namespace fission::engine::testing
