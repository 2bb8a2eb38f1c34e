#include "engine/fake_model_testlib.h"

#include <stdexcept>

namespace fission::engine::testing {

namespace {

constexpr std::int64_t kWidth = 3;

std::uint64_t Mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

// The row a layer stores for a token at a position.
void MakeRow(std::int32_t token, std::int32_t position, int layer, float* row) {
  row[0] = static_cast<float>(token);
  row[1] = static_cast<float>(position);
  row[2] = static_cast<float>((token * 31 + position * 7 + layer * 1009) % 8191);
}

std::uint64_t MixRow(std::uint64_t h, const float* row) {
  for (std::int64_t i = 0; i < kWidth; ++i) h = Mix(h, static_cast<std::uint64_t>(static_cast<std::int64_t>(row[i])));
  return h;
}

void LogitsFromHash(std::uint64_t h, std::int64_t vocab, float* out) {
  for (std::int64_t v = 0; v < vocab; ++v) {
    const std::uint64_t x = Mix(h, static_cast<std::uint64_t>(v) + 1);
    out[v] = static_cast<float>(static_cast<double>(x >> 40) / static_cast<double>(1 << 24) * 8.0);
  }
}

}  // namespace

model::MemorySpec FakeCausalLM::Memory() const {
  model::CacheClass rows;
  rows.name = "rows";
  rows.layers = num_layers_;
  rows.fields = {{"row", DType::kF32, kWidth}};
  return {{rows}};
}

void FakeCausalLM::AllocateMemory(const model::MemoryPlan& plan) {
  memory_ = std::make_unique<model::ModelMemory>(Memory(), plan, CpuAllocator());
}

model::StepLogits FakeCausalLM::Forward(const model::ForwardBatch& batch) {
  FISSION_CHECK(memory_ != nullptr, "Forward before AllocateMemory");
  const model::ModelMemory& memory = *memory_;
  ++forward_calls_;
  if (fail_next_) {
    fail_next_ = false;
    throw std::runtime_error("injected failure");
  }
  max_tokens_in_step_ = std::max<std::int64_t>(max_tokens_in_step_, batch.num_tokens());
  bool has_decode = false, has_prefill = false;
  for (const model::SequenceSlice& s : batch.sequences) (s.query_len == 1 && s.context_len > 0 ? has_decode : has_prefill) = true;
  mixed_steps_ += has_decode && has_prefill;

  const std::int64_t page_size = memory.plan().page_size;
  // Write the new rows first: a query sees its own step's earlier tokens, as causal attention does.
  for (std::int32_t i = 0; i < batch.num_tokens(); ++i) {
    FISSION_CHECK(batch.kv_slots[i] >= 0 && batch.kv_slots[i] < memory.num_entries(0));
    for (int l = 0; l < num_layers_; ++l)
      MakeRow(batch.token_ids[i], batch.positions[i], l, memory.entries(0, l).ptr<float>() + batch.kv_slots[i] * kWidth);
  }
  Buffer logits(DType::kF32, Shape{static_cast<std::int64_t>(batch.logits_indices.size()), vocab_size_});
  if (zero_logits_) {
    std::fill(logits.ptr<float>(), logits.ptr<float>() + logits.tensor().numel(), 0.0f);
    return model::StepLogits(std::move(logits));
  }
  for (std::size_t r = 0; r < batch.logits_indices.size(); ++r) {
    const std::int32_t index = batch.logits_indices[r];
    const model::SequenceSlice* seq = nullptr;
    for (const model::SequenceSlice& s : batch.sequences)
      if (index >= s.query_start && index < s.query_start + s.query_len) seq = &s;
    FISSION_CHECK(seq != nullptr);
    const std::int32_t position = seq->context_len + (index - seq->query_start);
    std::uint64_t h = 0;
    for (std::int32_t j = 0; j <= position; ++j) {
      const std::int64_t page = seq->block_table.at(j / page_size);
      const std::int64_t slot = page * page_size + j % page_size;
      for (int l = 0; l < num_layers_; ++l) h = MixRow(h, memory.entries(0, l).ptr<float>() + slot * kWidth);
    }
    LogitsFromHash(h, vocab_size_, logits.ptr<float>() + r * vocab_size_);
  }
  return model::StepLogits(std::move(logits));
}

std::vector<float> FakeCausalLM::ReferenceLogits(const std::vector<std::int32_t>& tokens) const {
  std::uint64_t h = 0;
  float row[kWidth];
  for (std::size_t j = 0; j < tokens.size(); ++j) {
    for (int l = 0; l < num_layers_; ++l) {
      MakeRow(tokens[j], static_cast<std::int32_t>(j), l, row);
      h = MixRow(h, row);
    }
  }
  std::vector<float> logits(vocab_size_);
  LogitsFromHash(h, vocab_size_, logits.data());
  return logits;
}

std::vector<std::int32_t> FakeCausalLM::ReferenceGreedy(const std::vector<std::int32_t>& prompt,
                                                        int max_new_tokens) const {
  std::vector<std::int32_t> tokens = prompt;
  std::vector<std::int32_t> out;
  for (int i = 0; i < max_new_tokens; ++i) {
    const std::vector<float> logits = ReferenceLogits(tokens);
    std::int32_t best = 0;
    for (std::int64_t v = 1; v < vocab_size_; ++v)
      if (logits[v] > logits[best]) best = static_cast<std::int32_t>(v);
    tokens.push_back(best);
    out.push_back(best);
  }
  return out;
}

std::string FakeDetokenizer::Piece(std::int32_t id) {
  std::string piece(1, static_cast<char>('a' + id % 26));
  if (id % 3 == 1) piece += static_cast<char>('a' + (id / 3) % 26);
  if (id % 5 == 2) piece += ' ';
  return piece;
}

std::string FakeDetokenizer::Decode(const std::vector<std::int32_t>& ids) const {
  std::string text;
  for (std::int32_t id : ids) text += Piece(id);
  return text;
}

std::int64_t Collector::Submit(Engine& engine, std::vector<std::int32_t> prompt, SamplingParams params) {
  const int n = params.n;
  Request request;
  request.prompt_ids = std::move(prompt);
  request.params = std::move(params);
  // The id is known only after Submit returns; the callback runs later, on Step.
  auto slot = std::make_shared<std::vector<Collected>*>(nullptr);
  request.callback = [slot](const RequestOutput& out) {
    Collected& c = (**slot)[out.index];
    c.tokens.insert(c.tokens.end(), out.token_ids.begin(), out.token_ids.end());
    c.logprobs.insert(c.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
    c.prompt_logprobs.insert(c.prompt_logprobs.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
    c.text += out.text;
    ++c.reports;
    if (out.finished) {
      ++c.finished_reports;
      c.finish_reason = out.finish_reason;
      c.error = out.error;
      c.matched_stop_string = out.matched_stop_string;
      c.matched_stop_token = out.matched_stop_token;
    }
    c.cached_tokens = out.cached_tokens;
  };
  const std::int64_t id = engine.Submit(std::move(request));
  results_[id].resize(n);
  *slot = &results_[id];
  return id;
}

SamplingParams Greedy(int max_new_tokens) {
  SamplingParams p;
  p.temperature = 0.0;
  p.max_new_tokens = max_new_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<std::int32_t> MakePrompt(std::uint64_t seed, int length, std::int64_t vocab_size) {
  std::vector<std::int32_t> prompt(length);
  std::uint64_t h = seed * 0x9e3779b97f4a7c15ull + 12345;
  for (int i = 0; i < length; ++i) {
    h = Mix(h, static_cast<std::uint64_t>(i));
    prompt[i] = static_cast<std::int32_t>(h % static_cast<std::uint64_t>(vocab_size));
  }
  return prompt;
}

}  // namespace fission::engine::testing
