// Elementwise and row-copy operations: CUDA against the CPU reference, fp32 and bf16 tensors.
#include <numeric>

#include "kernels/cuda/cuda_backend.h"
#include "kernels_cuda/cuda_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

struct DTypeCase {
  DType dtype;
  double bound;
};
const DTypeCase kCases[] = {{DType::kF32, kF32Elementwise}, {DType::kBF16, kBf16}};

std::vector<float> Prepare(std::vector<float> v, DType dtype) { return dtype == DType::kBF16 ? RoundBf16(v) : v; }

TEST(CudaElementwise, RmsNormWithPassThroughTailAndAliasing) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(1);
  for (const DTypeCase& c : kCases)
    // Widths up to 2,048 and 8,192 keep the row in registers; 12,288 takes the kernel's passes.
    for (auto [n, width, d] : {std::tuple{1, 64, 64}, {37, 576, 512}, {5, 7168, 7168}, {3, 12288, 12000}}) {
      auto x = Prepare(Random(n * width, rng), c.dtype);
      auto w = Prepare(Random(d, rng, 0.5f), c.dtype);
      std::vector<float> ref(x.size());
      Cpu().RmsNorm(HostView(x, Shape{n, width}), HostView(w, Shape{d}), 1e-6f, HostView(ref, Shape{n, width}));
      Buffer dx = ToDevice(c.dtype, Shape{n, width}, x), dw = ToDevice(c.dtype, Shape{d}, w),
             out = Poisoned(c.dtype, Shape{n, width});
      Gpu().RmsNorm(dx, dw, 1e-6f, out);
      EXPECT_LT(RelErr(ToHost(out), ref), c.bound) << DTypeName(c.dtype) << " n=" << n << " width=" << width;
      Gpu().RmsNorm(dx, dw, 1e-6f, dx);  // in place
      EXPECT_LT(RelErr(ToHost(dx), ref), c.bound) << "in place";
    }
}

// The fused residual step: the bits of the CUDA Add then RmsNorm (h and the normalised row), and
// the CPU's within the dtype's bound.
TEST(CudaElementwise, AddRmsNormIsAddThenRmsNorm) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (const DTypeCase& c : kCases)
    for (auto [n, width, d] : {std::tuple{1, 2048, 2048}, {37, 576, 512}, {64, 7168, 7168}, {3, 12288, 12288}}) {
      auto h = Prepare(Random(n * width, rng), c.dtype), y = Prepare(Random(n * width, rng), c.dtype);
      auto w = Prepare(Random(d, rng, 0.5f), c.dtype);
      std::vector<float> ref_h = h, ref(h.size());
      Cpu().AddRmsNorm(HostView(ref_h, Shape{n, width}), HostView(y, Shape{n, width}), HostView(w, Shape{d}), 1e-6f,
                       HostView(ref, Shape{n, width}));
      Buffer fused_h = ToDevice(c.dtype, Shape{n, width}, h), split_h = ToDevice(c.dtype, Shape{n, width}, h),
             dy = ToDevice(c.dtype, Shape{n, width}, y), dw = ToDevice(c.dtype, Shape{d}, w),
             fused = Poisoned(c.dtype, Shape{n, width}), split = Poisoned(c.dtype, Shape{n, width});
      Gpu().AddRmsNorm(fused_h, dy, dw, 1e-6f, fused);
      Gpu().Add(split_h, dy, split_h);
      Gpu().RmsNorm(split_h, dw, 1e-6f, split);
      EXPECT_TRUE(SameBits(ToHost(fused_h), ToHost(split_h))) << DTypeName(c.dtype) << " n=" << n << ": h";
      EXPECT_TRUE(SameBits(ToHost(fused), ToHost(split))) << DTypeName(c.dtype) << " n=" << n << ": out";
      EXPECT_LT(RelErr(ToHost(fused_h), ref_h), c.bound) << DTypeName(c.dtype) << " n=" << n;
      EXPECT_LT(RelErr(ToHost(fused), ref), c.bound) << DTypeName(c.dtype) << " n=" << n;
      Gpu().AddRmsNorm(split_h, dy, dw, 1e-6f, dy);  // out may be y
      Gpu().Add(fused_h, ToDevice(c.dtype, Shape{n, width}, y), fused_h);
      Gpu().RmsNorm(fused_h, dw, 1e-6f, fused);
      EXPECT_TRUE(SameBits(ToHost(dy), ToHost(fused))) << DTypeName(c.dtype) << " n=" << n << ": out = y";
    }
}

TEST(CudaElementwise, AddAndSiluMul) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(2);
  for (const DTypeCase& c : kCases)
    for (auto [n, inter] : {std::pair{1, 2048}, {33, 96}, {129, 18432}}) {
      auto a = Prepare(Random(n * 2 * inter, rng), c.dtype), b = Prepare(Random(n * 2 * inter, rng), c.dtype);
      std::vector<float> sum(a.size()), act(n * inter);
      Cpu().Add(HostView(a, Shape{n, 2 * inter}), HostView(b, Shape{n, 2 * inter}), HostView(sum, Shape{n, 2 * inter}));
      Cpu().SiluMul(HostView(a, Shape{n, 2 * inter}), HostView(act, Shape{n, inter}));
      Buffer da = ToDevice(c.dtype, Shape{n, 2 * inter}, a), db = ToDevice(c.dtype, Shape{n, 2 * inter}, b);
      Buffer dsum = Poisoned(c.dtype, Shape{n, 2 * inter}), dact = Poisoned(c.dtype, Shape{n, inter});
      Gpu().Add(da, db, dsum);
      Gpu().SiluMul(da, dact);
      EXPECT_LT(RelErr(ToHost(dsum), sum), c.bound) << "Add " << DTypeName(c.dtype) << " n=" << n;
      EXPECT_LT(RelErr(ToHost(dact), act), c.bound) << "SiluMul " << DTypeName(c.dtype) << " n=" << n;
    }
}

TEST(CudaElementwise, RopeBothLayoutsWithScaling) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(3);
  for (const DTypeCase& c : kCases)
    for (bool interleaved : {true, false})
      for (auto [n, heads, head_dim, offset] : {std::tuple{1, 1, 576, 512}, {19, 16, 192, 128}, {300, 4, 64, 0}}) {
        const int rope = 64;
        auto x = Prepare(Random(n * heads * head_dim, rng), c.dtype);
        std::vector<float> freq(rope / 2);
        for (int i = 0; i < rope / 2; ++i) freq[i] = std::pow(10000.0f, -2.0f * i / rope) * 0.37f;
        std::vector<std::int32_t> pos(n);
        for (auto& p : pos) p = static_cast<std::int32_t>(rng() % 65536);
        std::vector<float> ref = x;
        Cpu().Rope(HostView(ref, Shape{n, heads, head_dim}), offset, rope, pos, HostView(freq, Shape{rope / 2}), 1.23f,
                   interleaved);
        Buffer dx = ToDevice(c.dtype, Shape{n, heads, head_dim}, x), df = ToDevice(DType::kF32, Shape{rope / 2}, freq);
        Gpu().Rope(dx, offset, rope, pos, df, 1.23f, interleaved);
        // Large positions: sin/cos of big angles differ by a few ulps between libm and CUDA.
        EXPECT_LT(RelErr(ToHost(dx), ref), c.dtype == DType::kF32 ? 1e-5 : c.bound)
            << DTypeName(c.dtype) << " interleaved=" << interleaved << " n=" << n;
      }
}

// MLA's joint down-projection split into its two normalised latents, the key rotated: against the
// CPU op, and against the CUDA RmsNorm and Rope it fuses (the same sums in the same order).
TEST(CudaElementwise, SplitLatentsIsTwoNormsAndRope) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(4);
  for (bool interleaved : {true, false})
    for (auto [n, q_lora, kv_lora, rope] : {std::tuple{1, 1536, 512, 64}, {37, 2048, 512, 64}, {5, 96, 64, 16}}) {
      const int kv_width = kv_lora + rope;
      auto a = Random(n * (q_lora + kv_width), rng);
      auto q_norm = Random(q_lora, rng, 0.5f), kv_norm = Random(kv_lora, rng, 0.5f);
      std::vector<float> freq(rope / 2);
      for (int i = 0; i < rope / 2; ++i) freq[i] = std::pow(10000.0f, -2.0f * i / rope);
      std::vector<std::int32_t> pos(n);
      for (auto& p : pos) p = static_cast<std::int32_t>(rng() % 4096);
      std::vector<float> q_ref(n * q_lora), kv_ref(n * kv_width);
      Cpu().mla().SplitLatents(HostView(a, Shape{n, q_lora + kv_width}), HostView(q_norm, Shape{q_lora}),
                               HostView(kv_norm, Shape{kv_lora}), 1e-6f,
                               {pos, HostView(freq, Shape{rope / 2}), 0.9f, interleaved},
                               HostView(q_ref, Shape{n, q_lora}), HostView(kv_ref, Shape{n, 1, kv_width}));
      Buffer da = ToDevice(DType::kF32, Shape{n, q_lora + kv_width}, a), dqn = ToDevice(DType::kF32, Shape{q_lora}, q_norm),
             dkn = ToDevice(DType::kF32, Shape{kv_lora}, kv_norm), df = ToDevice(DType::kF32, Shape{rope / 2}, freq),
             q = Poisoned(DType::kF32, Shape{n, q_lora}), kv = Poisoned(DType::kF32, Shape{n, 1, kv_width});
      Gpu().mla().SplitLatents(da, dqn, dkn, 1e-6f, {pos, df, 0.9f, interleaved}, q, kv);
      const std::string what = StrCat("n=", n, " q_lora=", q_lora, " interleaved=", interleaved);
      EXPECT_LT(RelErr(ToHost(q), q_ref), 1e-5) << what;
      EXPECT_LT(RelErr(ToHost(kv), kv_ref), 1e-5) << what;
      // The unfused ops on the device, part by part.
      std::vector<float> q_part(n * q_lora), kv_part(n * kv_width);
      for (int i = 0; i < n; ++i) {
        std::copy_n(a.begin() + i * (q_lora + kv_width), q_lora, q_part.begin() + i * q_lora);
        std::copy_n(a.begin() + i * (q_lora + kv_width) + q_lora, kv_width, kv_part.begin() + i * kv_width);
      }
      Buffer uq = ToDevice(DType::kF32, Shape{n, q_lora}, q_part), ukv = ToDevice(DType::kF32, Shape{n, 1, kv_width}, kv_part);
      Gpu().RmsNorm(uq, dqn, 1e-6f, uq);
      Gpu().RmsNorm(ukv, dkn, 1e-6f, ukv);
      Gpu().Rope(ukv, kv_lora, rope, pos, df, 0.9f, interleaved);
      EXPECT_EQ(ToHost(q), ToHost(uq)) << what << ": the query latent differs from RmsNorm's";
      EXPECT_LT(RelErr(ToHost(kv), ToHost(ukv)), 1e-6) << what;
    }
}

TEST(CudaElementwise, EmbeddingWriteKvGatherRows) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(4);
  for (const DTypeCase& c : kCases) {
    const int vocab = 1000, d = 7168, slots = 4096, width = 576, n = 45;
    auto table = Prepare(Random(vocab * d, rng), c.dtype);
    std::vector<std::int32_t> ids(n);
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % vocab);
    // A vocab-parallel shard: rows [vocab_start, vocab_start + rows); other ids give zeros.
    const std::int64_t vocab_start = 300, shard_rows = 400;
    std::vector<float> shard(table.begin() + vocab_start * d, table.begin() + (vocab_start + shard_rows) * d);
    std::vector<float> emb(n * d);
    Cpu().Embedding(HostView(shard, Shape{shard_rows, d}), ids, vocab_start, HostView(emb, Shape{n, d}));
    Buffer dtable = ToDevice(c.dtype, Shape{shard_rows, d}, shard), demb = Poisoned(c.dtype, Shape{n, d});
    Gpu().Embedding(dtable, ids, vocab_start, demb);
    EXPECT_EQ(RelErr(ToHost(demb), emb), 0.0) << "Embedding " << DTypeName(c.dtype);
    Gpu().Zero(demb);
    for (float v : ToHost(demb)) ASSERT_EQ(v, 0.0f) << "Zero";

    // KV rows into random distinct slots of a cache that holds other values elsewhere.
    auto cache = Prepare(Random(slots * width, rng), c.dtype);
    auto rows = Prepare(Random(n * width, rng), c.dtype);
    std::vector<std::int64_t> slot_ids(slots);
    std::iota(slot_ids.begin(), slot_ids.end(), 0);
    std::shuffle(slot_ids.begin(), slot_ids.end(), rng);
    slot_ids.resize(n);
    std::vector<float> ref_cache = cache;
    Cpu().WriteKv(HostView(rows, Shape{n, width}), slot_ids, HostView(ref_cache, Shape{slots, width}));
    Buffer dcache = ToDevice(c.dtype, Shape{slots, width}, cache), drows = ToDevice(c.dtype, Shape{n, width}, rows);
    Gpu().WriteKv(drows, slot_ids, dcache);
    EXPECT_EQ(RelErr(ToHost(dcache), ref_cache), 0.0) << "WriteKv " << DTypeName(c.dtype);

    std::vector<std::int32_t> idx(77);
    for (auto& i : idx) i = static_cast<std::int32_t>(rng() % slots);
    std::vector<float> gathered(idx.size() * width);
    Cpu().GatherRows(HostView(ref_cache, Shape{slots, width}), idx, HostView(gathered, Shape{77, width}));
    Buffer dg = Poisoned(c.dtype, Shape{77, width});
    Gpu().GatherRows(dcache, idx, dg);
    EXPECT_EQ(RelErr(ToHost(dg), gathered), 0.0) << "GatherRows " << DTypeName(c.dtype);
  }
}

TEST(CudaElementwise, BadIndicesAreRejected) {
  FISSION_REQUIRE_GPU();
  Buffer rows = Poisoned(DType::kF32, Shape{10, 4}), out = Poisoned(DType::kF32, Shape{1, 4});
  const std::int32_t bad[] = {10};
  EXPECT_DEATH(Gpu().GatherRows(rows, bad, out), "GatherRows index");
}

// The shared backend's cache holds blocks of earlier tests (any of which may serve a request of
// their size), so the test starts from an empty cache.
TEST(CudaAllocator, ReusesFreedBlocks) {
  FISSION_REQUIRE_GPU();
  CachingAllocator& allocator = *Gpu().context().allocator();
  allocator.ReleaseCached();
  ASSERT_EQ(allocator.bytes_cached(), 0u);
  void* first = nullptr;
  {
    Buffer a(DType::kF32, Shape{1000, 1000}, Gpu().allocator());
    first = a.tensor().data;
  }
  EXPECT_GT(allocator.bytes_cached(), 0u);
  Buffer b(DType::kF32, Shape{1000, 1000}, Gpu().allocator());
  EXPECT_EQ(b.tensor().data, first);
  EXPECT_EQ(allocator.bytes_cached(), 0u);
  Buffer c(DType::kF32, Shape{1000, 1000}, Gpu().allocator());
  EXPECT_NE(c.tensor().data, first);
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
