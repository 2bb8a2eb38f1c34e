// DeepSeek-V4's FP4 weights on the CUDA backend (WeightFormat::Mxfp4A8, moe_fp4.cu: e2m1 codes
// with e8m0 scales per 1x32 of a row, decoded into e4m3 in registers, times activations quantized
// to e4m3 per 1x128 with power-of-two scales, e4m3 MMAs, fp32 sums) against the CPU reference
// (cpu_quantized.cc, cpu_moe.cc: the weight decoded exactly, times the activations quantized by the
// same rule and decoded, fp32 sums). Codes are random bytes (every e2m1 code, both signs) and
// scales random e8m0 codes around 2^-1/√k times a code's spread, so products are of order one like
// a checkpoint's.
//
// Bounds. Both sides quantize the same fp32 activations by the same arithmetic, so Linear differs
// in the order of its fp32 sums only (about √k · 2^-24 relative): held to 1e-4, or to 1e-2 when the
// device stores bf16. The experts compute silu·up on both sides before quantizing it (expf against
// std::exp, an ulp apart), which can move a value across an e4m3 rounding boundary: held to 1e-3
// for the whole output and 1e-2 for any token row.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels_cuda/cuda_testlib.h"
#include "kernels_cuda/moe_testlib.h"
#include "tensor/dtype.h"
#include "tensor/quantize.h"

namespace fission::kernels::cuda::testing {
namespace {

constexpr double kOrderOnly = 1e-4;  // Linear: fp32 summation order
constexpr double kBf16Out = 1e-2;  // Linear storing bf16 on the device
constexpr double kExpertsBound = 1e-3;  // the experts' output: an e4m3 rounding of silu·up may differ
constexpr double kRowBound = 1e-2;  // an experts output row

const WeightFormat kFp4 = WeightFormat::Mxfp4A8();

// The e8m0 code of a scale that makes a weight's products with N(0, 1) activations of order one:
// 2^-(log2 √k + log2 2.9), 2.9 being the spread of a uniformly drawn e2m1 code.
int CenterScale(std::int64_t k) {
  return 127 - static_cast<int>(std::lround(std::log2(2.9 * std::sqrt(static_cast<double>(k)))));
}

// An FP4 weight [m, k] of random codes and scales (codes around `center` ± 2), the same bytes on the
// host and the device.
class Fp4Weight {
 public:
  Fp4Weight(std::int64_t m, std::int64_t k, std::mt19937& rng, int center = -1)
      : codes_host_(DType::kF4E2M1, Shape{m, k}), scales_host_(DType::kE8M0, Shape{m, (k + 31) / 32}) {
    if (center < 0) center = CenterScale(k);
    std::uniform_int_distribution<int> spread(-2, 2);
    auto* codes = codes_host_.ptr<std::uint8_t>();
    for (std::size_t i = 0; i < codes_host_.tensor().bytes(); i += 4) {
      const std::uint32_t r = rng();  // four bytes of codes a draw
      for (std::size_t b = 0; b < 4 && i + b < codes_host_.tensor().bytes(); ++b)
        codes[i + b] = static_cast<std::uint8_t>(r >> (8 * b));
    }
    for (std::int64_t i = 0; i < scales_host_.tensor().numel(); ++i)
      scales_host_.ptr<std::uint8_t>()[i] = static_cast<std::uint8_t>(center + spread(rng));
    Upload();
  }
  // Every scale of row r set to `code`.
  void SetRowScale(std::int64_t r, std::uint8_t code) {
    const std::int64_t groups = scales_host_.tensor().shape[1];
    for (std::int64_t g = 0; g < groups; ++g) scales_host_.ptr<std::uint8_t>()[r * groups + g] = code;
    Upload();
  }
  WeightView host() const { return {codes_host_.tensor(), scales_host_.tensor(), kFp4}; }
  WeightView device() const { return {codes_.tensor(), scales_.tensor(), kFp4}; }

