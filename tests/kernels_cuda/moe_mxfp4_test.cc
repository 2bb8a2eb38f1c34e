// MXFP4 weights on the CUDA backend against the CPU reference (cpu_quantized.cc, cpu_moe.cc): the
// same packed codes and e8m0 scales on both sides, activations quantized per token and 1x32 by the
// MX rule on both sides.
//
// Bounds. The activation codes and scales must equal the CPU's bit for bit (decoded values
// compared exactly). A product then differs only in the order of its fp32 sums: every product of
// an e2m1 weight and an e2m1 activation is exact, the device sums each 1x32 group exactly in int32
// and adds the groups in fp32, the CPU adds products in 8 interleaved fp32 sums; the rounding of a
// sum of k terms in two orders differs by about sqrt(k) * 2^-24 of its size (3e-6 at k = 2048),
// so Linear is held to 1e-5. The experts add one step the CPU takes differently: silu·up (expf
// ulps) feeds the second quantization, where a value within about 1e-6 of an e2m1 rounding
// boundary (about 1e-5 of them) can round to the neighbouring code on one side only. A token row
// without such a flip agrees to the summation order (1e-5); one with a flip moves by a few percent
// of one pair's output. So: all but max(2, 5% of the tokens) rows within 1e-5, and the whole output
// within 5e-3 (the expected flips give about 1e-3 at 300 tokens).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels_cuda/cuda_testlib.h"
#include "tensor/quantize.h"

namespace fission::kernels::cuda::testing {
namespace {

constexpr double kProduct = 1e-5;  // Linear: fp32 summation order only
constexpr double kRow = 1e-5;      // an expert output row without a rounding flip
constexpr double kWhole = 5e-3;    // the whole experts output

// An MXFP4 weight [m, k] quantized from random values on the host, with the same codes and
// scales on the device.
class Mxfp4Weight {
 public:
  Mxfp4Weight(std::int64_t m, std::int64_t k, std::mt19937& rng) {
    const std::vector<float> values = Random(m * k, rng, 1.0f / std::sqrt(static_cast<float>(k)));
    host_ = QuantizeMatrix(values.data(), m, k, WeightFormat::Mxfp4());
    codes_ = Buffer(DType::kF4E2M1, Shape{m, k}, Gpu().allocator());
    scales_ = Buffer(DType::kE8M0, host_.scales.tensor().shape, Gpu().allocator());
    Gpu().CopyBytesFromHost(host_.codes.ptr<std::uint8_t>(), codes_);
    Gpu().CopyBytesFromHost(host_.scales.ptr<std::uint8_t>(), scales_);
  }
  WeightView host() const { return {host_.codes.tensor(), host_.scales.tensor(), WeightFormat::Mxfp4()}; }
  WeightView device() const { return {codes_.tensor(), scales_.tensor(), WeightFormat::Mxfp4()}; }

