// Linear (fp32 and bf16 through cuBLASLt; bf16 with up to 8 tokens through the tensor-core GEMV and
// fp32 with up to 256 tokens through the fp32 GEMV and more on narrow weights through the tiled fp32 kernel,
// ragged rows and a partial 64-wide chunk of k included) and the FP8 block-scaled Linear, against
// the CPU.
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels_cuda/cuda_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

struct LinearCase {
  DType x, w, out;
  double bound;
};

TEST(CudaLinear, MatchesCpuAcrossDtypesAndRaggedShapes) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(10);
  const LinearCase cases[] = {{DType::kF32, DType::kF32, DType::kF32, kF32Gemm},
                              {DType::kF32, DType::kBF16, DType::kF32, kBf16},
                              {DType::kBF16, DType::kBF16, DType::kBF16, kBf16},
                              {DType::kBF16, DType::kBF16, DType::kF32, kBf16}};
  for (const LinearCase& c : cases)
    for (auto [n, m, k] : {std::tuple{1, 576, 7168}, {7, 96, 136}, {3, 100, 200}, {8, 1037, 1536}, {64, 1536, 512},
                           {301, 384, 1024}, {1, 256, 4096}, {100, 256, 4096}, {77, 37, 100}, {20, 50, 30}}) {
      auto x = Random(n * k, rng), w = Random(m * k, rng, 0.05f);
      if (c.x == DType::kBF16 || c.w == DType::kBF16) x = RoundBf16(x);  // the GEMM sees bf16 activations
      if (c.w == DType::kBF16) w = RoundBf16(w);
      std::vector<float> ref(n * m);
      Cpu().Linear(HostView(x, Shape{n, k}), HostView(w, Shape{m, k}), HostView(ref, Shape{n, m}));
      Buffer dx = ToDevice(c.x, Shape{n, k}, x), dw = ToDevice(c.w, Shape{m, k}, w), out = Poisoned(c.out, Shape{n, m});
      Gpu().Linear(dx, dw.tensor(), out);
      EXPECT_LT(RelErr(ToHost(out), ref), c.bound) << DTypeName(c.x) << "x" << DTypeName(c.w) << "->"
                                                   << DTypeName(c.out) << " " << n << "x" << m << "x" << k;
    }
}

// fp32 weights with up to kDeviceRoutedTokens tokens (the GEMV of gemv_f32.cu: the routers at
// decode) and with more (gemm_f32.cu, at prefill): a token's row is the same bits whichever tokens
// share its step, within each kernel's range of token counts.
TEST(CudaLinear, Fp32GemvRowsDoNotDependOnTheBatch) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(11);
  const std::int64_t m = 256, k = 4096;
  const auto x = Random(8 * k, rng), w = Random(m * k, rng, 0.05f);
  Buffer dw = ToDevice(DType::kF32, Shape{m, k}, w);
  Buffer all = Poisoned(DType::kF32, Shape{8, m});
  Gpu().Linear(ToDevice(DType::kF32, Shape{8, k}, x), dw.tensor(), all);
  const std::vector<float> together = ToHost(all);
  for (std::int64_t t : {0, 5, 7}) {
    const std::vector<float> row(x.begin() + t * k, x.begin() + (t + 1) * k);
    Buffer one = Poisoned(DType::kF32, Shape{1, m});
    Gpu().Linear(ToDevice(DType::kF32, Shape{1, k}, row), dw.tensor(), one);
    const std::vector<float> alone = ToHost(one);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + t * m)) << "token " << t;
  }
  // 200 tokens (the GEMV's token groups): every row the bits of the same token alone.
  const auto some = Random(200 * k, rng);
  Buffer two_hundred = Poisoned(DType::kF32, Shape{200, m});
  Gpu().Linear(ToDevice(DType::kF32, Shape{200, k}, some), dw.tensor(), two_hundred);
  const std::vector<float> rows200 = ToHost(two_hundred);
  for (std::int64_t t : {0, 8, 13, 199}) {
    Buffer one = Poisoned(DType::kF32, Shape{1, m});
    Gpu().Linear(ToDevice(DType::kF32, Shape{1, k}, std::vector<float>(some.begin() + t * k, some.begin() + (t + 1) * k)),
                 dw.tensor(), one);
    const std::vector<float> alone = ToHost(one);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), rows200.begin() + t * m)) << "token " << t << " of 200";
  }
  // More tokens (the tiled fp32 kernel): the first 300 of 400 tokens give the bits they give alone.
  const auto many = Random(400 * k, rng);
  Buffer big = Poisoned(DType::kF32, Shape{400, m}), part = Poisoned(DType::kF32, Shape{300, m});
  Gpu().Linear(ToDevice(DType::kF32, Shape{400, k}, many), dw.tensor(), big);
  Gpu().Linear(ToDevice(DType::kF32, Shape{300, k}, std::vector<float>(many.begin(), many.begin() + 300 * k)),
               dw.tensor(), part);
  const std::vector<float> all400 = ToHost(big), first300 = ToHost(part);
  EXPECT_TRUE(std::equal(first300.begin(), first300.end(), all400.begin())) << "the tiled fp32 kernel";
}