 private:
  void Upload() {
    codes_ = Buffer(DType::kF4E2M1, codes_host_.tensor().shape, Gpu().allocator());
    scales_ = Buffer(DType::kE8M0, scales_host_.tensor().shape, Gpu().allocator());
    Gpu().CopyBytesFromHost(codes_host_.ptr<std::uint8_t>(), codes_);
    Gpu().CopyBytesFromHost(scales_host_.ptr<std::uint8_t>(), scales_);
  }
  Buffer codes_host_, scales_host_, codes_, scales_;
};

std::vector<double> RowErrors(const std::vector<float>& got, const std::vector<float>& ref, std::int64_t cols) {
  std::vector<double> errs;
  for (std::size_t r = 0; r * cols < ref.size(); ++r) {
    const std::vector<float> g(got.begin() + r * cols, got.begin() + (r + 1) * cols);
    const std::vector<float> f(ref.begin() + r * cols, ref.begin() + (r + 1) * cols);
    errs.push_back(RelErr(g, f));
  }
  return errs;
}

std::vector<float> CpuLinear(std::vector<float> x, std::int64_t n, const Fp4Weight& w, std::int64_t m,
                             std::int64_t k) {
  std::vector<float> ref(n * m);
  Cpu().Linear(HostView(x, Shape{n, k}), w.host(), HostView(ref, Shape{n, m}));
  return ref;
}

struct LinearCase {
  std::int64_t n, m, k;
  DType xtype;
};

// Linear: DeepSeek-V4-Flash's expert shapes (gate_up 4096 x 4096, down 4096 x 2048), ragged row
// tiles (m not a multiple of 16 or of a block's rows), k of one chunk (one warp per tile), of two
// and three chunks (two warps per tile, unevenly split) and of five, shorter last activation blocks
// (k = 96: one block of three groups; 160: 128 + 32), token tiles of 8 with a partial last one,
// more than 256 tokens; fp32 inputs with more bits than bf16 (quantized from fp32 on both sides).
TEST(CudaFp4, LinearMatchesCpuReference) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(61);
  for (const LinearCase& c :
       {LinearCase{1, 4096, 4096, DType::kBF16}, LinearCase{8, 4096, 2048, DType::kF32},
        LinearCase{5, 200, 96, DType::kF32}, LinearCase{3, 40, 160, DType::kBF16}, LinearCase{13, 300, 256, DType::kF32},
        LinearCase{64, 48, 7168, DType::kBF16}, LinearCase{300, 96, 384, DType::kF32},
        LinearCase{9, 1000, 640, DType::kBF16}}) {
    const Fp4Weight w(c.m, c.k, rng);
    const std::vector<float> x = Random(c.n * c.k, rng), xr = RoundBf16(x);
    const std::string what = StrCat(c.n, "x", c.m, "x", c.k, " ", DTypeName(c.xtype));
    {
      const Buffer dx = ToDevice(c.xtype, Shape{c.n, c.k}, xr);
      const Buffer out = Poisoned(DType::kF32, Shape{c.n, c.m});
      Gpu().Linear(dx, w.device(), out);
      const double err = RelErr(ToHost(out), CpuLinear(xr, c.n, w, c.m, c.k));
      EXPECT_LT(err, kOrderOnly) << what;
      std::printf("FP4 Linear %s, bf16-valued x: relative error %.3g (bound %.0e)\n", what.c_str(), err, kOrderOnly);
    }
    if (c.xtype == DType::kF32) {
      const Buffer dx = ToDevice(DType::kF32, Shape{c.n, c.k}, x);
      const Buffer out = Poisoned(DType::kBF16, Shape{c.n, c.m});
      Gpu().Linear(dx, w.device(), out);
      const double err = RelErr(ToHost(out), CpuLinear(x, c.n, w, c.m, c.k));
      EXPECT_LT(err, kBf16Out) << what;
      std::printf("FP4 Linear %s, fp32 x, bf16 out: relative error %.3g (bound %.0e)\n", what.c_str(), err, kBf16Out);
    }
  }
}

// Scale codes at the edges: large and small ones, 0 (2^-127: weights below fp32's normal range,
// compared absolutely) and 0xFF (NaN: the row is NaN on both sides), the last two through the
// exact conversion a warp vote picks for a chunk holding them.
TEST(CudaFp4, ScaleCodesAtTheEdgesDecodeExactly) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(62);
  const std::int64_t m = 40, k = 256, n = 3;
  Fp4Weight w(m, k, rng);
  const std::uint8_t edges[] = {128, 129, 140, 200, 100, 60, 127, 126};
  for (std::int64_t r = 0; r < 8; ++r) w.SetRowScale(r, edges[r]);
  w.SetRowScale(20, 0);
  w.SetRowScale(33, 0xFF);
  std::vector<float> x = RoundBf16(Random(n * k, rng));
  const std::vector<float> ref = CpuLinear(x, n, w, m, k);
  const Buffer dx = ToDevice(DType::kBF16, Shape{n, k}, x);
  const Buffer out = Poisoned(DType::kF32, Shape{n, m});
  Gpu().Linear(dx, w.device(), out);
  const std::vector<float> got = ToHost(out);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t r = 0; r < m; ++r) {
      const float g = got[t * m + r], f = ref[t * m + r];
      if (r == 33) {
        EXPECT_TRUE(std::isnan(g) && std::isnan(f)) << "NaN scale: token " << t << " got " << g << " ref " << f;
      } else if (r == 20) {
        EXPECT_LE(std::fabs(g - f), 1e-35f) << "scale 2^-127: token " << t;
      } else {
        // Summation order moves a sum of k products by about √k · 2^-24 of its terms' size (the
        // row's scale); one code decoded wrongly moves it by at least half the scale.
        const int code = r < 8 ? edges[r] : CenterScale(k) + 2;
        EXPECT_LE(std::fabs(g - f), 1e-4 * k * std::ldexp(1.0, code - 127))
            << "row " << r << " (scale code " << code << ") token " << t << " got " << g << " ref " << f;
      }
    }
}

