// DeepSeek-V4's stream, rope, projection and routing operations (cuda_v4.h, v4_streams.cu):
// CUDA against the CPU reference, at the tiny fixture's shapes and at V4-Flash's.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cuda/cuda_backend.h"
#include "kernels_cuda/cuda_testlib.h"
#include "kernels_cuda/moe_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

std::vector<std::int32_t> IdsOf(const Tensor& t) {
  std::vector<std::int32_t> v(t.numel());
  Gpu().CopyBytesToHost(t, v.data());
  return v;
}

// The mHC weights of one sublayer (or the head): fn, base and scale as the checkpoint has them.
struct HyperWeights {
  std::vector<float> fn, base, scale;
};
HyperWeights RandomHyper(std::int64_t rows, std::int64_t width, std::int64_t scales, std::mt19937& rng) {
  return {Random(rows * width, rng, 0.05f), Random(rows, rng, 0.5f), Random(scales, rng, 1.0f)};
}

TEST(CudaV4Streams, HyperPreMatchesCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(41);
  for (auto [n, hidden] : {std::pair<std::int64_t, std::int64_t>{7, 64}, {3, 4096}, {130, 256}}) {
    HyperShape sh;
    sh.hidden = hidden;
    const std::int64_t m = sh.mult, width = m * hidden, mixes = (2 + m) * m;
    auto streams = Random(n * width, rng, 2.0f);
    HyperWeights w = RandomHyper(mixes, width, 3, rng);
    std::vector<float> collapsed(n * hidden), post(n * m), comb(n * m * m);
    Cpu().v4().HyperPre(HostView(streams, Shape{n, m, hidden}), HostView(w.fn, Shape{mixes, width}),
                        HostView(w.base, Shape{mixes}), HostView(w.scale, Shape{3}), sh,
                        HostView(collapsed, Shape{n, hidden}), HostView(post, Shape{n, m}), HostView(comb, Shape{n, m, m}));
    Buffer ds = ToDevice(DType::kF32, Shape{n, m, hidden}, streams), dfn = ToDevice(DType::kF32, Shape{mixes, width}, w.fn),
           db = ToDevice(DType::kF32, Shape{mixes}, w.base), dsc = ToDevice(DType::kF32, Shape{3}, w.scale);
    Buffer gc = Poisoned(DType::kF32, Shape{n, hidden}), gp = Poisoned(DType::kF32, Shape{n, m}),
           gm = Poisoned(DType::kF32, Shape{n, m, m});
    Gpu().v4().HyperPre(ds, dfn, db, dsc, sh, gc, gp, gm);
    EXPECT_LT(RelErr(ToHost(gc), collapsed), 1e-5) << "collapsed, hidden " << hidden;
    EXPECT_LT(RelErr(ToHost(gp), post), 1e-5) << "post, hidden " << hidden;
    EXPECT_LT(RelErr(ToHost(gm), comb), 1e-5) << "comb, hidden " << hidden;
    // The mixing is doubly stochastic up to eps: each column of every token's comb sums to ~1.
    const std::vector<float> got = ToHost(gm);
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t k = 0; k < m; ++k) {
        float sum = 0.0f;
        for (std::int64_t j = 0; j < m; ++j) sum += got[(t * m + j) * m + k];
        EXPECT_NEAR(sum, 1.0f, 1e-3f) << "token " << t << " column " << k;
      }
  }
}

TEST(CudaV4Streams, HyperPostHeadAndExpandMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(42);
  for (auto [n, hidden] : {std::pair<std::int64_t, std::int64_t>{5, 64}, {66, 4096}}) {
    HyperShape sh;
    sh.hidden = hidden;
    const std::int64_t m = sh.mult, width = m * hidden;
    auto x = Random(n * hidden, rng), y = Random(n * hidden, rng), streams = Random(n * width, rng);
    auto post = Random(n * m, rng, 2.0f), comb = Random(n * m * m, rng, 1.0f);
    HyperWeights head = RandomHyper(m, width, 1, rng);
    std::vector<float> expanded(n * width), mixed(n * width), collapsed(n * hidden);
    const Shape s3{n, m, hidden};
    Cpu().v4().ExpandStreams(HostView(x, Shape{n, hidden}), HostView(expanded, s3));
    Cpu().v4().HyperPost(HostView(y, Shape{n, hidden}), HostView(streams, s3), HostView(post, Shape{n, m}),
                         HostView(comb, Shape{n, m, m}), HostView(mixed, s3));
    Cpu().v4().HyperHead(HostView(streams, s3), HostView(head.fn, Shape{m, width}), HostView(head.base, Shape{m}),
                         HostView(head.scale, Shape{1}), sh, HostView(collapsed, Shape{n, hidden}));
    Buffer dx = ToDevice(DType::kF32, Shape{n, hidden}, x), dy = ToDevice(DType::kF32, Shape{n, hidden}, y),
           ds = ToDevice(DType::kF32, s3, streams), dp = ToDevice(DType::kF32, Shape{n, m}, post),
           dc = ToDevice(DType::kF32, Shape{n, m, m}, comb), dfn = ToDevice(DType::kF32, Shape{m, width}, head.fn),
           db = ToDevice(DType::kF32, Shape{m}, head.base), dsc = ToDevice(DType::kF32, Shape{1}, head.scale);
    Buffer ge = Poisoned(DType::kF32, s3), gm = Poisoned(DType::kF32, s3), gh = Poisoned(DType::kF32, Shape{n, hidden});
    Gpu().v4().ExpandStreams(dx, ge);
    Gpu().v4().HyperPost(dy, ds, dp, dc, gm);
    Gpu().v4().HyperHead(ds, dfn, db, dsc, sh, gh);
    EXPECT_EQ(ToHost(ge), expanded);
    EXPECT_LT(RelErr(ToHost(gm), mixed), kF32Elementwise);
    EXPECT_LT(RelErr(ToHost(gh), collapsed), 1e-5);
  }
}