// e4m3 codes of host floats that are e4m3 values, as the CPU's FP8 operations take them.
struct HostFp8 {
  std::vector<std::uint8_t> codes;
  Tensor tensor;
  HostFp8(const std::vector<float>& w, std::int64_t m, std::int64_t k) : codes(m * k) {
    ConvertFromF32(DType::kF8E4M3, w.data(), codes.data(), m * k);
    tensor.data = codes.data();
    tensor.dtype = DType::kF8E4M3;
    tensor.shape = Shape{m, k};
  }
};

// Random e4m3 weights (no NaN codes) with positive block scales, as host floats.
void RandomFp8Weight(std::int64_t m, std::int64_t k, std::mt19937& rng, std::vector<float>& w,
                     std::vector<float>& scales) {
  w.resize(m * k);
  for (float& v : w) {
    std::uint8_t code = static_cast<std::uint8_t>(rng());
    if ((code & 0x7F) == 0x7F) code = 0x7E;
    v = F8E4M3ToF32(code);
  }
  scales.resize(((m + 127) / 128) * ((k + 127) / 128));
  std::uniform_real_distribution<float> u(1e-4f, 2e-3f);
  for (float& s : scales) s = u(rng);
}

TEST(CudaLinearFp8, MatchesCpuBlockScaledReference) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(11);
  for (DType out_dtype : {DType::kF32, DType::kBF16})
    // 1-2 tokens: GEMV kernel; 3-31: cuBLASLt on a padded batch; more: cuBLASLt.
    for (auto [n, m, k] : {std::tuple{1, 576, 7168}, {2, 1536, 7168}, {5, 200, 320}, {17, 576, 2048},
                           {33, 384, 1536}, {64, 1536, 7168}, {200, 7168, 2048}, {75, 256, 384},
                           {37, 384, 128}, {40, 1024, 256}, {37, 512, 1024}}) {
      std::vector<float> w, ws;
      RandomFp8Weight(m, k, rng, w, ws);
      auto x = RoundBf16(Random(n * k, rng));
      const HostFp8 hw(w, m, k);
      std::vector<float> ref(n * m);
      const std::int64_t mb = (m + 127) / 128, kb = (k + 127) / 128;
      cpu::LinearFp8(HostView(x, Shape{n, k}), hw.tensor, HostView(ws, Shape{mb, kb}), HostView(ref, Shape{n, m}));
      Buffer dx = ToDevice(DType::kBF16, Shape{n, k}, x), dw = ToDevice(DType::kF8E4M3, Shape{m, k}, w),
             dws = ToDevice(DType::kF32, Shape{mb, kb}, ws), out = Poisoned(out_dtype, Shape{n, m});
      Gpu().Linear(dx, WeightView(dw, dws, WeightFormat::Fp8Block128()), out);
      EXPECT_LT(RelErr(ToHost(out), ref), kFp8) << n << "x" << m << "x" << k << " -> " << DTypeName(out_dtype);
    }
  std::printf("FP8 GEMM path: %s (layout %d)\n", Gpu().context().fp8_layout == 4 ? "own kernel" : "cuBLASLt",
              Gpu().context().fp8_layout);
}

