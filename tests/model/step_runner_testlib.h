// Test helper: drives a CausalLM step by step over its paged memory with a scrambled page order, so
// that tests exercise block tables the way the engine uses them. Making a runner (re)allocates the
// model's memory: use one runner of a model at a time.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "model/model_memory.h"

namespace fission::model {

std::string FixtureModelDir(const std::string& name);
double RelativeL2(const std::vector<float>& got, const float* want, std::int64_t n);
// The worst relative L2 of logits rows `got` against `want` (as many, each `vocab` wide); a test
// failure names the first row above `tolerance` (or a count mismatch), and the comparison stops there.
double WorstRowError(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                     std::int64_t vocab, double tolerance);
std::int32_t Argmax(const std::vector<float>& logits);
// n pseudo-random token ids below `vocab` from `seed`.
std::vector<std::int32_t> Tokens(std::size_t n, std::uint64_t seed, std::int64_t vocab);
// The storage of rank `rank` of a model (a DecoderModel, alone, on a device or in a
// ParallelCausalLM on this process).
const ModelMemory& MemoryOf(CausalLM& model, int rank = 0);

class StepRunner {
 public:
  // State slots of a model with per-request classes: sequence i has slot i.
  static constexpr int kStateSlots = 16;
  StepRunner(CausalLM& model, std::int64_t page_size, std::int64_t num_pages, std::uint64_t shuffle_seed);

  int AddSequence();
  // A new sequence that shares the first `tokens` (a multiple of the page size) of `seq`'s cached
  // tokens and pages, as a prefix-cache hit does.
  int ForkPrefix(int seq, std::int32_t tokens);
  std::int32_t length(int seq) const { return static_cast<std::int32_t>(seqs_[seq].tokens.size()); }
  // Appends `tokens` to a sequence in one step; returns the logits of every new token if
  // `all_logits`, else only of the last.
  std::vector<std::vector<float>> Prefill(int seq, const std::vector<std::int32_t>& tokens, bool all_logits);
  std::vector<float> Decode(int seq, std::int32_t token) { return Prefill(seq, {token}, false).back(); }
  // Several sequences in one step: each entry appends tokens to one sequence; returns the logits of
  // every new token of every entry, in order.
  struct Chunk {
    int seq;
    std::vector<std::int32_t> tokens;
  };
  std::vector<std::vector<float>> Step(const std::vector<Chunk>& chunks);
  std::int64_t page_size() const { return page_size_; }
  // The cache slot of position `pos` of a sequence.
  std::int64_t Slot(int seq, std::int32_t pos) const;
  // The latent row (cache class 0) of position `pos` of a sequence in layer `layer` of rank
  // `rank`'s memory (fp32 memory only).
  std::vector<float> KvRow(int seq, int layer, std::int32_t pos, int rank = 0) const;

 private:
  struct Seq {
    std::vector<std::int32_t> tokens;
    std::vector<std::int32_t> pages;
  };
  CausalLM& model_;
  std::int64_t page_size_;
  std::vector<std::int32_t> free_pages_;
  std::vector<Seq> seqs_;
};

// The mixed scenario the layout and device comparisons share: odd prompt lengths up to 300,
// chunked prefill, a prefix hit, prefill and decode in one step, then 32 greedy steps over five
// sequences. Returns every logits row, in order. With `tokens` empty the greedy tokens are the
// model's own and are appended to it; otherwise they are read from it (teacher forcing).
std::vector<std::vector<float>> RunMixedScenario(CausalLM& model, std::vector<std::int32_t>* tokens);

// `rounds` rounds of decode steps of the sequences in `batches` (indices of `a`'s and `b`'s
// sequences, one step each), fed `next` (each sequence's next token, updated with b's greedy
// token): every row of `a` must be bit-identical to `b`'s (a captured model against an eager one).
void DecodeBothBitIdentical(StepRunner& a, StepRunner& b, const std::vector<std::vector<int>>& batches, int rounds,
                            std::vector<std::int32_t>& next);

}  // namespace fission::model
