// DeepSeek-V4's operations on the CPU (kernels/v4_ops.h): fp32, one summation order per output
// element, so results do not depend on the batch or the thread count. The residual streams,
// rope, projections and routing are in cpu_v4_streams.cc; the compressors and attention in
// cpu_v4_attention.cc; the storage formats in cpu_v4_storage.cc.
#pragma once

#include "kernels/v4_ops.h"

namespace fission::kernels::cpu {

// Entry `slot` of a window ring or an entries cache stored in `format`, decoded to fp32.
void ReadV4Entry(const Tensor& cache, std::int64_t slot, std::int64_t head_dim, std::int64_t rope, V4KvFormat format,
                 float* out);

class CpuV4Ops final : public V4Ops {
 public:
  void ExpandStreams(const Tensor& x, const Tensor& out) override;
  void HyperPre(const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                const HyperShape& shape, const Tensor& collapsed, const Tensor& post, const Tensor& comb) override;
  void HyperPost(const Tensor& block_out, const Tensor& streams, const Tensor& post, const Tensor& comb,
                 const Tensor& out) override;
  void HyperHead(const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                 const HyperShape& shape, const Tensor& out) override;
  void Rope(const Tensor& x, std::int64_t offset, std::int64_t dim, std::span<const std::int32_t> positions,
            const Tensor& inv_freq, bool inverse) override;
  void Compress(const Tensor& kv, const Tensor& gate, const Tensor& ape, const Tensor& state,
                std::span<const ClosedWindow> windows, const CompressorShape& shape, const Tensor& pooled) override;
  void UpdateCompressorState(const Tensor& kv, const Tensor& gate, const Tensor& state,
                             std::span<const std::int64_t> slots, const CompressorShape& shape) override;
  void Attention(const Tensor& q, const Tensor& kv, const Tensor& window_kv, const Tensor& entries,
                 const Tensor& selection, const Tensor& sinks, const V4Queries& queries,
                 const V4AttentionShape& shape, const Tensor& out) override;
  void RoundToStorage(const Tensor& rows, std::int64_t rope_dim) override;
  void WriteEntries(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache, V4KvFormat format,
                    std::int64_t rope_dim) override;
  void GroupedLinear(const Tensor& x, const Tensor& w, std::int64_t groups, const Tensor& out) override;
  void RouteSqrtSoftplus(const Tensor& router_logits, const Tensor& bias, const Tensor& hash_table,
                         std::span<const std::int32_t> token_ids, std::int64_t top_k, float scaling, const Tensor& ids,
                         const Tensor& weights) override;
  void ClampedSwiGlu(const Tensor& gate_up, float limit, const Tensor& out) override;
  void MoeExperts(const Tensor& x, const Tensor& ids, const Tensor& weights, std::span<const WeightView> gate_up,
                  std::span<const WeightView> down, float limit, const Tensor& out) override;
};

}  // namespace fission::kernels::cpu
