// Backend::Sample on CUDA against the CPU reference (kernels::SampleOnHost) on fresh random logits:
// the same tokens for the same seeded draws, logprobs within 1e-5 relative, the same alternatives.
// Rows mix greedy, sampled and forced (prompt logprob) requests and every parameter; vocabularies
// are DeepSeek-V3's 129280 and small odd ones, so both the gathered and the whole-row paths of the
// kernel run. Rows with an allowed-token bitmask (structured outputs) must agree the same way.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <set>
#include <string>
#include <tuple>

#include "kernels/cuda/cuda_backend.h"
#include "kernels_cuda/cuda_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

constexpr double kLogprobRel = 1e-5;

struct Case {
  std::string name;
  SamplingRow row;
  float scale = 1.0f;  // spread of the row's logits: 1 is flat over a large vocabulary, 8 peaked
};

// Every parameter alone and in combination. Id lists are filled per vocabulary.
std::vector<Case> Cases() {
  std::vector<Case> c;
  auto add = [&](std::string name, float scale, auto edit) {
    Case k{std::move(name), SamplingRow{}, scale};
    edit(k.row);
    c.push_back(k);
  };
  add("greedy", 1.0f, [](SamplingRow& r) { r.temperature = 0.0; });
  add("greedy_logprobs", 3.0f, [](SamplingRow& r) { r.temperature = 0.0; r.want_logprob = true; r.top_logprobs = 20; });
  add("temperature_1", 1.0f, [](SamplingRow&) {});
  add("temperature_0.5_logprobs", 3.0f, [](SamplingRow& r) { r.temperature = 0.5; r.want_logprob = true; r.top_logprobs = 5; });
  add("temperature_1.7", 8.0f, [](SamplingRow& r) { r.temperature = 1.7; });
  add("top_k_1", 1.0f, [](SamplingRow& r) { r.top_k = 1; });
  add("top_k_40", 1.0f, [](SamplingRow& r) { r.top_k = 40; r.want_logprob = true; });
  add("top_k_2048", 3.0f, [](SamplingRow& r) { r.top_k = 2048; });
  add("top_k_5000", 1.0f, [](SamplingRow& r) { r.top_k = 5000; });
  add("top_p_0.9_flat", 1.0f, [](SamplingRow& r) { r.top_p = 0.9; });
  add("top_p_0.95_peaked", 8.0f, [](SamplingRow& r) { r.top_p = 0.95; r.want_logprob = true; r.top_logprobs = 3; });
  add("top_p_0.3", 3.0f, [](SamplingRow& r) { r.top_p = 0.3; });
  add("min_p_0.1", 3.0f, [](SamplingRow& r) { r.min_p = 0.1; });
  add("min_p_0.01_flat", 1.0f, [](SamplingRow& r) { r.min_p = 0.01; });
  add("top_k_top_p_min_p", 3.0f, [](SamplingRow& r) { r.top_k = 100; r.top_p = 0.8; r.min_p = 0.05; r.temperature = 0.8; });
  add("top_p_min_p_flat", 1.0f, [](SamplingRow& r) { r.top_p = 0.5; r.min_p = 0.2; });
  add("top_k_5000_top_p", 1.0f, [](SamplingRow& r) { r.top_k = 5000; r.top_p = 0.7; });
  add("repetition", 3.0f, [](SamplingRow& r) { r.temperature = 0.0; r.repetition_penalty = 1.7; r.want_logprob = true; });
  add("repetition_sampled", 3.0f, [](SamplingRow& r) { r.repetition_penalty = 0.6; r.top_k = 20; });
  add("frequency_presence", 3.0f, [](SamplingRow& r) {
    r.frequency_penalty = 0.7;
    r.presence_penalty = -0.4;
    r.want_logprob = true;
    r.top_logprobs = 4;
  });
  add("masked", 3.0f, [](SamplingRow& r) { r.temperature = 0.0; r.want_logprob = true; r.top_logprobs = 2; });
  add("forced", 3.0f, [](SamplingRow& r) { r.temperature = 0.0; r.want_logprob = true; r.top_logprobs = 20; });
  // Structured outputs: an allowed-token bitmask (filled per vocabulary).
  add("allowed_greedy", 3.0f, [](SamplingRow& r) { r.temperature = 0.0; r.want_logprob = true; r.top_logprobs = 3; });
  add("allowed_sparse", 1.0f, [](SamplingRow&) {});
  add("allowed_dense_top_p", 3.0f, [](SamplingRow& r) { r.top_p = 0.9; r.want_logprob = true; r.top_logprobs = 2; });
  add("allowed_top_k_penalties", 3.0f, [](SamplingRow& r) { r.top_k = 40; r.repetition_penalty = 1.3; });
  return c;
}