// A single token's product quantizes its activations inside the GEMV's warps (no separate
// quantization launch) by the quantizer's arithmetic, so it must equal, bit for bit, the same row
// computed in a two-token call (which quantizes first and runs the GEMV on the codes): wide and
// narrow row tilings, k with a partial 128-group, fp32 and bf16 inputs and outputs, values that hit
// the 1e-4 floor of the scale (a zero group), and the whole output against the CPU.
TEST(CudaLinearFp8, OneTokenQuantizedInTheGemvEqualsTheTwoTokenPath) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(13);
  for (auto [m, k] : {std::pair<std::int64_t, std::int64_t>{576, 7168}, {3072, 1536}, {7168, 2048}, {200, 320},
                      {2048, 1408 + 16}}) {
    for (DType x_dtype : {DType::kBF16, DType::kF32}) {
      std::vector<float> w, ws;
      RandomFp8Weight(m, k, rng, w, ws);
      std::vector<float> x = Random(2 * k, rng, 2.0f);
      for (std::int64_t c = 128; c < 256 && c < k; ++c) x[c] = 0.0f;  // a zero group: scale 1e-4 / 448
      if (x_dtype == DType::kBF16) x = RoundBf16(x);
      const std::int64_t mb = (m + 127) / 128, kb = (k + 127) / 128;
      Buffer dw = ToDevice(DType::kF8E4M3, Shape{m, k}, w), dws = ToDevice(DType::kF32, Shape{mb, kb}, ws);
      const WeightView view(dw, dws, WeightFormat::Fp8Block128());
      for (DType out_dtype : {DType::kF32, DType::kBF16}) {
        Buffer one = Poisoned(out_dtype, Shape{1, m}), two = Poisoned(out_dtype, Shape{2, m});
        Gpu().Linear(ToDevice(x_dtype, Shape{1, k}, std::vector<float>(x.begin(), x.begin() + k)), view, one);
        Gpu().Linear(ToDevice(x_dtype, Shape{2, k}, x), view, two);
        const std::vector<float> got = ToHost(one), both = ToHost(two);
        EXPECT_TRUE(SameBits(got, std::vector<float>(both.begin(), both.begin() + m)))
            << m << "x" << k << " " << DTypeName(x_dtype) << " -> " << DTypeName(out_dtype);
        const HostFp8 hw(w, m, k);
        std::vector<float> ref(m), x0(x.begin(), x.begin() + k);
        cpu::LinearFp8(HostView(x0, Shape{1, k}), hw.tensor, HostView(ws, Shape{mb, kb}), HostView(ref, Shape{1, m}));
        EXPECT_LT(RelErr(got, ref), kFp8) << m << "x" << k;
      }
    }
  }
}

TEST(CudaLinearFp8, QuantizerMatchesCpuCodesAndScales) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(12);
  const std::int64_t n = 9, k = 7168 + 64;  // a partial last group
  auto x = Random(n * k, rng, 3.0f);
  const std::int64_t kb = (k + 127) / 128;
  std::vector<std::uint8_t> ref_codes(n * k);
  std::vector<float> ref_scales(n * kb);
  for (std::int64_t i = 0; i < n; ++i)
    cpu::QuantizeFp8PerTokenGroup(x.data() + i * k, k, ref_codes.data() + i * k, ref_scales.data() + i * kb);
  Buffer dx = ToDevice(DType::kF32, Shape{n, k}, x);
  Buffer codes(DType::kU8, Shape{n, k}, Gpu().allocator()), scales(DType::kF32, Shape{n, kb}, Gpu().allocator());
  QuantizeFp8(Gpu().context(), dx, codes.ptr<std::uint8_t>(), scales.ptr<float>(), kb, 1);
  std::vector<std::uint8_t> got_codes(n * k);
  std::vector<float> got_scales(n * kb);
  Gpu().CopyBytesToHost(codes, got_codes.data());
  Gpu().CopyBytesToHost(scales, got_scales.data());
  EXPECT_EQ(got_codes, ref_codes);
  EXPECT_EQ(got_scales, ref_scales);
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
