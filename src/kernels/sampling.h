// Choosing tokens from logits rows: the parameters of one row, its result, the seeded uniform draw
// and the host reference (kernels/cpu/cpu_sampling.cc) that every backend's Sample must match.
//
// Per row, in order (docs/engine.md, "Sampling"): repetition penalty over `seen_tokens` (positive
// logits divided, negative multiplied), frequency and presence penalties over `output_ids`, the
// `masked_ids` and the tokens outside `allowed_tokens` set to −∞, then the temperature. Greedy rows (temperature 0) take the argmax, ties to
// the lower id. Sampled rows take the softmax (fp64), keep `top_k`, then the smallest most-likely
// prefix reaching `top_p`, then those with probability ≥ `min_p` × the best, and make one
// inverse-CDF draw with UniformFromSeed(seed, counter). Logprobs are the log-softmax of the row after
// penalties and temperature. A row with `forced_token` ≥ 0 chooses nothing: it reports that token's
// logprob (prompt logprobs, which use raw logits: no penalties, temperature 0).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#if defined(__CUDACC__)
#define FISSION_HOST_DEVICE __host__ __device__
#else
#define FISSION_HOST_DEVICE
#endif

namespace fission::kernels {

// The most alternatives a row may ask for.
inline constexpr int kMaxSampleTopLogprobs = 20;

struct SamplingRow {
  std::int64_t row = 0;  // the logits row this entry reads
  double temperature = 1.0;  // 0: greedy
  std::int32_t top_k = -1;   // <= 0 or >= vocab: all
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  double frequency_penalty = 0.0;
  double presence_penalty = 0.0;
  std::uint64_t seed = 0;
  std::uint64_t counter = 0;  // the index of the token being produced
  bool want_logprob = false;  // fill SampledToken::logprob and `top_logprobs` alternatives
  std::int32_t top_logprobs = 0;
  std::int32_t forced_token = -1;
  std::span<const std::int32_t> seen_tokens;    // distinct ids (prompt and output) for the repetition penalty
  std::span<const std::int32_t> output_ids;     // distinct output ids ...
  std::span<const std::int32_t> output_counts;  // ... and how often each occurs
  std::span<const std::int32_t> masked_ids;     // set to −∞ (EOS and stop ids under min_new_tokens)
  // Structured outputs: a bitmask over the vocabulary (bit t % 32 of word t / 32, AllowedWords(vocab)
  // words); every token whose bit is clear is set to −∞. Empty: no such mask.
  std::span<const std::uint32_t> allowed_tokens;

  bool greedy() const { return temperature == 0.0; }
};

struct SampledToken {
  std::int32_t token = 0;
  float logprob = 0.0f;  // when want_logprob
  std::vector<std::int32_t> top_ids;  // top_logprobs alternatives, most likely first (ties: lower id)
  std::vector<float> top_logprobs;
};

FISSION_HOST_DEVICE inline std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Words of an allowed-token bitmask over `vocab` ids.
FISSION_HOST_DEVICE inline std::int64_t AllowedWords(std::int64_t vocab) { return (vocab + 31) / 32; }

FISSION_HOST_DEVICE inline bool TokenAllowed(const std::uint32_t* mask, std::int64_t token) {
  return (mask[token >> 5] >> (token & 31)) & 1u;
}

// Mixes two 64-bit values into a seed.
FISSION_HOST_DEVICE inline std::uint64_t MixSeed(std::uint64_t a, std::uint64_t b) {
  return SplitMix64(SplitMix64(a) ^ (b * 0xd1b54a32d192ed03ull));
}

// A uniform double in [0, 1) from a seed and a counter: stateless, the same on host and device.
FISSION_HOST_DEVICE inline double UniformFromSeed(std::uint64_t seed, std::uint64_t counter) {
  return static_cast<double>(MixSeed(seed, counter) >> 11) * 0x1.0p-53;
}

// Reusable buffers of the host reference.
struct HostSamplingScratch {
  std::vector<float> x;
  std::vector<double> probs;
  std::vector<std::int32_t> order;
};

// The reference: one row of `vocab` fp32 logits in host memory.
SampledToken SampleOnHost(const float* logits, std::int64_t vocab, const SamplingRow& row, HostSamplingScratch& scratch);

// The distribution a sampled row (temperature > 0) draws from: the candidate ids with a nonzero
// probability, in the reference's draw order, and their probabilities (summing to 1). Speculative
// decoding's rejection sampling reads it (engine/speculative_acceptance.h).
struct SamplingDistribution {
  std::vector<std::int32_t> ids;
  std::vector<double> probs;
};
SamplingDistribution DistributionOnHost(const float* logits, std::int64_t vocab, const SamplingRow& row,
                                        HostSamplingScratch& scratch);

}  // namespace fission::kernels
