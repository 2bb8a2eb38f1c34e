// Test helper: drives a CausalLM step by step over a paged cache with a scrambled page order, so
// that tests exercise block tables the way the engine uses them.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "model/causal_lm.h"

namespace fission::model {

std::string FixtureModelDir(const std::string& name);
double RelativeL2(const std::vector<float>& got, const float* want, std::int64_t n);
std::int32_t Argmax(const std::vector<float>& logits);
// n pseudo-random token ids below `vocab` from `seed`.
std::vector<std::int32_t> Tokens(std::size_t n, std::uint64_t seed, std::int64_t vocab);

class StepRunner {
 public:
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
  KvCache& cache() { return cache_; }
  // The cache slot of position `pos` of a sequence.
  std::int64_t Slot(int seq, std::int32_t pos) const;
  // The row of position `pos` of a sequence in layer `layer` of `cache` (this runner's by default).
  std::vector<float> KvRow(int seq, int layer, std::int32_t pos) const { return KvRow(cache_, seq, layer, pos); }
  std::vector<float> KvRow(const KvCache& cache, int seq, int layer, std::int32_t pos) const;

 private:
  struct Seq {
    std::vector<std::int32_t> tokens;
    std::vector<std::int32_t> pages;
  };
  CausalLM& model_;
  KvCache cache_;
  std::vector<std::int32_t> free_pages_;
  std::vector<Seq> seqs_;
};

// The mixed scenario the layout and device comparisons share: odd prompt lengths up to 300,
// chunked prefill, a prefix hit, prefill and decode in one step, then 32 greedy steps over five
// sequences. Returns every logits row, in order. With `tokens` empty the greedy tokens are the
// model's own and are appended to it; otherwise they are read from it (teacher forcing).
std::vector<std::vector<float>> RunMixedScenario(CausalLM& model, std::vector<std::int32_t>* tokens);

}  // namespace fission::model