// Forward then inverse rope on part of each head, at positions up to 60K.
TEST(CudaV4Streams, RopeAndItsInverseMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(43);
  for (auto [heads, head_dim, rope] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4, 32, 8}, {64, 512, 64}}) {
    const std::int64_t n = 9, offset = head_dim - rope;
    std::vector<std::int32_t> positions = {0, 1, 2, 127, 128, 4095, 8191, 30000, 61439};
    std::vector<float> inv_freq(rope / 2);
    for (std::int64_t i = 0; i < rope / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / rope);
    auto x = Random(n * heads * head_dim, rng);
    const Shape shape{n, heads, head_dim};
    Buffer dx = ToDevice(DType::kF32, shape, x), df = ToDevice(DType::kF32, Shape{rope / 2}, inv_freq);
    std::vector<float> ref = x;
    for (bool inverse : {false, true}) {
      Cpu().v4().Rope(HostView(ref, shape), offset, rope, positions, HostView(inv_freq, Shape{rope / 2}), inverse);
      Gpu().v4().Rope(dx, offset, rope, positions, df, inverse);
      EXPECT_LT(RelErr(ToHost(dx), ref), kF32Elementwise) << "head_dim " << head_dim << " inverse " << inverse;
    }
    EXPECT_LT(RelErr(ToHost(dx), x), 1e-5) << "the inverse undoes the rotation";
  }
}

TEST(CudaV4Streams, GroupedLinearMatchesCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(44);
  // The fixture (2 groups of 64 → 16) and V4-Flash's (8 groups of 4096 → 1024), fp32 and bf16 weights;
  // one token with bf16 weights takes the run GEMV.
  for (auto [n, groups, k, r] : {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>{5, 2, 64, 16},
                                 {3, 8, 4096, 1024}, {70, 8, 512, 128}, {1, 8, 4096, 1024}, {1, 2, 64, 16}})
    for (DType wtype : {DType::kF32, DType::kBF16}) {
      auto x = Random(n * groups * k, rng), w = Random(groups * r * k, rng, 0.05f);
      if (wtype == DType::kBF16) {
        x = RoundBf16(x);
        w = RoundBf16(w);
      }
      std::vector<float> ref(n * groups * r);
      Cpu().v4().GroupedLinear(HostView(x, Shape{n, groups * k}), HostView(w, Shape{groups * r, k}), groups,
                               HostView(ref, Shape{n, groups * r}));
      Buffer dx = ToDevice(DType::kF32, Shape{n, groups * k}, x), dw = ToDevice(wtype, Shape{groups * r, k}, w),
             out = Poisoned(DType::kF32, Shape{n, groups * r});
      Gpu().v4().GroupedLinear(dx, dw, groups, out);
      EXPECT_LT(RelErr(ToHost(out), ref), wtype == DType::kF32 ? kF32Gemm : 1e-5)
          << groups << " groups of " << k << " -> " << r << ", " << DTypeName(wtype);
    }
}

