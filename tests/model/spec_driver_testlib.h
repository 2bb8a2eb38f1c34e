// Test helper: drives a model with a draft layer through speculative decoding's steps the way the
// engine does (target steps and verify runs, the draft extend over the kept rows, chained draft
// steps), over interleaved pages of its own; and runs one scenario in a model under test and a
// reference model side by side (the CPU replaying backend's tests and the CUDA graph tests).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/causal_lm.h"

namespace fission::model {

using LogitRows = std::vector<std::vector<float>>;

// Drives one model through target and draft steps the way the engine does, over pages of its own.
class SpecDriver {
 public:
  // `sequences` sequences of `pages_per_sequence` pages each (re)allocated in the model's memory.
  SpecDriver(CausalLM& model, int sequences, std::int32_t page_size = 4, std::int32_t pages_per_sequence = 24);

  // One target step: each chunk's tokens at the sequence's next positions (as a verify run when
  // `verify`, every row's logits; else only the last row's). Commit says which rows are kept.
  LogitRows Target(const std::vector<std::pair<int, std::vector<std::int32_t>>>& chunks,
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
  // with its next token known), logits at each one's last row. `padded` > 0 (after verify runs):
  // padded to that many rows a sequence as the engine pads it (model/draft_batch.h), its rows
  // decode rows.
  LogitRows Extend(const std::vector<std::int32_t>& rows, std::int32_t padded = 0) {
    DraftBatch d;
    d.source = DraftBatch::Source::kTarget;
    chain_rows_.clear();
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const SequenceSlice& t = last_target_.sequences[k];
      const int seq = seq_of_[k];
      const Seq& s = seqs_[seq];
      const ExtendRows shape = PadExtend(t.context_len, rows[k], padded);
      SequenceSlice slice = Slice(s, d.batch.num_tokens(), shape.size(), shape.begin());
      slice.verify = padded > 0 && rows[k] <= padded;  // more rows: a prefill chunk's
      d.batch.sequences.push_back(slice);
      for (std::int32_t p = shape.begin(); p < t.context_len; ++p) {  // padding rows
        d.batch.token_ids.push_back(0);
        d.batch.positions.push_back(p);
        d.batch.kv_slots.push_back(-1);
        d.hidden_rows.push_back(t.query_start);
      }
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
  LogitRows Chain(const std::vector<std::int32_t>& positions,
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
  SequenceSlice Slice(const Seq& s, std::int32_t start, std::int32_t len, std::int32_t context) {
    SequenceSlice slice;
    slice.query_start = start;
    slice.query_len = len;
    slice.context_len = context;
    slice.block_table.assign(s.pages.begin(), s.pages.begin() + (context + len + page_ - 1) / page_);
    return slice;
  }
  void AddRow(const Seq& s, std::int32_t pos, std::int32_t token, ForwardBatch* b) {
    b->token_ids.push_back(token);
    b->positions.push_back(pos);
    b->kv_slots.push_back(static_cast<std::int64_t>(s.pages[pos / page_]) * page_ + pos % page_);
  }
  LogitRows Rows(StepLogits logits) const {
    const Buffer host = HostLogits(std::move(logits));
    const std::int64_t vocab = model_.vocab_size();
    LogitRows rows;
    for (std::int64_t r = 0; r < host.tensor().shape[0]; ++r)
      rows.emplace_back(host.ptr<float>() + r * vocab, host.ptr<float>() + (r + 1) * vocab);
    return rows;
  }

  CausalLM& model_;
  std::int32_t page_;
  std::vector<Seq> seqs_;
  ForwardBatch last_target_;
  std::vector<int> seq_of_;
  std::vector<std::int32_t> chain_rows_;  // each chunk's row in the last draft step
};


// Compares one step's logits rows of the model under test with the reference's; `batch` is the
// step's sequences and `what` names the step.
using CompareSteps = std::function<void(const LogitRows& got, const LogitRows& want, std::size_t batch,
                                        const std::string& what)>;

// Prefills `lengths` (with their draft extends), then per round and batch (sequence indices): a
// verify run of each sequence's next token and `drafts` draft tokens, `(round + k) % (drafts + 1)`
// of them kept by the batch's k-th sequence (so a batch mixes every count), the draft extend over
// the kept rows and `drafts - 1` chained draft steps, in both models, feeding both the reference's
// greedy tokens; `compare` sees every step. The model under test is asked to capture its graphs
// first (CaptureDecodeGraphs(drafts)), as the engine does, and the extends after verify runs are
// padded as it asks (CausalLM::padded_extend_rows) in both models.
void SpeculateBoth(CausalLM& test, CausalLM& reference, const std::vector<int>& lengths,
                   const std::vector<std::vector<int>>& batches, int rounds, int drafts, const CompareSteps& compare,
                   std::int32_t page_size = 4);

}  // namespace fission::model
