// Speculative decoding's captured steps on the CPU (model/replaying_backend.h): verify runs (every
// sequence its last token and S drafts, all rows returning logits) and the draft layer's chained
// steps (one row per sequence) run as graph replays at the captured sizes and padded to them; a
// replay gives the eager step's bits, the hidden rows it keeps feed the next draft step exactly as
// an eager step's do, and batches a graph does not take run eagerly.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/replaying_backend.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"

namespace fission::model {
namespace {

constexpr std::int32_t kPage = 4;
constexpr std::int32_t kPagesPerSequence = 24;

// Drives one model through target and draft steps the way the engine does, over pages of its own.
class SpecDriver {
 public:
  SpecDriver(CausalLM& model, int sequences) : model_(model), seqs_(sequences) {
    model.AllocateMemory({sequences * kPagesPerSequence, kPage, 0});
    // Sequence i holds pages i, i + n, i + 2n, ...: tables that interleave.
    for (int i = 0; i < sequences; ++i)
      for (int p = 0; p < kPagesPerSequence; ++p) seqs_[i].pages.push_back(p * sequences + i);
  }

  // One target step: each chunk's tokens at the sequence's next positions (as a verify run when
  // `verify`, every row's logits; else only the last row's). Commit says which rows are kept.
  std::vector<std::vector<float>> Target(const std::vector<std::pair<int, std::vector<std::int32_t>>>& chunks,
                                         bool verify) {
    ForwardBatch b;
    for (const auto& [seq, tokens] : chunks) {
      const Seq& s = seqs_[seq];
      SequenceSlice slice = Slice(s, b.num_tokens(), static_cast<std::int32_t>(tokens.size()), s.kv_len);
      slice.verify = verify;
      for (std::size_t j = 0; j < tokens.size(); ++j) {
        AddRow(s, slice.context_len + static_cast<std::int32_t>(j), tokens[j], &b);
        if (verify || j + 1 == tokens.size()) b.logits_indices.push_back(b.num_tokens() - 1);
      }
      b.sequences.push_back(slice);
    }
    last_target_ = b;
    return Rows(model_.Forward(b));
  }
  // The sequence's first `rows` rows of the last target step are kept, and `tokens` follow its
  // known tokens (the kept rows' next tokens: the run's accepted drafts and the target's own).
  void Commit(int seq, std::int32_t rows, const std::vector<std::int32_t>& tokens) {
    seqs_[seq].kv_len += rows;
    seqs_[seq].tokens.insert(seqs_[seq].tokens.end(), tokens.begin(), tokens.end());
  }

  // The draft extend after the last target step: chunk k's first `rows[k]` rows (committed, each
  // with its next token known), logits at each one's last row.
  std::vector<std::vector<float>> Extend(const std::vector<std::int32_t>& rows) {
    DraftBatch d;
    d.source = DraftBatch::Source::kTarget;
    chain_rows_.clear();
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const SequenceSlice& t = last_target_.sequences[k];
      const int seq = seq_of_[k];
      const Seq& s = seqs_[seq];
      d.batch.sequences.push_back(Slice(s, d.batch.num_tokens(), rows[k], t.context_len));
      for (std::int32_t j = 0; j < rows[k]; ++j) {
        AddRow(s, t.context_len + j, s.tokens[t.context_len + j + 1], &d.batch);
        d.hidden_rows.push_back(t.query_start + j);
      }
      d.batch.logits_indices.push_back(d.batch.num_tokens() - 1);
      chain_rows_.push_back(d.batch.num_tokens() - 1);
    }
    return Rows(model_.ForwardDraft(d));
  }
  // A chained draft step: chunk k's row at position `positions[k]` with input token `tokens[k]`,
  // reading the previous draft step's row of that chunk.
  std::vector<std::vector<float>> Chain(const std::vector<std::int32_t>& positions,
                                        const std::vector<std::int32_t>& tokens) {
    DraftBatch d;
    d.source = DraftBatch::Source::kDraft;
    for (std::size_t k = 0; k < positions.size(); ++k) {
      const Seq& s = seqs_[seq_of_[k]];
      d.batch.sequences.push_back(Slice(s, static_cast<std::int32_t>(k), 1, positions[k]));
      AddRow(s, positions[k], tokens[k], &d.batch);
      d.batch.logits_indices.push_back(static_cast<std::int32_t>(k));
      d.hidden_rows.push_back(chain_rows_[k]);
      chain_rows_[k] = static_cast<std::int32_t>(k);
    }
    return Rows(model_.ForwardDraft(d));
  }
  // Which sequence each chunk of the last target step was.
  void SetChunks(std::vector<int> seqs) { seq_of_ = std::move(seqs); }
  // The sequence's known tokens (the last one's KV is not written yet).
  const std::vector<std::int32_t>& tokens(int seq) const { return seqs_[seq].tokens; }