// Rows that do not hold whole 1x32 weight groups (k % 32 != 0) are refused with an Error.
TEST(CudaFp4, KNotAMultipleOf32IsRefused) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(63);
  const Fp4Weight w(16, 48, rng);
  const Buffer x = ToDevice(DType::kF32, Shape{1, 48}, Random(48, rng));
  const Buffer out = Poisoned(DType::kF32, Shape{1, 16});
  EXPECT_THROW(Gpu().Linear(x, w.device(), out), Error);
}

// The activations' quantizer on the device (QuantizeFp4Input) against the CPU's rule
// (tensor/quantize.h, Mxfp4A8): every decoded value bit for bit, fp32 and bf16 inputs, whole and
// shorter last blocks, a NaN (kept, outside the amax), an infinity (saturated) and a block of tiny
// values (on the 1e-4 floor).
TEST(CudaFp4, ActivationsQuantizeAsTheCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(66);
  struct Shape3 {
    std::int64_t n, k;
    DType dtype;
  };
  for (const Shape3& c : {Shape3{3, 4096, DType::kF32}, Shape3{5, 96, DType::kBF16}, Shape3{2, 160, DType::kF32}}) {
    std::vector<float> x = Random(c.n * c.k, rng, 3.0f);
    x[1] = std::numeric_limits<float>::quiet_NaN();
    x[c.k + 2] = std::numeric_limits<float>::infinity();
    for (std::int64_t i = 0; i < std::min<std::int64_t>(128, c.k); ++i) x[(c.n - 1) * c.k + i] = 1e-30f * (1 + i);
    if (c.dtype == DType::kBF16) x = RoundBf16(x);
    const Buffer dx = ToDevice(c.dtype, Shape{c.n, c.k}, x);
    const Fp4Input q = QuantizeFp4Input(Gpu().context(), dx);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(c.n * c.k));
    Gpu().CopyBytesToHost(q.codes.tensor(), codes.data());
    const std::vector<float> scales = ToHost(q.scales.tensor());
    const std::int64_t blocks = (c.k + 127) / 128;
    std::vector<float> want(static_cast<std::size_t>(c.k));
    for (std::int64_t t = 0; t < c.n; ++t) {
      QuantizeActivations(kFp4, x.data() + t * c.k, c.k, want.data());
      for (std::int64_t i = 0; i < c.k; ++i) {
        const float got = F8E4M3ToF32(codes[t * c.k + i]) * scales[t * blocks + i / 128];
        const bool same = std::isnan(want[i]) ? std::isnan(got) : got == want[i];
        ASSERT_TRUE(same) << DTypeName(c.dtype) << " k=" << c.k << " row " << t << " value " << i << ": " << x[t * c.k + i]
                          << " -> device " << got << ", cpu " << want[i];
      }
    }
  }
}