bool CloseLogprob(float got, float ref) {
  return std::isfinite(got) && std::fabs(static_cast<double>(got) - ref) <= kLogprobRel * std::fabs(ref) + 1e-7;
}

void RunVocabulary(std::int64_t vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<Case> cases = Cases();
  constexpr int kDraws = 3;  // seeds per case
  const std::int64_t n = static_cast<std::int64_t>(cases.size());
  std::vector<float> logits;
  for (const Case& c : cases) {
    std::vector<float> row = Random(vocab, rng, c.scale);
    if (vocab > 10) row[vocab - 2] = row[1];  // an exact tie
    logits.insert(logits.end(), row.begin(), row.end());
  }
  // Id lists (the spans point into these).
  std::vector<std::int32_t> seen, out_ids, out_counts, masked;
  std::deque<std::vector<std::uint32_t>> allowed;  // a deque: rows point into its elements
  for (int i = 0; i < 16; ++i) seen.push_back(static_cast<std::int32_t>((i * 7919) % vocab));
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (std::size_t i = 0; i < seen.size(); i += 2) {
    out_ids.push_back(seen[i]);
    out_counts.push_back(static_cast<std::int32_t>(1 + i % 3));
  }
  std::vector<SamplingRow> rows;
  std::vector<std::string> names;
  for (std::int64_t r = 0; r < n; ++r) {
    SamplingRow base = cases[r].row;
    base.row = r;
    const float* lr = logits.data() + r * vocab;
    const std::int32_t argmax = static_cast<std::int32_t>(std::max_element(lr, lr + vocab) - lr);
    if (cases[r].name.starts_with("repetition")) base.seen_tokens = seen;
    if (cases[r].name == "frequency_presence") {
      base.output_ids = out_ids;
      base.output_counts = out_counts;
    }
    if (cases[r].name == "masked") {
      masked = {argmax, static_cast<std::int32_t>(vocab - 1), 0};
      base.masked_ids = masked;
    }
    if (cases[r].name == "forced") base.forced_token = static_cast<std::int32_t>(vocab / 3);
    if (cases[r].name.starts_with("allowed")) {
      // Sparse: every 37th token and the last; otherwise most tokens, never the argmax.
      const bool sparse = cases[r].name == "allowed_sparse";
      std::vector<std::uint32_t>& mask = allowed.emplace_back(AllowedWords(vocab), 0u);
      for (std::int64_t t = 0; t < vocab; ++t) {
        const bool on = sparse ? (t % 37 == 5 || t == vocab - 1) : (t % 5 != 0 && t != argmax);
        if (on) mask[t >> 5] |= 1u << (t & 31);
      }
      base.allowed_tokens = mask;
      if (cases[r].name == "allowed_top_k_penalties") base.seen_tokens = seen;
    }
    base.top_logprobs = std::min<std::int32_t>(base.top_logprobs, static_cast<std::int32_t>(vocab));
    for (int d = 0; d < kDraws; ++d) {
      SamplingRow row = base;
      row.seed = 0x9e3779b9ull * (r + 1) + seed;
      row.counter = static_cast<std::uint64_t>(d * 13);
      rows.push_back(row);
      names.push_back(cases[r].name + " draw " + std::to_string(d));
    }
  }

  // Poisoned outputs on both sides: a result that is not written cannot match.
  auto poisoned = [&] {
    SampledToken junk;
    junk.token = -7;
    junk.logprob = std::numeric_limits<float>::quiet_NaN();
    junk.top_ids.assign(3, -7);
    junk.top_logprobs.assign(3, std::numeric_limits<float>::quiet_NaN());
    return std::vector<SampledToken>(rows.size(), junk);
  };
  std::vector<SampledToken> ref = poisoned(), got = poisoned();
  Cpu().Sample(HostView(logits, Shape{n, vocab}), rows, ref);
  Buffer device = ToDevice(DType::kF32, Shape{n, vocab}, logits);
  Gpu().Sample(device, rows, got);

  std::set<std::int32_t> distinct_sampled;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string what = "vocab " + std::to_string(vocab) + " " + names[i];
    EXPECT_EQ(got[i].token, ref[i].token) << what;
    if (!rows[i].greedy()) distinct_sampled.insert(ref[i].token);
    if (!rows[i].want_logprob) continue;
    EXPECT_TRUE(CloseLogprob(got[i].logprob, ref[i].logprob)) << what << ": " << got[i].logprob << " vs " << ref[i].logprob;
    ASSERT_EQ(got[i].top_ids.size(), ref[i].top_ids.size()) << what;
    ASSERT_EQ(got[i].top_logprobs.size(), ref[i].top_logprobs.size()) << what;
    for (std::size_t j = 0; j < ref[i].top_ids.size(); ++j) {
      EXPECT_EQ(got[i].top_ids[j], ref[i].top_ids[j]) << what << " top " << j;
      EXPECT_TRUE(CloseLogprob(got[i].top_logprobs[j], ref[i].top_logprobs[j])) << what << " top " << j;
    }
  }
  // The sampled rows do not all pick one token (else matching them would prove little).
  EXPECT_GT(distinct_sampled.size(), 1u) << "vocab " << vocab;
}

