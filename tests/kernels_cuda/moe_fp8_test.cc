// FP8 routed experts: CUDA (grouped GEMV for experts with few rows, cuBLASLt block scaling for the
// others) against the CPU reference, which quantizes each expert's rows exactly as LinearFp8 does.
#include <algorithm>
#include <tuple>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels_cuda/cuda_testlib.h"

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

TEST(CudaMoeFp8, ExpertsMatchCpuReference) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(31);
  struct Case {
    int n, experts, top_k;
    std::int64_t hidden, inter;
    bool hot;
    DType xtype;
  };
  // Decode (every expert on the GEMV), a partial 128-group in k and partial blocks in m, many
  // tokens (every expert on cuBLASLt), and both paths in one call.
  for (const Case c : {Case{1, 8, 2, 256, 128, false, DType::kBF16}, Case{13, 16, 4, 512, 256, false, DType::kF32},
                       Case{7, 6, 3, 320, 200, false, DType::kF32}, Case{300, 8, 2, 384, 128, false, DType::kBF16},
                       Case{40, 32, 4, 1024, 256, true, DType::kBF16}}) {
    std::vector<Fp8Weight> gu, down;
    for (int e = 0; e < c.experts; ++e) {
      gu.emplace_back(2 * c.inter, c.hidden, rng);
      down.emplace_back(c.hidden, c.inter, rng);
    }
    std::vector<std::vector<std::uint8_t>> host_codes;
    std::vector<Buffer> device;
    std::vector<Tensor> hgu, hgus, hdown, hdowns, dgu, dgus, ddown, ddowns;
    auto add = [&](Fp8Weight& w, std::vector<Tensor>& hw, std::vector<Tensor>& hs, std::vector<Tensor>& dw,
                   std::vector<Tensor>& ds) {
      host_codes.emplace_back(w.values.size());
      ConvertFromF32(DType::kF8E4M3, w.values.data(), host_codes.back().data(), w.values.size());
      Tensor codes;
      codes.data = host_codes.back().data();
      codes.dtype = DType::kF8E4M3;
      codes.shape = w.shape;
      hw.push_back(codes);
      hs.push_back(HostView(w.scales, w.scale_shape));
      device.push_back(ToDevice(DType::kF8E4M3, w.shape, w.values));
      dw.push_back(device.back());
      device.push_back(ToDevice(DType::kF32, w.scale_shape, w.scales));
      ds.push_back(device.back());
    };
    host_codes.reserve(2 * c.experts);
    for (int e = 0; e < c.experts; ++e) {
      add(gu[e], hgu, hgus, dgu, dgus);
      add(down[e], hdown, hdowns, ddown, ddowns);
    }
    auto x = Random(c.n * c.hidden, rng);
    if (c.xtype == DType::kBF16) x = RoundBf16(x);
    std::vector<std::int32_t> ids = DrawIds(c.n, c.experts, c.top_k, c.hot, rng);
    std::vector<float> idsf(ids.begin(), ids.end()), weights(c.n * c.top_k);
    std::uniform_real_distribution<float> u(0.05f, 1.0f);
    for (float& w : weights) w = u(rng);
    Tensor hids;
    hids.data = ids.data();
    hids.dtype = DType::kI32;
    hids.shape = Shape{c.n, c.top_k};
    std::vector<float> ref(c.n * c.hidden);
    cpu::MoeExpertsFp8(HostView(x, Shape{c.n, c.hidden}), hids, HostView(weights, Shape{c.n, c.top_k}), hgu, hgus,
                       hdown, hdowns, HostView(ref, Shape{c.n, c.hidden}));
    Buffer dx = ToDevice(c.xtype, Shape{c.n, c.hidden}, x), did = ToDevice(DType::kI32, Shape{c.n, c.top_k}, idsf),
           dwt = ToDevice(DType::kF32, Shape{c.n, c.top_k}, weights),
           out = Poisoned(DType::kF32, Shape{c.n, c.hidden});
    Gpu().MoeExpertsFp8(dx, did, dwt, dgu, dgus, ddown, ddowns, out);
    EXPECT_LT(RelErr(ToHost(out), ref), kFp8)
        << "n=" << c.n << " experts=" << c.experts << " " << c.hidden << "x" << c.inter << (c.hot ? " hot" : "");
  }
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
