// FP8 routed experts: CUDA against the CPU reference, which quantizes each expert's rows exactly as
// LinearFp8 does. Up to kDeviceRoutedTokens tokens the device plans the runs (every expert on the
// grouped GEMV, capturable); above it the host plans (grouped GEMV for experts with few rows,
// cuBLASLt block scaling for the others).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <tuple>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels_cuda/cuda_testlib.h"
#include "kernels_cuda/moe_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

// e4m3 values (no NaN codes) and random block scales of an [m, k] weight.
struct Fp8Weight {
  std::vector<float> values, scales;
  Shape shape, scale_shape;
  Fp8Weight(std::int64_t m, std::int64_t k, std::mt19937& rng)
      : shape{m, k}, scale_shape{(m + 127) / 128, (k + 127) / 128} {
    values.resize(m * k);
    for (float& v : values) {
      std::uint8_t code = static_cast<std::uint8_t>(rng());
      if ((code & 0x7F) == 0x7F) code = 0x7E;
      v = F8E4M3ToF32(code);
    }
    std::uniform_real_distribution<float> u(2e-4f, 2e-3f);
    scales.resize(scale_shape.numel());
    for (float& s : scales) s = u(rng);
  }
};

struct Case {
  int n, experts, top_k;
  std::int64_t hidden, inter;
  bool hot;
  DType xtype;
};

// Every expert's weights, as host views for the CPU and device tensors for the GPU.
class Experts {
 public:
  Experts(const Case& c, std::mt19937& rng) {
    for (int e = 0; e < c.experts; ++e) {
      gu_.emplace_back(2 * c.inter, c.hidden, rng);
      down_.emplace_back(c.hidden, c.inter, rng);
    }
    host_codes_.reserve(2 * c.experts);
    for (int e = 0; e < c.experts; ++e) {
      Add(gu_[e], hgu, hgus, dgu, dgus);
      Add(down_[e], hdown, hdowns, ddown, ddowns);
    }
  }
  Experts(const Experts&) = delete;
  Experts& operator=(const Experts&) = delete;

  std::vector<Tensor> hgu, hgus, hdown, hdowns, dgu, dgus, ddown, ddowns;

 private:
  void Add(Fp8Weight& w, std::vector<Tensor>& hw, std::vector<Tensor>& hs, std::vector<Tensor>& dw,
           std::vector<Tensor>& ds) {
    host_codes_.emplace_back(w.values.size());
    ConvertFromF32(DType::kF8E4M3, w.values.data(), host_codes_.back().data(), w.values.size());
    Tensor codes;
    codes.data = host_codes_.back().data();
    codes.dtype = DType::kF8E4M3;
    codes.shape = w.shape;
    hw.push_back(codes);
    hs.push_back(HostView(w.scales, w.scale_shape));
    device_.push_back(ToDevice(DType::kF8E4M3, w.shape, w.values));
    dw.push_back(device_.back());
    device_.push_back(ToDevice(DType::kF32, w.scale_shape, w.scales));
    ds.push_back(device_.back());
  }

  std::vector<Fp8Weight> gu_, down_;
  std::vector<std::vector<std::uint8_t>> host_codes_;
  std::vector<Buffer> device_;
};

// `top_k` distinct experts per token; the last expert never gets a token. With `hot`, every token
// also takes expert 0, so one expert has many rows while the others have a few.
std::vector<std::int32_t> DrawIds(int n, int experts, int top_k, bool hot, std::mt19937& rng) {
  std::vector<std::int32_t> ids;
  for (int t = 0; t < n; ++t) {
    std::vector<std::int32_t> pool;
    for (int e = hot ? 1 : 0; e < experts - 1; ++e) pool.push_back(e);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<std::int32_t> chosen(pool.begin(), pool.begin() + (hot ? top_k - 1 : top_k));
    if (hot) chosen.push_back(0);
    std::sort(chosen.begin(), chosen.end());
    ids.insert(ids.end(), chosen.begin(), chosen.end());
  }
  return ids;
}

// A call's activations and routing on the host.
struct Inputs : RoutedInputs {
  Inputs(const Case& c, std::mt19937& rng)
      : RoutedInputs(c.n, c.hidden, c.top_k, c.xtype == DType::kBF16, rng,
                     [&] { return DrawIds(c.n, c.experts, c.top_k, c.hot, rng); }) {}
};

struct DeviceInputs : RoutedDeviceInputs {
  DeviceInputs(const Case& c, const Inputs& in) : RoutedDeviceInputs(c.xtype, c.n, c.hidden, c.top_k, in) {}
};

std::vector<float> Reference(const Case&, Experts& ex, Inputs& in) {
  return in.CpuExperts(Fp8Weights(ex.hgu, ex.hgus), Fp8Weights(ex.hdown, ex.hdowns), /*limit=*/0.0f);
}

void RunGpu(Experts& ex, DeviceInputs& d) {
  Gpu().MoeExperts(d.x, d.ids, d.weights, Fp8Weights(ex.dgu, ex.dgus), Fp8Weights(ex.ddown, ex.ddowns), d.out);
}