 private:
  struct Seq {
    std::vector<std::int32_t> tokens;
    std::int32_t kv_len = 0;
    std::vector<std::int32_t> pages;
  };
  static SequenceSlice Slice(const Seq& s, std::int32_t start, std::int32_t len, std::int32_t context) {
    SequenceSlice slice;
    slice.query_start = start;
    slice.query_len = len;
    slice.context_len = context;
    slice.block_table.assign(s.pages.begin(), s.pages.begin() + (context + len + kPage - 1) / kPage);
    return slice;
  }
  static void AddRow(const Seq& s, std::int32_t pos, std::int32_t token, ForwardBatch* b) {
    b->token_ids.push_back(token);
    b->positions.push_back(pos);
    b->kv_slots.push_back(static_cast<std::int64_t>(s.pages[pos / kPage]) * kPage + pos % kPage);
  }
  std::vector<std::vector<float>> Rows(StepLogits logits) const {
    const Buffer host = HostLogits(std::move(logits));
    const std::int64_t vocab = model_.vocab_size();
    std::vector<std::vector<float>> rows;
    for (std::int64_t r = 0; r < host.tensor().shape[0]; ++r)
      rows.emplace_back(host.ptr<float>() + r * vocab, host.ptr<float>() + (r + 1) * vocab);
    return rows;
  }

  CausalLM& model_;
  std::vector<Seq> seqs_;
  ForwardBatch last_target_;
  std::vector<int> seq_of_;
  std::vector<std::int32_t> chain_rows_;  // each chunk's row in the last draft step
};

void ExpectSameRows(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t r = 0; r < got.size(); ++r) EXPECT_EQ(got[r], want[r]) << what << ", row " << r;
}

class SpeculativeGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShardOptions options;
    options.cuda_graphs.batch_sizes = {2, 4};
    options.load_draft = true;
    replayed_ = LoadReplayed(FixtureModelDir("tiny-deepseek-v3"), options);
    LoadOptions eager;
    eager.load_draft = true;
    eager_ = LoadCausalLM(FixtureModelDir("tiny-deepseek-v3"), eager);
  }
  ReplayingBackend& backend() { return replayed_->backend; }
  CausalLM& graphs() { return *replayed_->model; }

  // Prefills `lengths`, then per round and batch (sequence indices): a verify run of each
  // sequence's next token and `drafts` draft tokens, `round % (drafts + 1)` of them accepted, the
  // draft extend over the committed rows and `drafts - 1` chained draft steps, in both models;
  // every logits row must be bit-identical.
  void SpeculateBoth(const std::vector<int>& lengths, const std::vector<std::vector<int>>& batches, int rounds,
                     int drafts) {
    SpecDriver a(graphs(), static_cast<int>(lengths.size())), b(*eager_, static_cast<int>(lengths.size()));
    graphs().CaptureDecodeGraphs(drafts);  // as the engine does, for its memory
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      const std::vector<std::int32_t> prompt = Tokens(lengths[i], 40 + i, eager_->vocab_size());
      const int s = static_cast<int>(i);
      a.SetChunks({s});
      b.SetChunks({s});
      const auto want = b.Target({{s, prompt}}, false);
      ExpectSameRows(a.Target({{s, prompt}}, false), want, "prefill");
      std::vector<std::int32_t> known = prompt;
      known.push_back(Argmax(want.back()));
      a.Commit(s, lengths[i], known);
      b.Commit(s, lengths[i], known);
      const std::vector<std::int32_t> rows = {lengths[i]};
      ExpectSameRows(a.Extend(rows), b.Extend(rows), "prefill extend");
    }
    for (int round = 0; round < rounds; ++round)
      for (const std::vector<int>& batch : batches) {
        const std::string what = StrCat("round ", round, ", batch of ", batch.size());
        std::vector<std::pair<int, std::vector<std::int32_t>>> chunks;
        for (int s : batch) {
          const std::int32_t next = b.tokens(s).back();
          std::vector<std::int32_t> run = {next};
          for (int d = 0; d < drafts; ++d) run.push_back(static_cast<std::int32_t>((next * 31 + 7 * d + round) % 512));
          chunks.push_back({s, run});
        }
        a.SetChunks(batch);
        b.SetChunks(batch);
        const auto verify = b.Target(chunks, true);
        ExpectSameRows(a.Target(chunks, true), verify, what + " (verify)");
        const std::int32_t accepted = round % (drafts + 1);
        std::vector<std::int32_t> rows, positions, tokens;
        for (std::size_t k = 0; k < batch.size(); ++k) {
          const int s = batch[k];
          // The accepted drafts and the target's own token after them.
          std::vector<std::int32_t> emitted(chunks[k].second.begin() + 1, chunks[k].second.begin() + 1 + accepted);
          emitted.push_back(Argmax(verify[k * (drafts + 1) + accepted]));
          a.Commit(s, accepted + 1, emitted);
          b.Commit(s, accepted + 1, emitted);
          rows.push_back(accepted + 1);
        }
        // The extend's rows: the run's first token and the accepted drafts, each reading its hidden row.
        const auto extend = b.Extend(rows);
        ExpectSameRows(a.Extend(rows), extend, what + " (extend)");
        for (std::size_t k = 0; k < batch.size(); ++k) {
          positions.push_back(static_cast<std::int32_t>(b.tokens(batch[k]).size()) - 1);
          tokens.push_back(Argmax(extend[k]));
        }
        for (int step = 1; step < drafts; ++step) {
          const auto chained = b.Chain(positions, tokens);
          ExpectSameRows(a.Chain(positions, tokens), chained, StrCat(what, " (draft step ", step, ")"));
          for (std::size_t k = 0; k < batch.size(); ++k) {
            ++positions[k];
            tokens[k] = Argmax(chained[k]);
          }
        }
      }
  }

  std::unique_ptr<ReplayedModel> replayed_;
  std::unique_ptr<CausalLM> eager_;
};

TEST_F(SpeculativeGraphsTest, VerifyAndDraftStepsReplayEagerBitsAndPad) {
  // Batches of 4 and 2 (captured sizes), 3 and 1 (padded to 4 and 2); contexts cross pages.
  SpeculateBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}, {0, 2, 3}, {2}}, 4, 3);
  // Decode, verify and draft graphs of sizes 4 and 2, each captured once; then every verify run
  // and every chained draft step (two a round and batch) is a replay, and so is the extend of a
  // run that kept no draft (one row a sequence: round 0's four batches).
  EXPECT_EQ(backend().captures, 6);
  EXPECT_EQ(backend().replays, 4 * 4 * (1 + 2) + 4);
}

TEST_F(SpeculativeGraphsTest, OneDraftHasNoChainedSteps) {
  SpeculateBoth({5, 2, 11}, {{0, 1, 2}, {2, 0}}, 3, 1);
  // Decode and verify runs of 2 tokens at sizes 4 and 2 at start-up, then draft graphs for the
  // extends of runs that kept no draft (rounds 0 and 2).
  EXPECT_EQ(backend().captures, 6);
  EXPECT_EQ(backend().replays, 2 * 3 + 2 * 2);
}

