// Host-side pieces of MLA attention that the dense forms (mla_attention.cu) and the sparse ones of
// DeepSeek Sparse Attention (dsa_sparse_mla.cu, dsa_indexer.cu) share: query runs, the absorption
// and value GEMMs of the absorbed form, the split rule, and the per-sequence uploads a captured
// decode step resolves to its input block's device copy.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_ops.h"

namespace fission::kernels::cuda {

// Rows [begin, end) of the flattened queries that belong to the given sequences, merged into runs.
std::vector<std::pair<std::int64_t, std::int64_t>> QueryRuns(std::span<const SeqAttention> seqs);
// A bf16 copy of t, or t itself when it already is bf16.
Tensor AsBf16(CudaContext& ctx, const Tensor& t, Buffer& holder);
// The absorbed form's per-head GEMMs over runs of query rows (strided-batched cuBLASLt, a head per
// batch entry): q_latent[t, h] = q_nope[t, h] · W_UK[h], and out[t, h] = W_UV[h] · o_latent[t, h],
// W_UK[h] / W_UV[h] being rows h·(nope + v) + [0, nope) / + nope + [0, v) of kv_b (bf16).
void AbsorbQueries(CudaContext& ctx, const __nv_bfloat16* wb, const __nv_bfloat16* qb, __nv_bfloat16* ql,
                   std::span<const std::pair<std::int64_t, std::int64_t>> runs, const MlaShape& sh);
void ProjectValues(CudaContext& ctx, const __nv_bfloat16* wb, const __nv_bfloat16* ol, const Tensor& out,
                   std::span<const std::pair<std::int64_t, std::int64_t>> runs, const MlaShape& sh);
// The fewest splits (at most max_splits) that fill at least 90% of the last wave of blocks, `slots`
// blocks running at once.
int PickSplits(std::int64_t base_blocks, std::int64_t max_splits, std::int64_t slots);
// A pure decode step: sequence i has one query, at row i, and that token is its last key.
bool PureDecode(std::span<const SeqAttention> seqs, std::int64_t n);
// The queries each sequence has in a uniform step of n query rows (every sequence T at rows
// [i·T, (i + 1)·T), its last query its last key: 1 for a pure decode, S + 1 for verify runs), or 0.
std::int64_t UniformQueries(std::span<const SeqAttention> seqs, std::int64_t n);

// One span holding each sequence's `part`, sequence i's at i·width. When sequence i's part already
// lies i·width values after sequence 0's, that span is uploaded as it is (inside a graph's input
// block it resolves to the device copy, no copy); otherwise the parts are concatenated, each padded
// to the widest with zeros (an upload of step data: eager only).
template <typename Part>
DeviceMeta UploadPerSequence(CudaContext& ctx, std::span<const SeqAttention> seqs, Part part, std::int64_t* width) {
  const std::span<const std::int32_t> first = part(seqs[0]);
  const auto base = reinterpret_cast<std::uintptr_t>(first.data());
  std::size_t widest = 0;
  bool strided = true;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const std::span<const std::int32_t> mine = part(seqs[i]);
    widest = std::max(widest, mine.size());
    strided = strided && mine.size() == first.size() &&
              reinterpret_cast<std::uintptr_t>(mine.data()) == base + i * first.size() * sizeof(std::int32_t);
  }
  if (strided) {
    *width = static_cast<std::int64_t>(first.size());
    return ctx.Upload(std::span<const std::int32_t>(first.data(), seqs.size() * first.size()));
  }
  std::vector<std::int32_t> flat(seqs.size() * widest, 0);
  for (std::size_t i = 0; i < seqs.size(); ++i) std::ranges::copy(part(seqs[i]), flat.begin() + i * widest);
  *width = static_cast<std::int64_t>(widest);
  return ctx.Upload(std::span<const std::int32_t>(flat));
}

// Host checks of a step's sequences before an MLA kernel reads the cache through them: tables
// that hold kv_len tokens inside the cache, rows within the n query rows, positions within kv_len.
inline void CheckSeqAttention(std::span<const SeqAttention> seqs, std::int64_t n, const Tensor& cache,
                              std::int64_t page_size) {
  for (const SeqAttention& s : seqs) {
    FISSION_CHECK(static_cast<std::int64_t>(s.block_table.size()) * page_size >= s.kv_len, "block table of ",
                  s.block_table.size(), " pages cannot hold ", s.kv_len, " tokens");
    FISSION_CHECK(s.query_start >= 0 && s.query_start + s.query_len <= n, "sequence rows out of range");
    FISSION_CHECK(static_cast<std::int32_t>(s.query_positions.size()) == s.query_len, "query positions");
    for (std::int32_t pos : s.query_positions) FISSION_CHECK(pos >= 0 && pos < s.kv_len, "query position ", pos);
    for (std::int32_t page : s.block_table)
      FISSION_CHECK(page >= 0 && (page + 1) * page_size <= cache.shape[0], "page ", page, " outside the cache");
  }
}

}  // namespace fission::kernels::cuda