struct Case {
  int n, experts, top_k;
  std::int64_t hidden, inter;
  bool repeats;  // tokens that pick one expert twice
  DType xtype;
  float limit;  // DeepSeek-V4's SwiGLU clamp; 0: none
};

struct Experts {
  std::vector<std::unique_ptr<Fp4Weight>> gu, down;
  Experts(const Case& c, std::mt19937& rng) {
    for (int e = 0; e < c.experts; ++e) {
      gu.push_back(std::make_unique<Fp4Weight>(2 * c.inter, c.hidden, rng));
      down.push_back(std::make_unique<Fp4Weight>(c.hidden, c.inter, rng));
    }
  }
  std::vector<WeightView> Views(bool device, bool gate_up) const { return ViewsOf(gate_up ? gu : down, device); }
};


// Token rows are bf16 values, so the device's gather into bf16 is exact and the reference sees
// what the device multiplies.
struct Inputs : RoutedInputs {
  Inputs(const Case& c, std::mt19937& rng)
      : RoutedInputs(c.n, c.hidden, c.top_k, true, rng,
                     [&] { return DrawExpertIds(c.n, c.experts, c.top_k, c.repeats, rng); }) {}
};

struct DeviceInputs : RoutedDeviceInputs {
  DeviceInputs(const Case& c, const Inputs& in) : RoutedDeviceInputs(c.xtype, c.n, c.hidden, c.top_k, in) {}
};

std::vector<float> Reference(const Case& c, const Experts& ex, Inputs& in) {
  return in.CpuExperts(ex.Views(false, true), ex.Views(false, false), c.limit);
}

// The operation itself over device weight views, with the given prefill path, into d.out.
void RunFp4(const Case& c, const std::vector<WeightView>& gu, const std::vector<WeightView>& dn, DeviceInputs& d,
            ExpertsPrefill prefill = ExpertsPrefill::kGrouped) {
  const std::vector<Tensor> gu_codes = ValuesOf(gu), dn_codes = ValuesOf(dn);
  MoeExpertsFp4(Gpu().context(), d.x, d.ids, d.weights, gu_codes, ScalesOf(gu), dn_codes, ScalesOf(dn), d.out,
                c.limit, prefill);
}

// Without a clamp through the backend's MoeExperts (its dispatch on the format); with one through
// the operation itself, as DeepSeek-V4's experts call it.
void RunGpu(const Case& c, const Experts& ex, DeviceInputs& d) {
  if (c.limit == 0.0f) {
    Gpu().MoeExperts(d.x, d.ids, d.weights, ex.Views(true, true), ex.Views(true, false), d.out);
    return;
  }
  RunFp4(c, ex.Views(true, true), ex.Views(true, false), d);
}

