// Sparse MLA (DeepSeek Sparse Attention's attention over the selected positions) on CUDA against
// the CPU reference with the same selection: both forms, fp32 and bf16 caches, paged and shuffled,
// decode rows with split selections, prefill rows, selections shorter than topk (-1 padded) and
// rows that end their selection early, head counts that leave a partial group of 64, the fp32
// kernel for other shapes, rows outside every sequence (left as they are), and a captured decode
// step. Bound: kAttention (2e-2 relative L2), as the dense MLA tests: q_latent, the latent rows and
// the probabilities are rounded to bf16 for the tensor cores (the CPU gets the same bf16-rounded
// inputs in the bf16 cases); the fp32 kernel of small shapes meets the CPU near 1e-6.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels_cuda/cuda_testlib.h"
#include "kernels_cuda/dsa_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

struct SparseCase {
  std::vector<DsaSeqSpec> specs;
  std::int64_t heads, page, width;
  DType dtype;
  bool absorbed;
  bool small = false;  // dimensions the tuned kernel does not take
};

std::string Describe(const SparseCase& c) {
  return StrCat(c.absorbed ? "absorbed" : "expanded", " ", DTypeName(c.dtype), " heads=", c.heads, " page=", c.page,
                " width=", c.width, c.small ? " small" : "");
}

struct SparseProblem {
  SparseCase c;
  MlaShape sh;
  PagedBatch b;
  std::int64_t qk = 0, row_w = 0;
  std::vector<float> q, cache, kv_b;
  std::vector<std::int32_t> topk;

  SparseProblem(const SparseCase& sc, std::mt19937& rng, std::int64_t rows_outside = 1)
      : c(sc), b(sc.specs, sc.page, rng, rows_outside) {
    sh = c.small ? MlaShape{c.heads, 16, 8, 16, 32, 1.0f / std::sqrt(24.0f), c.page}
                 : MlaShape{c.heads, 128, 64, 128, 512, 1.0f / std::sqrt(192.0f), c.page};
    qk = sh.qk_nope_head_dim + sh.qk_rope_head_dim;
    row_w = sh.kv_lora_rank + sh.qk_rope_head_dim;
    q = Random(b.n * c.heads * qk, rng);
    cache = Random(b.slots() * row_w, rng);
    kv_b = Random(c.heads * (sh.qk_nope_head_dim + sh.v_head_dim) * sh.kv_lora_rank, rng, 0.05f);
    if (c.dtype == DType::kBF16) {
      q = RoundBf16(q);
      cache = RoundBf16(cache);
      kv_b = RoundBf16(kv_b);
    }
    Select(rng);
  }

  // Each row's selection: distinct visible positions in random order, min(width, visible) of them
  // (every third row stops early, at half), -1 after.
  void Select(std::mt19937& rng) {
    topk.assign(b.n * c.width, -1);
    int count = 0;
    for (const SeqAttention& s : b.seqs)
      for (int t = 0; t < s.query_len; ++t) {
        const int visible = s.query_positions[t] + 1;
        std::vector<std::int32_t> all(visible);
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        int take = static_cast<int>(std::min<std::int64_t>(c.width, visible));
        if (++count % 3 == 0) take = std::max(1, take / 2);
        std::copy(all.begin(), all.begin() + take, topk.begin() + (s.query_start + t) * c.width);
      }
  }

  std::int64_t out_width() const { return c.heads * sh.v_head_dim; }

  std::vector<float> RunCpu() {
    std::vector<float> out(b.n * out_width(), 0.0f);
    Tensor sel;
    sel.data = topk.data();
    sel.dtype = DType::kI32;
    sel.shape = Shape{b.n, c.width};
    sel.device = Device::Cpu();
    Cpu().dsa().SparseMla(HostView(q, Shape{b.n, c.heads, qk}), HostView(cache, Shape{b.slots(), row_w}),
                          HostView(kv_b, Shape{c.heads * (sh.qk_nope_head_dim + sh.v_head_dim), sh.kv_lora_rank}), sel,
                          b.seqs, sh, c.absorbed, HostView(out, Shape{b.n, c.heads, sh.v_head_dim}));
    return out;
  }

  // The rows of `all` that belong to sequences.
  std::vector<float> Owned(const std::vector<float>& all) const {
    std::vector<float> out;
    for (const SeqAttention& s : b.seqs)
      out.insert(out.end(), all.begin() + s.query_start * out_width(),
                 all.begin() + (s.query_start + s.query_len) * out_width());
    return out;
  }
};

struct DeviceSparse {
  Buffer q, cache, kv_b, topk, out;
  DeviceSparse(const SparseProblem& p) {
    q = ToDevice(p.c.dtype, Shape{p.b.n, p.c.heads, p.qk}, p.q);
    cache = ToDevice(p.c.dtype, Shape{p.b.slots(), p.row_w}, p.cache);
    kv_b = ToDevice(p.c.dtype, Shape{p.c.heads * (p.sh.qk_nope_head_dim + p.sh.v_head_dim), p.sh.kv_lora_rank}, p.kv_b);
    topk = Buffer(DType::kI32, Shape{p.b.n, p.c.width}, Gpu().allocator());
    Gpu().CopyBytesFromHost(p.topk.data(), topk);
    out = Poisoned(DType::kF32, Shape{p.b.n, p.c.heads, p.sh.v_head_dim});
  }
  void Run(const SparseProblem& p) { Gpu().dsa().SparseMla(q, cache, kv_b, topk, p.b.seqs, p.sh, p.c.absorbed, out); }
};

void CheckSparse(const SparseCase& c, std::mt19937& rng) {
  SparseProblem p(c, rng);
  const std::vector<float> ref = p.RunCpu();
  DeviceSparse d(p);
  d.Run(p);
  const std::vector<float> got = ToHost(d.out);
  EXPECT_LT(RelErr(p.Owned(got), p.Owned(ref)), c.small ? 1e-5 : kAttention) << Describe(c);
  for (std::int64_t row = p.b.n - p.b.spare_rows; row < p.b.n; ++row)
    EXPECT_TRUE(std::isnan(got[row * p.out_width()])) << Describe(c) << ": row " << row << " outside every sequence was written";
}

// Decode rows (one or two split, depending on the batch), a prefill chunk whose rows see fewer and
// more keys than the selection holds, a context-parallel share.
const std::vector<DsaSeqSpec> kMixed = {{5000, 1}, {100, 1}, {2047, 1}, {0, 24}, {2040, 6}, {3000, 3, 5}};

TEST(CudaDsa, SparseMlaAbsorbedMatchesCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(71);
  CheckSparse({kMixed, 128, 64, 2048, DType::kBF16, true}, rng);  // DeepSeek-V3.2
  CheckSparse({kMixed, 64, 16, 2048, DType::kBF16, true}, rng);   // GLM-5
  CheckSparse({kMixed, 80, 16, 300, DType::kF32, true}, rng);     // fp32 cache, a partial head group
  CheckSparse({{{9000, 1}}, 128, 64, 2048, DType::kBF16, true}, rng);  // one row: the most splits
  CheckSparse({{{9000, 1}, {4000, 1}}, 16, 64, 2048, DType::kBF16, true}, rng);
}

TEST(CudaDsa, SparseMlaExpandedMatchesCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(72);
  // The CPU expands every key of a sequence for every head: small head counts keep it quick.
  const std::vector<DsaSeqSpec> specs = {{0, 40}, {300, 20}, {1000, 3, 2}, {700, 1}};
  CheckSparse({specs, 16, 16, 256, DType::kBF16, false}, rng);
  CheckSparse({specs, 16, 16, 64, DType::kF32, false}, rng);
  CheckSparse({{{0, 48}, {600, 8}}, 64, 64, 512, DType::kBF16, false}, rng);
}

TEST(CudaDsa, SparseMlaOtherShapesMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(73);
  for (bool absorbed : {true, false}) {
    CheckSparse({{{0, 12}, {50, 3}, {400, 1}}, 2, 4, 16, DType::kF32, absorbed, true}, rng);
    CheckSparse({{{0, 12}, {50, 3}, {400, 1}}, 3, 5, 40, DType::kF32, absorbed, true}, rng);
  }
}

// A pure decode step captured with positions and tables in an input block (the selection is device
// data the step writes): the replay after every sequence advanced a token and got a new selection
// matches the CPU and, bit for bit, an eager call.
TEST(CudaDsa, SparseMlaPureDecodeCapturedReplaysNextPositions) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(74);
  CudaContext& ctx = Gpu().context();
  const SparseCase c{{{10, 1}, {2500, 1}, {5000, 1}, {700, 1}}, 128, 16, 2048, DType::kBF16, true};
  SparseProblem p(c, rng, /*rows_outside=*/0);
  p.b.MakeContiguous();
  DeviceSparse d(p);
  auto run = [&] { d.Run(p); };
  run();
  EXPECT_LT(RelErr(ToHost(d.out), p.RunCpu()), kAttention);

  ctx.BeginCapture({});
  EXPECT_THROW(run(), Error) << "positions from outside an input block were captured";
  ctx.AbortCapture();

  const std::size_t bytes = p.b.block.size() * sizeof(std::int32_t);
  Buffer device_block(DType::kI32, Shape{static_cast<std::int64_t>(p.b.block.size())}, Gpu().allocator());
  Gpu().CopyBytesFromHost(p.b.block.data(), device_block);
  const InputMirror block{reinterpret_cast<const char*>(p.b.block.data()), static_cast<char*>(device_block.tensor().data),
                          bytes};
  MirrorScope mirror(ctx, block);
  CapturedGraph graph(ctx, run, block);
  EXPECT_FALSE(graph.uploaded_constants()) << "the decode path uploaded constants";
  p.b.Advance();
  p.Select(rng);
  Gpu().CopyBytesFromHost(p.topk.data(), d.topk);
  Gpu().CopyBytesFromHost(p.b.block.data(), device_block);
  graph.Launch();
  const std::vector<float> replayed = ToHost(d.out);
  EXPECT_LT(RelErr(replayed, p.RunCpu()), kAttention);
  run();
  EXPECT_TRUE(SameBits(ToHost(d.out), replayed)) << "replay and eager call differ";
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
