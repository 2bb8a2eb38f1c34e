#include "engine/stateful_model_testlib.h"

#include <algorithm>

#include "base/error.h"

namespace fission::engine::testing {
namespace {

constexpr int kStateClass = 0, kEntryClass = 1;

std::uint64_t Mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

// The state after a token: what the sequence's state slot holds.
std::uint64_t NextState(std::uint64_t state, std::int32_t token, std::int32_t position) {
  return Mix(Mix(state, static_cast<std::uint64_t>(token) + 1), static_cast<std::uint64_t>(position));
}

}  // namespace

model::MemorySpec FakeStatefulLM::Memory() const {
  model::CacheClass state{"state", model::CacheKind::kPerRequest, 1, state_entries_, 1, {{"hash", DType::kI64, 1}}};
  model::CacheClass entries{"sums", model::CacheKind::kPaged, kTokensPerEntry, 0, 1, {{"sum_count", DType::kI64, 2}}};
  return {{state, entries}};
}

void FakeStatefulLM::AllocateMemory(const model::MemoryPlan& plan) {
  memory_ = std::make_unique<model::ModelMemory>(Memory(), plan, CpuAllocator());
}

std::vector<float> FakeStatefulLM::Logits(std::uint64_t state, std::span<const std::int32_t> table,
                                          std::int32_t position) const {
  const model::CacheClass& c = memory_->spec().classes[kEntryClass];
  const std::int64_t* sums = memory_->entries(kEntryClass, 0).ptr<std::int64_t>();
  std::uint64_t h = state;
  for (std::int32_t first = 0; first <= position; first += kTokensPerEntry) {
    const std::int64_t slot = model::PagedEntrySlot(c, table, memory_->plan().page_size, first);
    h = Mix(Mix(h, static_cast<std::uint64_t>(sums[2 * slot])), static_cast<std::uint64_t>(sums[2 * slot + 1]));
  }
  std::vector<float> logits(vocab_size_);
  for (std::int64_t v = 0; v < vocab_size_; ++v)
    logits[v] = static_cast<float>(Mix(h, static_cast<std::uint64_t>(v)) >> 40);
  return logits;
}

model::StepLogits FakeStatefulLM::Forward(const model::ForwardBatch& batch) {
  FISSION_CHECK(memory_ != nullptr, "Forward before AllocateMemory");
  const model::CacheClass& c = memory_->spec().classes[kEntryClass];
  const std::int64_t page_size = memory_->plan().page_size;
  std::int64_t* states = memory_->entries(kStateClass, 0).ptr<std::int64_t>();
  std::int64_t* sums = memory_->entries(kEntryClass, 0).ptr<std::int64_t>();
  max_sequences_in_step_ = std::max(max_sequences_in_step_, static_cast<int>(batch.sequences.size()));
  std::set<std::int32_t> slots;
  std::vector<std::vector<float>> rows(batch.num_tokens());
  for (const model::SequenceSlice& s : batch.sequences) {
    FISSION_CHECK(s.state_slot >= 0 && s.state_slot < memory_->plan().num_state_slots, "state slot ", s.state_slot);
    FISSION_CHECK(slots.insert(s.state_slot).second, "state slot ", s.state_slot, " named twice in one step");
    slots_seen_.insert(s.state_slot);
    std::int64_t& slot_state = states[static_cast<std::int64_t>(s.state_slot) * state_entries_];
    std::uint64_t state = s.context_len == 0 ? 0 : static_cast<std::uint64_t>(slot_state);
    for (std::int32_t i = s.query_start; i < s.query_start + s.query_len; ++i) {
      const std::int32_t position = batch.positions[i];
      state = NextState(state, batch.token_ids[i], position);
      const std::int64_t slot = model::PagedEntrySlot(c, s.block_table, page_size, position);
      FISSION_CHECK(slot >= 0 && slot < memory_->num_entries(kEntryClass));
      if (position % kTokensPerEntry == 0) sums[2 * slot] = sums[2 * slot + 1] = 0;  // an entry starts
      sums[2 * slot] += batch.token_ids[i];
      sums[2 * slot + 1] += 1;
      rows[i] = Logits(state, s.block_table, position);
    }
    slot_state = static_cast<std::int64_t>(state);
  }
  Buffer logits(DType::kF32, Shape{static_cast<std::int64_t>(batch.logits_indices.size()), vocab_size_});
  for (std::size_t r = 0; r < batch.logits_indices.size(); ++r)
    std::copy(rows[batch.logits_indices[r]].begin(), rows[batch.logits_indices[r]].end(),
              logits.ptr<float>() + r * vocab_size_);
  return model::StepLogits(std::move(logits));
}

std::vector<std::int32_t> FakeStatefulLM::ReferenceGreedy(const std::vector<std::int32_t>& prompt,
                                                          int max_new_tokens) const {
  std::vector<std::int32_t> tokens = prompt, out;
  for (int n = 0; n < max_new_tokens; ++n) {
    std::uint64_t state = 0;
    for (std::size_t p = 0; p < tokens.size(); ++p) state = NextState(state, tokens[p], static_cast<std::int32_t>(p));
    std::uint64_t h = state;
    for (std::size_t first = 0; first < tokens.size(); first += kTokensPerEntry) {
      std::int64_t sum = 0, count = 0;
      for (std::size_t p = first; p < std::min(tokens.size(), first + kTokensPerEntry); ++p, ++count) sum += tokens[p];
      h = Mix(Mix(h, static_cast<std::uint64_t>(sum)), static_cast<std::uint64_t>(count));
    }
    std::int32_t best = 0;
    std::uint64_t best_value = 0;
    for (std::int64_t v = 0; v < vocab_size_; ++v) {
      const std::uint64_t value = Mix(h, static_cast<std::uint64_t>(v)) >> 40;
      if (value > best_value) {
        best_value = value;
        best = static_cast<std::int32_t>(v);
      }
    }
    tokens.push_back(best);
    out.push_back(best);
  }
  return out;
}

}  // namespace fission::engine::testing