 private:
  QuantizedMatrix host_;
  Buffer codes_, scales_;
};

// Relative L2 error of each row of [rows, cols].
std::vector<double> RowErrors(const std::vector<float>& got, const std::vector<float>& ref, std::int64_t cols) {
  std::vector<double> errs;
  for (std::size_t r = 0; r * cols < ref.size(); ++r) {
    const std::vector<float> g(got.begin() + r * cols, got.begin() + (r + 1) * cols);
    const std::vector<float> f(ref.begin() + r * cols, ref.begin() + (r + 1) * cols);
    errs.push_back(RelErr(g, f));
  }
  return errs;
}

// The device's activation codes and scales, decoded by the layout of moe_mxfp4.cu (per row and
// group: four 16-byte pieces, the doubled int8 codes of values [8t, 8t + 8) then their negations;
// one fp32 factor 2^(shared - 2) per group, groups padded to a multiple of 4), must be the CPU's
// QuantizeActivations values exactly, and the negated codes the codes' negations.
TEST(CudaMxfp4, ActivationCodesMatchCpuBitForBit) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(41);
  for (std::int64_t k : {32, 200, 1024}) {
    const std::int64_t n = 6;
    std::vector<float> x = Random(n * k, rng, 3.0f);
    // Row 1: ties at every e2m1 rounding boundary (amax 6 · 2^0, so the scale is 1); row 2: zeros
    // and a tiny group; row 3: a NaN in the first group and an infinity in the second; row 4:
    // denormals; row 5: huge values.
    const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -0.25f, -0.75f, -1.25f, -1.75f, -2.5f,
                          -3.5f, -5.0f, 6.0f, 5.5f, 0.3f, -0.7f, 7.9f, -6.0f};
    for (std::int64_t c = 0; c < k; ++c) x[1 * k + c] = ties[c % 20] * (c / 32 % 2 ? 0.125f : 1.0f);
    for (std::int64_t c = 0; c < k; ++c) x[2 * k + c] = c < 32 ? 0.0f : x[2 * k + c] * 1e-30f;
    x[3 * k + 3] = std::numeric_limits<float>::quiet_NaN();
    if (k > 32) x[3 * k + 40] = -std::numeric_limits<float>::infinity();
    for (std::int64_t c = 0; c < k; ++c) x[4 * k + c] *= 1e-39f;
    for (std::int64_t c = 0; c < k; ++c) x[5 * k + c] *= 1e37f;
    const Buffer dx = ToDevice(DType::kF32, Shape{n, k}, x);
    const Mxfp4Input in = QuantizeMxfp4(Gpu().context(), dx, nullptr, n);
    const std::int64_t gp = (((k + 31) / 32) + 3) / 4 * 4;
    std::vector<std::int8_t> codes(in.codes.tensor().bytes());
    std::vector<float> scales(in.scales.tensor().numel());
    Gpu().CopyBytesToHost(in.codes, codes.data());
    Gpu().CopyBytesToHost(in.scales, scales.data());
    for (std::int64_t r = 0; r < n; ++r) {
      std::vector<float> ref(k);
      QuantizeActivations(WeightFormat::Mxfp4(), x.data() + r * k, k, ref.data());
      for (std::int64_t c = 0; c < k; ++c) {
        const std::int64_t g = c / 32, t = (c % 32) / 8, j = c % 8;
        const std::int8_t* piece = codes.data() + ((r * gp + g) * 4 + t) * 16;
        // The factor holds both halvings of a product (weight and activation codes are doubled).
        const float got = static_cast<float>(piece[j]) * scales[r * gp + g] * 2.0f;
        ASSERT_EQ(piece[8 + j], -piece[j]) << "k=" << k << " row " << r << " col " << c;
        if (std::isnan(ref[c])) {
          ASSERT_TRUE(std::isnan(got)) << "k=" << k << " row " << r << " col " << c;
        } else {
          ASSERT_EQ(got, ref[c]) << "k=" << k << " row " << r << " col " << c << " x " << x[r * k + c];
        }
      }
    }
  }
}

struct LinearCase {
  std::int64_t n, m, k;
  DType xtype;
};

// Linear with MXFP4 weights: ragged row tiles (m not a multiple of 16), k with a partial 1x32 group
// and a partial chunk of 128, token tiles of 8 with a partial last one.
TEST(CudaMxfp4, LinearMatchesCpuReference) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(42);
  for (const LinearCase& c : {LinearCase{1, 200, 200, DType::kF32}, LinearCase{5, 64, 1024, DType::kBF16},
                              LinearCase{13, 300, 2048, DType::kF32}, LinearCase{64, 48, 7168, DType::kBF16},
                              LinearCase{3, 40, 104, DType::kF32}}) {
    const Mxfp4Weight w(c.m, c.k, rng);
    std::vector<float> x = Random(c.n * c.k, rng);
    if (c.xtype == DType::kBF16) x = RoundBf16(x);
    std::vector<float> ref(c.n * c.m);
    Cpu().Linear(HostView(x, Shape{c.n, c.k}), w.host(), HostView(ref, Shape{c.n, c.m}));
    const Buffer dx = ToDevice(c.xtype, Shape{c.n, c.k}, x);
    const Buffer out = Poisoned(DType::kF32, Shape{c.n, c.m});
    Gpu().Linear(dx, w.device(), out);
    EXPECT_LT(RelErr(ToHost(out), ref), kProduct) << c.n << "x" << c.m << "x" << c.k;
  }
}