TEST(CudaSampling, MatchesCpuOnTheDeepSeekVocabulary) {
  FISSION_REQUIRE_GPU();
  RunVocabulary(129280, 1);
  RunVocabulary(129280, 2);
}

TEST(CudaSampling, MatchesCpuOnSmallOddVocabularies) {
  FISSION_REQUIRE_GPU();
  for (std::int64_t vocab : {7, 33, 1001, 3001}) RunVocabulary(vocab, static_cast<std::uint32_t>(vocab));
}

// Many seeds on one row of each path: the draws follow the CPU's one by one.
TEST(CudaSampling, ManyDrawsFollowTheCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(5);
  const std::int64_t vocab = 129280;
  std::vector<float> logits = Random(vocab, rng, 2.0f);
  for (const auto& [top_k, top_p, min_p] :
       {std::tuple{-1, 1.0, 0.0}, {50, 1.0, 0.0}, {-1, 0.9, 0.0}, {-1, 1.0, 0.05}, {3000, 0.95, 0.0}}) {
    std::vector<SamplingRow> rows(200);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows[i].top_k = top_k;
      rows[i].top_p = top_p;
      rows[i].min_p = min_p;
      rows[i].seed = 77;
      rows[i].counter = i;
    }
    std::vector<SampledToken> ref(rows.size()), got(rows.size());
    Cpu().Sample(HostView(logits, Shape{1, vocab}), rows, ref);
    Buffer device = ToDevice(DType::kF32, Shape{1, vocab}, logits);
    Gpu().Sample(device, rows, got);
    int same = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) same += got[i].token == ref[i].token;
    EXPECT_EQ(same, static_cast<int>(rows.size())) << "top_k " << top_k << " top_p " << top_p << " min_p " << min_p;
  }
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
