#include "model/step_runner_testlib.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include <algorithm>
#include <random>

#include "base/error.h"
#include "model/decoder.h"
#include "model/runtime/device_model.h"
#include "model/runtime/parallel_model.h"

namespace fission::model {

std::string FixtureModelDir(const std::string& name) {
  // FISSION_SOURCE_DIR in the environment: binaries built elsewhere and run beside a copy of the tree.
  const char* root = std::getenv("FISSION_SOURCE_DIR");
  return std::string(root != nullptr ? root : FISSION_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

double RelativeL2(const std::vector<float>& got, const float* want, std::int64_t n) {
  double diff = 0.0, norm = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

double WorstRowError(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                     std::int64_t vocab, double tolerance) {
  if (got.size() != want.size()) {
    ADD_FAILURE() << got.size() << " rows, expected " << want.size();
    return INFINITY;
  }
  double worst = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double err = RelativeL2(got[i], want[i].data(), vocab);
    worst = std::max(worst, err);
    if (err > tolerance) {
      ADD_FAILURE() << "row " << i << ": relative L2 " << err << " above " << tolerance;
      break;
    }
  }
  return worst;
}

std::int32_t Argmax(const std::vector<float>& logits) {
  return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

const ModelMemory& MemoryOf(CausalLM& model, int rank) {
  CausalLM* shard = &model;
  if (auto* parallel = dynamic_cast<ParallelCausalLM*>(shard)) shard = &parallel->rank(rank);
  if (auto* device = dynamic_cast<DeviceCausalLM*>(shard)) shard = &device->wrapped();
  auto* decoder = dynamic_cast<DecoderModel*>(shard);
  FISSION_CHECK(decoder != nullptr, "not a DecoderModel: ", model.architecture());
  return decoder->memory();
}

StepRunner::StepRunner(CausalLM& model, std::int64_t page_size, std::int64_t num_pages, std::uint64_t shuffle_seed)
    : model_(model), page_size_(page_size) {
  // A model with per-request state (DeepSeek-V4) gets one state slot per sequence the runner adds.
  model.AllocateMemory({num_pages, page_size, model.Memory().has_per_request_state() ? kStateSlots : 0});
  for (std::int32_t p = 0; p < num_pages; ++p) free_pages_.push_back(p);
  std::mt19937_64 rng(shuffle_seed);
  std::shuffle(free_pages_.begin(), free_pages_.end(), rng);
}

int StepRunner::AddSequence() {
  seqs_.emplace_back();
  return static_cast<int>(seqs_.size()) - 1;
}

int StepRunner::ForkPrefix(int seq, std::int32_t tokens) {
  FISSION_CHECK(tokens % page_size_ == 0 && tokens <= length(seq));
  Seq fork;
  fork.tokens.assign(seqs_[seq].tokens.begin(), seqs_[seq].tokens.begin() + tokens);
  fork.pages.assign(seqs_[seq].pages.begin(), seqs_[seq].pages.begin() + tokens / page_size_);
  seqs_.push_back(fork);
  return static_cast<int>(seqs_.size()) - 1;
}

std::vector<std::vector<float>> StepRunner::Prefill(int seq, const std::vector<std::int32_t>& tokens, bool all_logits) {
  std::vector<std::vector<float>> rows = Step({{seq, tokens}});
  if (!all_logits) rows.erase(rows.begin(), rows.end() - 1);
  return rows;
}

std::vector<std::vector<float>> StepRunner::Step(const std::vector<Chunk>& chunks) {
  ForwardBatch batch;
  for (const Chunk& c : chunks) {
    Seq& s = seqs_[c.seq];
    SequenceSlice slice;
    slice.query_start = batch.num_tokens();
    slice.query_len = static_cast<std::int32_t>(c.tokens.size());
    slice.context_len = static_cast<std::int32_t>(s.tokens.size());
    FISSION_CHECK(static_cast<std::int64_t>(s.pages.size()) * page_size_ >= slice.context_len);
    for (std::int32_t i = 0; i < slice.query_len; ++i) {
      const std::int32_t pos = slice.context_len + i;
      if (pos / page_size_ >= static_cast<std::int64_t>(s.pages.size())) {
        FISSION_CHECK(!free_pages_.empty(), "test cache too small");
        s.pages.push_back(free_pages_.back());
        free_pages_.pop_back();
      }
      batch.token_ids.push_back(c.tokens[i]);
      batch.positions.push_back(pos);
      batch.kv_slots.push_back(s.pages[pos / page_size_] * page_size_ + pos % page_size_);
      batch.logits_indices.push_back(slice.query_start + i);
    }
    slice.block_table = s.pages;
    if (model_.Memory().has_per_request_state()) {
      FISSION_CHECK(c.seq < kStateSlots, "the runner has ", kStateSlots, " state slots");
      slice.state_slot = c.seq;
    }
    batch.sequences.push_back(slice);
    s.tokens.insert(s.tokens.end(), c.tokens.begin(), c.tokens.end());
  }
  Buffer logits = ForwardToHost(model_, batch);
  const std::int64_t vocab = model_.vocab_size();
  std::vector<std::vector<float>> rows;
  for (std::size_t r = 0; r < batch.logits_indices.size(); ++r)
    rows.emplace_back(logits.ptr<float>() + r * vocab, logits.ptr<float>() + (r + 1) * vocab);
  return rows;
}

std::int64_t StepRunner::Slot(int seq, std::int32_t pos) const {
  const Seq& s = seqs_[seq];
  return s.pages[pos / page_size_] * page_size_ + pos % page_size_;
}

std::vector<float> StepRunner::KvRow(int seq, int layer, std::int32_t pos, int rank) const {
  const Tensor& t = MemoryOf(model_, rank).entries(0, layer);
  FISSION_CHECK(t.dtype == DType::kF32, "KvRow reads fp32 memory");
  const std::int64_t slot = Slot(seq, pos);
  return std::vector<float>(t.ptr<float>() + slot * t.shape[1], t.ptr<float>() + (slot + 1) * t.shape[1]);
}

std::vector<std::int32_t> Tokens(std::size_t n, std::uint64_t seed, std::int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % vocab);
  return ids;
}

std::vector<std::vector<float>> RunMixedScenario(CausalLM& model, std::vector<std::int32_t>* tokens) {
  const std::int64_t vocab = model.vocab_size();
  const bool record = tokens->empty();
  StepRunner r(model, 4, 256, 9);
  const auto a = Tokens(300, 1, vocab), c = Tokens(77, 3, vocab), d = Tokens(151, 4, vocab);
  const int sa = r.AddSequence(), sb = r.AddSequence(), sc = r.AddSequence(), sd = r.AddSequence();
  std::vector<std::vector<float>> rows, step;
  auto keep = [&](std::vector<std::vector<float>> s) { rows.insert(rows.end(), s.begin(), s.end()); };
  keep(r.Step({{sa, {a.begin(), a.begin() + 128}}, {sb, {7}}, {sc, c}}));
  keep(r.Step({{sa, {a.begin() + 128, a.begin() + 256}}, {sd, d}}));
  keep(r.Step({{sa, {a.begin() + 256, a.end()}}, {sb, {9}}, {sc, {11}}}));
  // A prefix hit: a new sequence shares a's first 64 cached tokens and adds 33 of its own.
  const int se = r.ForkPrefix(sa, 64);
  keep(r.Step({{se, Tokens(33, 5, vocab)}, {sd, {13}}}));
  std::vector<int> seqs = {sa, sb, sc, sd, se};
  std::vector<std::int32_t> next(seqs.size());
  for (std::size_t i = 0; i < seqs.size(); ++i) next[i] = static_cast<std::int32_t>(i + 2);
  std::size_t k = 0;
  for (int t = 0; t < 32; ++t) {
    std::vector<StepRunner::Chunk> chunks;
    for (std::size_t i = 0; i < seqs.size(); ++i) chunks.push_back({seqs[i], {next[i]}});
    step = r.Step(chunks);
    for (std::size_t i = 0; i < seqs.size(); ++i, ++k) {
      if (record) tokens->push_back(Argmax(step[i]));
      next[i] = (*tokens)[k];
    }
    keep(step);
  }
  return rows;
}

void DecodeBothBitIdentical(StepRunner& a, StepRunner& b, const std::vector<std::vector<int>>& batches, int rounds,
                            std::vector<std::int32_t>& next) {
  for (int round = 0; round < rounds; ++round)
    for (const std::vector<int>& batch : batches) {
      std::vector<StepRunner::Chunk> chunks;
      for (int s : batch) chunks.push_back({s, {next[s]}});
      const auto got = a.Step(chunks);
      const auto want = b.Step(chunks);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t r = 0; r < batch.size(); ++r) {
        EXPECT_EQ(got[r], want[r]) << "round " << round << ", batch of " << batch.size() << ", row " << r;
        next[batch[r]] = Argmax(want[r]);
      }
    }
}

}  // namespace fission::model