TEST_F(SpeculativeGraphsTest, CaptureAtStartUpCoversEverySet) {
  graphs().AllocateMemory({4 * kPagesPerSequence, kPage, 0});
  graphs().CaptureDecodeGraphs(3);
  // Decode, verify (4 tokens a sequence) and draft graphs, sizes 4 and 2 each.
  EXPECT_EQ(backend().captures, 6);
  // A new memory drops them, and they are made again as batches need them: verify runs of 4
  // tokens (what the engine announced), not those of other lengths.
  SpecDriver a(graphs(), 4), b(*eager_, 4);
  for (int s = 0; s < 4; ++s) {
    const std::vector<std::int32_t> prompt = Tokens(3 + s, 90 + s, eager_->vocab_size());
    ExpectSameRows(a.Target({{s, prompt}}, false), b.Target({{s, prompt}}, false), "prefill");
    std::vector<std::int32_t> known = prompt;
    known.push_back(17);
    a.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
    b.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
  }
  const std::vector<std::int32_t> four = {17, 5, 6, 7}, three = {17, 5, 6};
  ExpectSameRows(a.Target({{0, four}, {1, four}, {2, four}, {3, four}}, true),
                 b.Target({{0, four}, {1, four}, {2, four}, {3, four}}, true), "verify of 4");
  EXPECT_EQ(backend().captures, 6 + 1);
  EXPECT_EQ(backend().replays, 1);
  ExpectSameRows(a.Target({{0, three}, {1, three}}, true), b.Target({{0, three}, {1, three}}, true), "verify of 3");
  EXPECT_EQ(backend().captures, 6 + 1);
  EXPECT_EQ(backend().replays, 1);
}

TEST_F(SpeculativeGraphsTest, BatchesAGraphDoesNotTakeRunEagerly) {
  SpecDriver a(graphs(), 6), b(*eager_, 6);
  graphs().CaptureDecodeGraphs(2);
  const int captured = backend().captures;
  for (int s = 0; s < 6; ++s) {
    const std::vector<std::int32_t> prompt = Tokens(5 + s, 70 + s, eager_->vocab_size());
    ExpectSameRows(a.Target({{s, prompt}}, false), b.Target({{s, prompt}}, false), "prefill");
    std::vector<std::int32_t> known = prompt;
    known.push_back(11);  // every run's first token
    a.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
    b.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
  }
  const std::vector<std::int32_t> run = {11, 12, 13};
  // A verify run beside a decode row, verify runs of different lengths, five runs (over the
  // largest size), a verify run beside a prefill chunk: all eager, all equal.
  const std::vector<std::vector<std::pair<int, std::vector<std::int32_t>>>> steps = {
      {{0, run}, {1, {4}}},
      {{0, run}, {1, {21, 22}}},
      {{0, run}, {5, {1, 2, 3, 4, 5, 6}}},
      {{0, run}, {1, run}, {2, run}, {3, run}, {4, run}},
  };
  for (std::size_t i = 0; i < steps.size(); ++i)
    ExpectSameRows(a.Target(steps[i], true), b.Target(steps[i], true), StrCat("step ", i));
  // After the last step (five runs, their first rows kept), the draft extend and a chained draft
  // step of five rows (over the largest size) run eagerly too.
  a.SetChunks({0, 1, 2, 3, 4});
  b.SetChunks({0, 1, 2, 3, 4});
  std::vector<std::int32_t> positions, tokens;
  for (int s = 0; s < 5; ++s) {
    a.Commit(s, 1, {9});
    b.Commit(s, 1, {9});
    positions.push_back(static_cast<std::int32_t>(b.tokens(s).size()) - 1);
    tokens.push_back(3 + s);
  }
  const std::vector<std::int32_t> rows = {1, 1, 1, 1, 1};
  ExpectSameRows(a.Extend(rows), b.Extend(rows), "extend");
  ExpectSameRows(a.Chain(positions, tokens), b.Chain(positions, tokens), "chain");
  EXPECT_EQ(backend().captures, captured);
  EXPECT_EQ(backend().replays, 0);
}

TEST_F(SpeculativeGraphsTest, AFailedCaptureFallsBackToEagerSteps) {
  backend().fail_captures = true;
  SpeculateBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}}, 2, 2);
  // At start-up each set tried its largest size, then its smallest; no size is tried again.
  EXPECT_EQ(backend().captures, 3 * 2);
  EXPECT_EQ(backend().replays, 0);
}

}  // namespace
}  // namespace fission::model