// Rows of codes that do not start on a 4-byte word are refused with an Error, not misread.
TEST(CudaMxfp4, KNotAMultipleOf8IsRefused) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(43);
  const Mxfp4Weight w(16, 100, rng);
  const Buffer x = ToDevice(DType::kF32, Shape{1, 100}, Random(100, rng));
  const Buffer out = Poisoned(DType::kF32, Shape{1, 16});
  EXPECT_THROW(Gpu().Linear(x, w.device(), out), Error);
}

struct Case {
  int n, experts, top_k;
  std::int64_t hidden, inter;
  bool repeats;  // tokens that pick one expert twice
  DType xtype;
};

struct Experts {
  std::vector<std::unique_ptr<Mxfp4Weight>> gu, down;
  Experts(const Case& c, std::mt19937& rng) {
    for (int e = 0; e < c.experts; ++e) {
      gu.push_back(std::make_unique<Mxfp4Weight>(2 * c.inter, c.hidden, rng));
      down.push_back(std::make_unique<Mxfp4Weight>(c.hidden, c.inter, rng));
    }
  }
  std::vector<WeightView> Views(bool device, bool gate_up) const {
    std::vector<WeightView> v;
    for (const auto& w : gate_up ? gu : down) v.push_back(device ? w->device() : w->host());
    return v;
  }
};

// top_k experts a token over all but the last (which never gets a token); with `repeats`, every
// third token takes its first expert twice.
std::vector<std::int32_t> DrawIds(const Case& c, std::mt19937& rng) {
  std::vector<std::int32_t> ids, pool;
  for (int e = 0; e < c.experts - 1; ++e) pool.push_back(e);
  for (int t = 0; t < c.n; ++t) {
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<std::int32_t> chosen(pool.begin(), pool.begin() + c.top_k);
    if (c.repeats && t % 3 == 0) chosen[1] = chosen[0];
    std::sort(chosen.begin(), chosen.end());
    ids.insert(ids.end(), chosen.begin(), chosen.end());
  }
  return ids;
}

struct Inputs {
  std::vector<float> x, weights;
  std::vector<std::int32_t> ids;
  Inputs(const Case& c, std::mt19937& rng) : x(Random(c.n * c.hidden, rng)), weights(c.n * c.top_k) {
    if (c.xtype == DType::kBF16) x = RoundBf16(x);
    ids = DrawIds(c, rng);
    std::uniform_real_distribution<float> u(0.05f, 1.0f);
    for (float& w : weights) w = u(rng);
  }
};

struct DeviceInputs {
  Buffer x, ids, weights, out;
  DeviceInputs(const Case& c, const Inputs& in)
      : x(ToDevice(c.xtype, Shape{c.n, c.hidden}, in.x)),
        ids(ToDevice(DType::kI32, Shape{c.n, c.top_k}, std::vector<float>(in.ids.begin(), in.ids.end()))),
        weights(ToDevice(DType::kF32, Shape{c.n, c.top_k}, in.weights)),
        out(Poisoned(DType::kF32, Shape{c.n, c.hidden})) {}
  void Load(const Inputs& in) {
    Gpu().CopyFromHost(in.x.data(), x);
    const std::vector<float> idsf(in.ids.begin(), in.ids.end());
    Gpu().CopyFromHost(idsf.data(), ids);
    Gpu().CopyFromHost(in.weights.data(), weights);
  }
};