void ExpectClose(const Case& c, const std::vector<float>& got, const std::vector<float>& ref) {
  const std::vector<double> rows = RowErrors(got, ref, c.hidden);
  const double worst = *std::max_element(rows.begin(), rows.end()), whole = RelErr(got, ref);
  const std::string what = StrCat("n=", c.n, " experts=", c.experts, " top_k=", c.top_k, " ", c.hidden, "x", c.inter,
                                  " ", DTypeName(c.xtype), " limit ", c.limit);
  EXPECT_LT(whole, kExpertsBound) << what << ", worst row " << worst;
  EXPECT_LT(worst, kRowBound) << what;
  std::printf("FP4 experts %s: relative error %.3g, worst row %.3g (bounds %.0e, %.0e)\n", what.c_str(), whole, worst,
              kExpertsBound, kRowBound);
}

TEST(CudaMoeFp4, ExpertsMatchCpuReference) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(64);
  const Case cases[] = {
      // DeepSeek-V4-Flash's experts (hidden 4096, moe_intermediate 2048, top-6) at 1, 8, 64 and 300
      // tokens, with and without the clamp (V4's swiglu_limit is 10 on activations of order one
      // here; 0.75 clamps a good share of them).
      Case{1, 9, 6, 4096, 2048, false, DType::kBF16, 0.0f},
      Case{8, 17, 6, 4096, 2048, true, DType::kF32, 0.75f},
      Case{64, 17, 6, 4096, 2048, true, DType::kBF16, 0.0f},
      Case{300, 9, 6, 4096, 2048, false, DType::kF32, 0.75f},
      // Small shapes: k of one and of three chunks (one warp a tile; two, unevenly split), shorter
      // last activation blocks (96 and 32: the tiny test models' shapes), odd expert counts,
      // repeated experts, 300 tokens (past kDeviceRoutedTokens: the grouped GEMM, still planned on
      // the device).
      Case{1, 7, 2, 256, 128, false, DType::kF32, 0.75f},
      Case{8, 13, 4, 96, 32, true, DType::kBF16, 0.0f},
      Case{64, 33, 8, 256, 128, true, DType::kF32, 0.0f},
      Case{300, 13, 4, 256, 384, true, DType::kBF16, 0.75f},
  };
  for (const Case& c : cases) {
    Experts ex(c, rng);
    Inputs in(c, rng);
    const std::vector<float> ref = Reference(c, ex, in);
    DeviceInputs d(c, in);
    RunGpu(c, ex, d);
    ExpectClose(c, ToHost(d.out), ref);
  }
}

// Prefill-sized calls (more than kDeviceRoutedTokens tokens, k % 128 == 0 in both products) run
// the grouped GEMM (moe_grouped.cu): against the CPU and against the 8-row GEMV it replaced
// (ExpertsPrefill::kPerExpert). Hot experts of two and three 128-row tiles with a partial last one
// (4 experts of ~300 rows), many experts of a few rows with repeats and the clamp, a down product
// of k = 384 (three blocks); hidden 96 (k % 128 != 0) stays on the GEMV.
TEST(CudaMoeFp4, PrefillGroupedGemmMatchesCpuAndTheGemv) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(67);
  const Case cases[] = {
      Case{600, 5, 2, 512, 256, false, DType::kBF16, 0.0f},
      Case{400, 33, 8, 256, 384, true, DType::kF32, 0.75f},
      Case{300, 13, 4, 96, 128, false, DType::kBF16, 0.0f},
  };
  for (const Case& c : cases) {
    Experts ex(c, rng);
    Inputs in(c, rng);
    DeviceInputs d(c, in);
    const std::vector<WeightView> gu = ex.Views(true, true), dn = ex.Views(true, false);
    const auto run = [&](ExpertsPrefill prefill) {
      RunFp4(c, gu, dn, d, prefill);
      return ToHost(d.out);
    };
    const std::vector<float> grouped = run(ExpertsPrefill::kGrouped), gemv = run(ExpertsPrefill::kPerExpert);
    ExpectClose(c, grouped, Reference(c, ex, in));
    ExpectClose(c, grouped, gemv);
  }
}

// DeepSeek-V4-Flash's experts (256 of them, top-6) at 2,048 tokens, codes drawn on the device
// (3.2 GB) with one scale code a weight (the test's CenterScale): the grouped GEMM against the
// GEMV path over the whole output.
TEST(CudaMoeFp4, V4FlashPrefillGroupedGemmMatchesTheGemv) {
  FISSION_REQUIRE_GPU();
  constexpr std::int64_t kHidden = 4096, kInter = 2048, kExperts = 256;
  std::mt19937 rng(68);
  const Case c{2048, static_cast<int>(kExperts), 6, kHidden, kInter, false, DType::kBF16, 0.0f};
  std::vector<Buffer> buffers;
  std::vector<WeightView> gu, dn;
  const auto weight = [&](std::int64_t m, std::int64_t k, std::uint64_t seed, std::vector<WeightView>& views) {
    buffers.emplace_back(DType::kF4E2M1, Shape{m, k}, Gpu().allocator());
    const Tensor codes = buffers.back().tensor();
    Gpu().FillUniform(codes, 6.0f, seed);
    buffers.emplace_back(DType::kE8M0, Shape{m, k / 32}, Gpu().allocator());
    const std::vector<std::uint8_t> scales(m * (k / 32), static_cast<std::uint8_t>(CenterScale(k)));
    Gpu().CopyBytesFromHost(scales.data(), buffers.back());
    views.emplace_back(codes, buffers.back().tensor(), kFp4);
  };
  for (std::int64_t e = 0; e < kExperts; ++e) {
    weight(2 * kInter, kHidden, 100 + e, gu);
    weight(kHidden, kInter, 900 + e, dn);
  }
  Inputs in(c, rng);
  DeviceInputs d(c, in);
  const auto run = [&](ExpertsPrefill prefill) {
    RunFp4(c, gu, dn, d, prefill);
    return ToHost(d.out);
  };
  const std::vector<float> grouped = run(ExpertsPrefill::kGrouped);
  ExpectClose(c, grouped, run(ExpertsPrefill::kPerExpert));
}

// A call captured once replays new activations and routing bit for bit as an eager call computes
// them: the plan, the gather and the run list are rebuilt on the device every time, and no constant
// is uploaded during the capture.
void ExpectReplaysNewRouting(const Case& c, std::mt19937& rng, const std::string& what) {
  Experts ex(c, rng);
  Inputs first(c, rng), second(c, rng);
  DeviceInputs d(c, first);
  RunGpu(c, ex, d);  // eager: builds the experts' pointer tables

  CapturedGraph graph(Gpu().context(), [&] { RunGpu(c, ex, d); });
  EXPECT_FALSE(graph.uploaded_constants()) << what << " uploaded constants";

  d.Load(second);
  graph.Launch();
  const std::vector<float> replayed = ToHost(d.out);
  ExpectClose(c, replayed, Reference(c, ex, second));
  RunGpu(c, ex, d);
  EXPECT_TRUE(SameBits(ToHost(d.out), replayed)) << what << ": replay and eager call differ";
}

// The decode path (the 8-row GEMV), without and with the clamp.
TEST(CudaMoeFp4, CapturedDecodeReplaysNewRouting) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(65);
  for (float limit : {0.0f, 0.75f})
    ExpectReplaysNewRouting(Case{8, 31, 6, 512, 256, true, DType::kBF16, limit}, rng,
                            "the decode path, limit " + std::to_string(limit));
}

// The prefill path (the grouped GEMM) plans on the device too: a captured 300-token call.
TEST(CudaMoeFp4, CapturedPrefillReplaysNewRouting) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(69);
  ExpectReplaysNewRouting(Case{300, 13, 4, 256, 128, true, DType::kBF16, 0.0f}, rng, "the prefill path");
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