std::string Describe(const Case& c) {
  return StrCat("n=", c.n, " experts=", c.experts, " top_k=", c.top_k, " ", c.hidden, "x", c.inter,
                c.hot ? " hot" : "", c.n <= kDeviceRoutedTokens ? " (device-planned)" : " (host-planned)");
}

TEST(CudaMoeFp8, ExpertsMatchCpuReference) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(31);
  const Case cases[] = {
      // Device-planned: decode sizes with ragged loads (the last expert never has a token), DeepSeek's
      // 256 experts and top-8 at one token, a hot expert with 40 and 64 rows (5 and 8 runs of 8),
      // the rule's boundary (256 tokens, a hot expert of 32 runs), and more experts than the plan
      // kernel's block (two passes of its scan).
      Case{1, 8, 2, 256, 128, false, DType::kBF16},
      Case{1, 256, 8, 128, 64, false, DType::kBF16},
      Case{5, 16, 4, 512, 256, false, DType::kF32},
      Case{13, 16, 4, 512, 256, false, DType::kF32},
      Case{64, 32, 4, 1024, 256, false, DType::kBF16},
      Case{64, 32, 4, 1024, 256, true, DType::kBF16},
      Case{40, 32, 4, 1024, 256, true, DType::kBF16},
      Case{static_cast<int>(kDeviceRoutedTokens), 16, 4, 256, 128, true, DType::kBF16},
      Case{64, 1030, 4, 128, 32, false, DType::kBF16},
      // Host-planned: k not a multiple of 16 (the GEMV cannot take it; a partial 128-group in k and
      // partial blocks in m, on the tiled kernel), many tokens (every expert on cuBLASLt), and a hot
      // expert on cuBLASLt next to experts with a few rows on the grouped GEMV in one call.
      Case{7, 6, 3, 320, 200, false, DType::kF32},
      Case{300, 8, 2, 384, 128, false, DType::kBF16},
      Case{300, 64, 2, 1024, 256, true, DType::kBF16},
  };
  for (const Case& c : cases) {
    Experts ex(c, rng);
    Inputs in(c, rng);
    const std::vector<float> ref = Reference(c, ex, in);
    DeviceInputs d(c, in);
    RunGpu(ex, d);
    EXPECT_LT(RelErr(ToHost(d.out), ref), kFp8) << Describe(c);
  }
}

// An id outside [0, experts) must not write anywhere: its pair gets no row and adds nothing, the
// token's other pairs are summed as usual (the CPU reference gets weight 0 for that pair).
TEST(CudaMoeFp8, DevicePlanSkipsIdsOutOfRange) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(35);
  const Case c{6, 12, 3, 256, 128, false, DType::kBF16};
  Experts ex(c, rng);
  Inputs in(c, rng);
  Inputs bad = in;
  bad.ids[1] = c.experts + 5;
  bad.ids[7] = -1;
  for (int p : {1, 7}) in.weights[p] = 0.0f;  // the reference: a valid id that adds nothing
  const std::vector<float> ref = Reference(c, ex, in);
  DeviceInputs d(c, bad);
  RunGpu(ex, d);
  EXPECT_LT(RelErr(ToHost(d.out), ref), kFp8);
}

// A decode call captured once replays with new activations and routing in the same device
// tensors: the plan is rebuilt on the device each time, and the replay gives bit for bit what an
// eager call on the new inputs gives.
TEST(CudaMoeFp8, DevicePlanCapturedReplaysNewRouting) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(36);
  CudaContext& ctx = Gpu().context();
  const Case c{8, 32, 4, 512, 256, false, DType::kBF16};
  Experts ex(c, rng);
  Inputs first(c, rng), second(c, rng);
  DeviceInputs d(c, first);
  RunGpu(ex, d);  // eager: builds the experts' pointer tables

  CapturedGraph graph(ctx, [&] { RunGpu(ex, d); });
  EXPECT_FALSE(graph.uploaded_constants()) << "the decode path uploaded constants";

  d.Load(second);
  graph.Launch();
  const std::vector<float> replayed = ToHost(d.out);
  EXPECT_LT(RelErr(replayed, Reference(c, ex, second)), kFp8);
  RunGpu(ex, d);
  EXPECT_TRUE(SameBits(ToHost(d.out), replayed)) << "replay and eager call differ";
}

// A weight set first met during a capture has no pointer table yet: a clear Error, not a copy of
// step data baked into the graph. The context finds tables by their pointers, so the weights stay
// allocated (a repeated run must not get the same addresses) and no other test has 9 experts.
TEST(CudaMoeFp8, DevicePlanNeedsAnEagerCallBeforeCapture) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(37);
  static std::vector<std::unique_ptr<Experts>> kept;
  CudaContext& ctx = Gpu().context();
  const Case c{2, 9, 2, 256, 128, false, DType::kBF16};
  kept.push_back(std::make_unique<Experts>(c, rng));
  Experts& ex = *kept.back();
  Inputs in(c, rng);
  DeviceInputs d(c, in);
  ctx.BeginCapture({});
  EXPECT_THROW(RunGpu(ex, d), Error);
  ctx.AbortCapture();
  RunGpu(ex, d);  // the context is usable again, and the eager call builds the tables
  EXPECT_LT(RelErr(ToHost(d.out), Reference(c, ex, in)), kFp8);
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
