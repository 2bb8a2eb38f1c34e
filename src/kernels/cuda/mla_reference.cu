// MLA attention for head shapes the tuned kernels are not built for (they take DeepSeek-V3's
// 128/64/128 heads and 512 + 64 latent rows): small test and demo checkpoints. Straightforward and
// fp32 throughout: one block per (query, head) in the absorbed formulation, which equals the
// expanded one — q_latent = q_nope · W_UK[h], scores over the latent rows (plus the shared rope
// key), softmax, o_latent = Σ p · latent, out = W_UV[h] · o_latent.
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mla_latent.cuh"

namespace fission::kernels::cuda {
namespace {

constexpr int kThreads = 128;
// Scores of one query live in shared memory: contexts up to this many keys.
constexpr int kMaxKeys = 8192;

struct RowInfo {
  std::int32_t position;    // keys [0, position] are visible
  std::int32_t slot_begin;  // this sequence's cache slots start here in `slots`
};

__device__ float BlockSum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += red[w];
  __syncthreads();
  return total;
}

__device__ float BlockMax(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = red[0];
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  return m;
}

// Grid (rows, heads); dynamic shared memory: lora (q_latent) + lora (o_latent) + kMaxKeys floats.
__global__ void MlaReferenceKernel(const void* q, Elem qe, LatentRows cache, const void* kv_b, Elem we,
                                   const std::int32_t* rows, const RowInfo* infos, const std::int64_t* slots,
                                   void* out, Elem oe, int heads, int nope, int rope, int vdim, int lora,
                                   float scale) {
  extern __shared__ float smem[];
  float* q_lat = smem;
  float* o_lat = q_lat + lora;
  float* scores = o_lat + lora;
  __shared__ float red[kThreads / 32];
  const int h = blockIdx.y;
  const std::int64_t row = rows[blockIdx.x];
  const RowInfo info = infos[blockIdx.x];
  const int keys = info.position + 1;
  const std::int64_t qk = nope + rope;
  const std::int64_t q_base = (row * heads + h) * qk;
  const std::int64_t w_base = static_cast<std::int64_t>(h) * (nope + vdim) * lora;
  for (int l = threadIdx.x; l < lora; l += kThreads) {
    float acc = 0.0f;
    for (int d = 0; d < nope; ++d) acc += LoadF(q, q_base + d, qe) * LoadF(kv_b, w_base + static_cast<std::int64_t>(d) * lora + l, we);
    q_lat[l] = acc;
  }
  __syncthreads();
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < keys; j += kThreads) {
    const std::int64_t slot = slots[info.slot_begin + j];
    float s = 0.0f;
    for (int l = 0; l < lora; ++l) s += q_lat[l] * LatentValue(cache, slot, l);
    for (int r = 0; r < rope; ++r) s += LoadF(q, q_base + nope + r, qe) * LatentValue(cache, slot, lora + r);
    s *= scale;
    scores[j] = s;
    local_max = fmaxf(local_max, s);
  }
  const float m = BlockMax(local_max, red);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < keys; j += kThreads) {
    const float p = __expf(scores[j] - m);
    scores[j] = p;
    local_sum += p;
  }
  const float inv = 1.0f / BlockSum(local_sum, red);  // also orders the score writes before the reads
  for (int l = threadIdx.x; l < lora; l += kThreads) {
    float acc = 0.0f;
    for (int j = 0; j < keys; ++j) acc += scores[j] * LatentValue(cache, slots[info.slot_begin + j], l);
    o_lat[l] = acc * inv;
  }
  __syncthreads();
  const std::int64_t out_base = (row * heads + h) * vdim;
  for (int v = threadIdx.x; v < vdim; v += kThreads) {
    const std::int64_t wv = w_base + static_cast<std::int64_t>(nope + v) * lora;
    float acc = 0.0f;
    for (int l = 0; l < lora; ++l) acc += LoadF(kv_b, wv + l, we) * o_lat[l];
    StoreF(out, out_base + v, oe, acc);
  }
}

}  // namespace

bool MlaTunedShape(const MlaShape& sh, bool absorbed) {
  if (absorbed) return sh.kv_lora_rank == 512 && sh.qk_rope_head_dim == 64 && sh.qk_nope_head_dim % 8 == 0;
  return sh.qk_nope_head_dim == 128 && sh.qk_rope_head_dim == 64 && sh.v_head_dim == 128;
}

void MlaAttentionReference(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                           std::span<const SeqAttention> seqs, const MlaShape& sh, const Tensor& out) {
  std::vector<std::int32_t> rows;
  std::vector<RowInfo> infos;
  std::vector<std::int64_t> slots;
  for (const SeqAttention& s : seqs) {
    FISSION_CHECK(s.kv_len <= kMaxKeys, "the reference MLA kernel takes up to ", kMaxKeys, " keys, got ", s.kv_len);
    const auto begin = static_cast<std::int32_t>(slots.size());
    for (int p = 0; p < s.kv_len; ++p)
      slots.push_back(static_cast<std::int64_t>(s.block_table[p / sh.page_size]) * sh.page_size + p % sh.page_size);
    for (int k = 0; k < s.query_len; ++k) {
      FISSION_CHECK(s.query_positions[k] < s.kv_len, "query position ", s.query_positions[k], " past ", s.kv_len,
                    " keys");
      rows.push_back(s.query_start + k);
      infos.push_back({s.query_positions[k], begin});
    }
  }
  if (rows.empty()) return;
  DeviceMeta rows_dev = ctx.Upload(std::span<const std::int32_t>(rows));
  DeviceMeta infos_dev = ctx.Upload(std::span<const RowInfo>(infos));
  DeviceMeta slots_dev = ctx.Upload(std::span<const std::int64_t>(slots));
  const int lora = static_cast<int>(sh.kv_lora_rank);
  // Within the default 48 KiB of dynamic shared memory, so no per-device attribute is needed.
  FISSION_CHECK(lora <= 2048, "the reference MLA kernel takes kv_lora_rank up to 2048, got ", lora);
  const std::size_t smem = (2 * static_cast<std::size_t>(lora) + kMaxKeys) * sizeof(float);
  MlaReferenceKernel<<<dim3(static_cast<unsigned>(rows.size()), static_cast<unsigned>(sh.num_heads)), kThreads, smem,
                       ctx.stream()>>>(
      q.data, ElemOf(q), LatentRowsOf(cache, sh), kv_b.data, ElemOf(kv_b), rows_dev.ptr<std::int32_t>(),
      reinterpret_cast<const RowInfo*>(infos_dev.tensor().data), reinterpret_cast<const std::int64_t*>(slots_dev.tensor().data),
      out.data, ElemOf(out), static_cast<int>(sh.num_heads), static_cast<int>(sh.qk_nope_head_dim),
      static_cast<int>(sh.qk_rope_head_dim), static_cast<int>(sh.v_head_dim), lora, sh.softmax_scale);
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda
