// The FP8 latent cache (--kv-cache-dtype fp8_e4m3) on CUDA against the CPU reference:
//  - WriteLatent quantizes to the same bytes as the CPU (codes, per-128 scales, bf16 rope part),
//    from fp32 and from bf16 rows, with a partial last group, zero and large rows and skipped slots;
//  - dense MLA (both forms, tuned and small shapes, decode with split keys and prefill chunks) and
//    sparse MLA read the same FP8 cache and agree with the CPU, which decodes code × scale in fp32.
// Bounds: the tuned kernels round each decoded value to bf16 for the tensor cores (one rounding
// more than a bf16 cache, whose values are exact), so kAttention as the bf16 cases; the small
// shapes' fp32 kernels decode exactly as the CPU does, so only summation order remains (1e-5).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels_cuda/cuda_testlib.h"
#include "kernels_cuda/dsa_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

MlaShape Fp8Shape(std::int64_t heads, std::int64_t page, bool small) {
  MlaShape sh = small ? MlaShape{heads, 16, 8, 16, 160, 1.0f / std::sqrt(24.0f), page}
                      : MlaShape{heads, 128, 64, 128, 512, 1.0f / std::sqrt(192.0f), page};
  sh.latent_format = LatentFormat::kFp8;
  return sh;
}

// Latent rows for every slot: random, with a zero row, a row of large values and one of tiny ones.
std::vector<float> LatentRows(std::int64_t slots, std::int64_t width, std::mt19937& rng) {
  std::vector<float> rows = Random(slots * width, rng);
  for (std::int64_t c = 0; c < width; ++c) {
    rows[c] = 0.0f;
    if (slots > 2) {
      rows[width + c] *= 3e4f;
      rows[2 * width + c] *= 1e-6f;
    }
  }
  return rows;
}

// The cache the CPU writes from `rows` into slots [0, slots) (every slot), as bytes.
std::vector<std::uint8_t> CpuCache(std::vector<float>& rows, std::int64_t slots, const MlaShape& sh) {
  const std::int64_t width = sh.kv_lora_rank + sh.qk_rope_head_dim;
  const std::int64_t bytes = LatentEntryBytes(sh.kv_lora_rank, sh.qk_rope_head_dim);
  std::vector<std::uint8_t> cache(slots * bytes, 0);
  std::vector<std::int64_t> all(slots);
  std::iota(all.begin(), all.end(), 0);
  Cpu().mla().WriteLatent(HostView(rows, Shape{slots, width}), all, HostTensor(cache.data(), DType::kU8, Shape{slots, bytes}), sh);
  return cache;
}

Buffer DeviceBytes(const std::vector<std::uint8_t>& bytes, Shape shape) {
  Buffer b(DType::kU8, shape, Gpu().allocator());
  Gpu().CopyBytesFromHost(bytes.data(), b);
  return b;
}

TEST(CudaMlaFp8, WriteLatentStoresTheCpuBytes) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(81);
  for (bool small : {false, true}) {
    const MlaShape sh = Fp8Shape(4, 16, small);
    const std::int64_t slots = 40, width = sh.kv_lora_rank + sh.qk_rope_head_dim;
    const std::int64_t bytes = LatentEntryBytes(sh.kv_lora_rank, sh.qk_rope_head_dim);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      std::vector<float> rows = LatentRows(slots, width, rng);
      if (dtype == DType::kBF16) rows = RoundBf16(rows);
      // Rows go to shuffled slots; every fifth row is skipped (slot -1) and its slot keeps 0xAB.
      std::vector<std::int64_t> order(slots);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      for (std::int64_t i = 0; i < slots; i += 5) order[i] = -1;
      std::vector<std::uint8_t> want(slots * bytes, 0xAB);
      Cpu().mla().WriteLatent(HostView(rows, Shape{slots, width}), order, HostTensor(want.data(), DType::kU8, Shape{slots, bytes}), sh);
      Buffer cache = DeviceBytes(std::vector<std::uint8_t>(slots * bytes, 0xAB), Shape{slots, bytes});
      Buffer dev_rows = ToDevice(dtype, Shape{slots, width}, rows);
      Gpu().mla().WriteLatent(dev_rows, order, cache, sh);
      std::vector<std::uint8_t> got(slots * bytes);
      Gpu().CopyBytesToHost(cache, got.data());
      std::int64_t differ = 0;
      for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
      EXPECT_EQ(differ, 0) << (small ? "small" : "tuned") << " shape, " << DTypeName(dtype) << " rows: " << differ
                           << " of " << got.size() << " cache bytes differ from the CPU's";
    }
  }
}

// One paged batch over an FP8 cache the CPU wrote: queries, kv_b and the cache's bytes.
struct Fp8Batch {
  MlaShape sh;
  PagedBatch b;
  std::int64_t qk, width, bytes;
  std::vector<float> q, rows, kv_b;
  std::vector<std::uint8_t> cache;

  Fp8Batch(const std::vector<DsaSeqSpec>& specs, std::int64_t heads, std::int64_t page, bool small, std::mt19937& rng)
      : sh(Fp8Shape(heads, page, small)), b(specs, page, rng) {
    qk = sh.qk_nope_head_dim + sh.qk_rope_head_dim;
    width = sh.kv_lora_rank + sh.qk_rope_head_dim;
    bytes = LatentEntryBytes(sh.kv_lora_rank, sh.qk_rope_head_dim);
    q = RoundBf16(Random(b.n * heads * qk, rng));
    kv_b = RoundBf16(Random(heads * (sh.qk_nope_head_dim + sh.v_head_dim) * sh.kv_lora_rank, rng, 0.05f));
    rows = Random(b.slots() * width, rng);
    cache = CpuCache(rows, b.slots(), sh);
  }
  Shape q_shape() const { return Shape{b.n, sh.num_heads, qk}; }
  Shape kv_b_shape() const { return Shape{sh.num_heads * (sh.qk_nope_head_dim + sh.v_head_dim), sh.kv_lora_rank}; }
  Shape out_shape() const { return Shape{b.n, sh.num_heads, sh.v_head_dim}; }
  std::string Describe(const char* form) const {
    return StrCat(form, " heads=", sh.num_heads, " page=", sh.page_size, sh.kv_lora_rank == 512 ? "" : " small");
  }
};

enum class Form { kExpanded, kAbsorbed, kSparse };

// Runs `form` on both backends over the same FP8 cache; returns the relative error.
double Compare(Fp8Batch& p, Form form, std::mt19937& rng) {
  std::vector<float> ref(p.b.n * p.sh.num_heads * p.sh.v_head_dim, 0.0f);
  Tensor q = HostView(p.q, p.q_shape()), kv_b = HostView(p.kv_b, p.kv_b_shape()), out = HostView(ref, p.out_shape());
  Tensor cache = HostTensor(p.cache.data(), DType::kU8, Shape{p.b.slots(), p.bytes});
  Buffer dq = ToDevice(DType::kBF16, p.q_shape(), p.q), dkv_b = ToDevice(DType::kBF16, p.kv_b_shape(), p.kv_b),
         dcache = DeviceBytes(p.cache, Shape{p.b.slots(), p.bytes}), dout = Poisoned(DType::kF32, p.out_shape());
  if (form == Form::kSparse) {
    // Half of each row's visible positions, in random order (a dense row where it sees few keys).
    const std::int64_t width = 96;
    std::vector<std::int32_t> topk(p.b.n * width, -1);
    for (const SeqAttention& s : p.b.seqs)
      for (int t = 0; t < s.query_len; ++t) {
        std::vector<std::int32_t> all(s.query_positions[t] + 1);
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        const std::size_t take = std::min<std::size_t>(width, std::max<std::size_t>(1, all.size() / 2));
        std::copy(all.begin(), all.begin() + take, topk.begin() + (s.query_start + t) * width);
      }
    Buffer dtopk(DType::kI32, Shape{p.b.n, width}, Gpu().allocator());
    Gpu().CopyBytesFromHost(topk.data(), dtopk);
    const Tensor sel = HostTensor(topk.data(), DType::kI32, Shape{p.b.n, width});
    Cpu().dsa().SparseMla(q, cache, kv_b, sel, p.b.seqs, p.sh, true, out);
    Gpu().dsa().SparseMla(dq, dcache, dkv_b, dtopk, p.b.seqs, p.sh, true, dout);
  } else if (form == Form::kExpanded) {
    Cpu().mla().Expanded(q, cache, kv_b, p.b.seqs, p.sh, out);
    Gpu().mla().Expanded(dq, dcache, dkv_b, p.b.seqs, p.sh, dout);
  } else {
    Cpu().mla().Absorbed(q, cache, kv_b, p.b.seqs, p.sh, out);
    Gpu().mla().Absorbed(dq, dcache, dkv_b, p.b.seqs, p.sh, dout);
  }
  return RelErr(ToHost(dout), ref);
}

TEST(CudaMlaFp8, AttentionReadsFp8Rows) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(82);
  // Decodes with split keys (long and short contexts), a prefill chunk after a cached prefix, a
  // context-parallel share (every third position).
  const std::vector<DsaSeqSpec> decode = {{0, 1}, {199, 1}, {1499, 1}, {4000, 1}};
  const std::vector<DsaSeqSpec> mixed = {{0, 1}, {300, 1}, {37, 3}, {64, 40}, {10, 20, 3}};
  for (bool small : {false, true}) {
    const double bound = small ? 1e-5 : kAttention;
    for (std::int64_t heads : {16, 128}) {
      if (small && heads == 128) continue;
      Fp8Batch d(decode, heads, 16, small, rng);
      EXPECT_LT(Compare(d, Form::kAbsorbed, rng), bound) << d.Describe("absorbed decode");
      EXPECT_LT(Compare(d, Form::kSparse, rng), bound) << d.Describe("sparse decode");
      Fp8Batch m(mixed, heads, 64, small, rng);
      EXPECT_LT(Compare(m, Form::kAbsorbed, rng), bound) << m.Describe("absorbed mixed");
      EXPECT_LT(Compare(m, Form::kSparse, rng), bound) << m.Describe("sparse mixed");
    }
    // The expanded form expands every key for every head on the CPU: few heads keep it quick.
    Fp8Batch e(mixed, 4, 16, small, rng);
    EXPECT_LT(Compare(e, Form::kExpanded, rng), bound) << e.Describe("expanded");
  }
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