// Score routing (V4-Flash: 256 experts, top 6; the fixture: 8, top 2) and hash routing.
TEST(CudaV4Streams, SqrtSoftplusAndHashRoutingMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(45);
  for (auto [experts, top_k] : {std::pair<std::int64_t, std::int64_t>{8, 2}, {256, 6}})
    for (bool hashed : {false, true})
      for (std::int64_t n : {1, 33, 600}) {
        auto logits = Random(n * experts, rng, 25.0f);  // both sides of softplus's threshold of 20
        auto bias = Random(experts, rng, 0.3f);
        // A hash table of 50 tokens' rows of distinct experts, and each row's token.
        constexpr std::int64_t kVocab = 50;
        std::vector<std::int32_t> table, tokens;
        for (std::int64_t v = 0; hashed && v < kVocab; ++v) {
          std::vector<std::int32_t> pool(experts);
          std::iota(pool.begin(), pool.end(), 0);
          std::shuffle(pool.begin(), pool.end(), rng);
          table.insert(table.end(), pool.begin(), pool.begin() + top_k);
        }
        for (std::int64_t t = 0; hashed && t < n; ++t) tokens.push_back(static_cast<std::int32_t>(rng() % kVocab));
        const Tensor host_table = hashed ? HostTensor(table.data(), DType::kI32, Shape{kVocab, top_k}) : Tensor();
        Buffer device_table;
        if (hashed) {
          device_table = Buffer(DType::kI32, Shape{kVocab, top_k}, Gpu().allocator());
          Gpu().CopyBytesFromHost(table.data(), device_table);
        }
        std::vector<std::int32_t> ref_ids(n * top_k);
        std::vector<float> ref_w(n * top_k);
        Cpu().v4().RouteSqrtSoftplus(HostView(logits, Shape{n, experts}), HostView(bias, Shape{experts}), host_table,
                                     tokens, top_k, 1.5f, HostTensor(ref_ids.data(), DType::kI32, Shape{n, top_k}),
                                     HostView(ref_w, Shape{n, top_k}));
        Buffer dl = ToDevice(DType::kF32, Shape{n, experts}, logits), db = ToDevice(DType::kF32, Shape{experts}, bias),
               ids = ToDevice(DType::kI32, Shape{n, top_k}, std::vector<float>(n * top_k, -1.0f)),
               w = Poisoned(DType::kF32, Shape{n, top_k});
        Gpu().v4().RouteSqrtSoftplus(dl, db, device_table.tensor(), tokens, top_k, 1.5f, ids, w);
        EXPECT_EQ(IdsOf(ids), ref_ids) << experts << " experts, hashed " << hashed << ", n " << n;
        EXPECT_LT(RelErr(ToHost(w), ref_w), 1e-6) << experts << " experts, hashed " << hashed << ", n " << n;
      }
}

// The clamped SwiGLU alone and inside the routed experts, plain fp32 and bf16 experts.
TEST(CudaV4Streams, ClampedSwiGluAndExpertsMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(46);
  const float limit = 1.0f;
  {
    const std::int64_t n = 19, inter = 96;
    auto gu = Random(n * 2 * inter, rng, 4.0f);
    std::vector<float> ref(n * inter);
    Cpu().v4().ClampedSwiGlu(HostView(gu, Shape{n, 2 * inter}), limit, HostView(ref, Shape{n, inter}));
    Buffer dgu = ToDevice(DType::kF32, Shape{n, 2 * inter}, gu), out = Poisoned(DType::kF32, Shape{n, inter});
    Gpu().v4().ClampedSwiGlu(dgu, limit, out);
    EXPECT_LT(RelErr(ToHost(out), ref), kF32Elementwise);
    std::vector<float> unclamped(n * inter);
    Cpu().SiluMul(HostView(gu, Shape{n, 2 * inter}), HostView(unclamped, Shape{n, inter}));
    EXPECT_GT(RelErr(unclamped, ref), 0.1) << "the inputs reach past the limit";
  }
  for (DType wtype : {DType::kF32, DType::kBF16})
    for (std::int64_t n : {1, 40, 300}) {
      const std::int64_t experts = 8, top_k = 2, hidden = 256, inter = 128;
      auto x = RoundBf16(Random(n * hidden, rng, 3.0f));
      PlainExperts ex(experts, hidden, inter, wtype, 0.2f, 0.05f, rng);
      std::vector<std::int32_t> ids(n * top_k);
      std::vector<float> idsf(n * top_k), weights = Random(n * top_k, rng, 1.0f);
      for (std::int64_t t = 0; t < n; ++t) {
        ids[t * top_k] = static_cast<std::int32_t>(t % experts);
        ids[t * top_k + 1] = static_cast<std::int32_t>((t + 3) % experts);
      }
      for (std::size_t i = 0; i < ids.size(); ++i) idsf[i] = static_cast<float>(ids[i]);
      std::vector<float> ref(n * hidden);
      Cpu().v4().MoeExperts(HostView(x, Shape{n, hidden}), HostTensor(ids.data(), DType::kI32, Shape{n, top_k}),
                            HostView(weights, Shape{n, top_k}), ex.HostGateUp(), ex.HostDown(), limit,
                            HostView(ref, Shape{n, hidden}));
      Buffer dx = ToDevice(DType::kF32, Shape{n, hidden}, x), di = ToDevice(DType::kI32, Shape{n, top_k}, idsf),
             dw = ToDevice(DType::kF32, Shape{n, top_k}, weights), out = Poisoned(DType::kF32, Shape{n, hidden});
      Gpu().v4().MoeExperts(dx, di, dw, ex.DeviceGateUp(), ex.DeviceDown(), limit, out);
      EXPECT_LT(RelErr(ToHost(out), ref), wtype == DType::kF32 ? kF32Gemm : kBf16)
          << DTypeName(wtype) << " experts, n " << n;
    }
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