std::vector<float> Reference(const Case& c, const Experts& ex, Inputs& in) {
  Tensor hids;
  hids.data = in.ids.data();
  hids.dtype = DType::kI32;
  hids.shape = Shape{c.n, c.top_k};
  std::vector<float> ref(c.n * c.hidden);
  cpu::MoeExperts(HostView(in.x, Shape{c.n, c.hidden}), hids, HostView(in.weights, Shape{c.n, c.top_k}),
                  ex.Views(false, true), ex.Views(false, false), /*limit=*/0.0f, HostView(ref, Shape{c.n, c.hidden}));
  return ref;
}

void RunGpu(const Experts& ex, DeviceInputs& d) {
  Gpu().MoeExperts(d.x, d.ids, d.weights, ex.Views(true, true), ex.Views(true, false), d.out);
}

// Within the bounds above: every row but a few rounding flips at 1e-5, the whole output at 5e-3.
void ExpectClose(const Case& c, const std::vector<float>& got, const std::vector<float>& ref) {
  const std::vector<double> rows = RowErrors(got, ref, c.hidden);
  const auto far = std::count_if(rows.begin(), rows.end(), [](double e) { return !(e <= kRow); });
  const double worst = *std::max_element(rows.begin(), rows.end());
  EXPECT_LE(far, std::max<std::int64_t>(2, c.n / 20))
      << "n=" << c.n << " experts=" << c.experts << " top_k=" << c.top_k << " " << c.hidden << "x" << c.inter
      << ": " << far << " rows above " << kRow << ", worst " << worst;
  EXPECT_LT(RelErr(got, ref), kWhole) << "n=" << c.n << " experts=" << c.experts << " worst row " << worst;
}

TEST(CudaMoeMxfp4, ExpertsMatchCpuReference) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(44);
  const Case cases[] = {
      // Odd expert counts, repeated experts, k with partial 1x32 groups (200 = 6 x 32 + 8, 104 =
      // 3 x 32 + 8) and partial chunks of 128, DeepSeek's top-8, a hot token count (300 tokens: past
      // kDeviceRoutedTokens, where the FP8 and bf16 experts plan on the host; MXFP4 plans on the
      // device at every size).
      Case{1, 7, 2, 256, 128, false, DType::kBF16},
      Case{1, 33, 8, 512, 256, true, DType::kF32},
      Case{5, 13, 4, 200, 104, true, DType::kF32},
      Case{64, 33, 8, 1024, 256, true, DType::kBF16},
      Case{64, 7, 3, 256, 128, false, DType::kF32},
      Case{300, 13, 4, 512, 128, true, DType::kBF16},
      Case{300, 9, 2, 200, 104, false, DType::kF32},
  };
  for (const Case& c : cases) {
    Experts ex(c, rng);
    Inputs in(c, rng);
    const std::vector<float> ref = Reference(c, ex, in);
    DeviceInputs d(c, in);
    RunGpu(ex, d);
    ExpectClose(c, ToHost(d.out), ref);
  }
}

// A decode call captured once replays new activations and routing bit for bit as an eager call
// computes them: the plan and the quantization are rebuilt on the device every time.
TEST(CudaMoeMxfp4, CapturedDecodeReplaysNewRouting) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(45);
  CudaContext& ctx = Gpu().context();
  const Case c{8, 31, 4, 512, 256, true, DType::kBF16};
  Experts ex(c, rng);
  Inputs first(c, rng), second(c, rng);
  DeviceInputs d(c, first);
  RunGpu(ex, d);  // eager: builds the experts' pointer tables

  CapturedGraph graph(ctx, [&] { RunGpu(ex, d); });
  EXPECT_FALSE(graph.uploaded_constants()) << "the decode path uploaded constants";

  d.Load(second);
  graph.Launch();
  const std::vector<float> replayed = ToHost(d.out);
  ExpectClose(c, replayed, Reference(c, ex, second));
  RunGpu(ex, d);
  EXPECT_TRUE(SameBits(ToHost(d.out), replayed)) << "replay and eager call differ";
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
