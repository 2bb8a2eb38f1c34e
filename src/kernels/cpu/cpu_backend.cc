// The CPU backend: the reference every other backend is tested against.
#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_v4.h"
#include "tensor/quantize.h"

namespace fission::kernels {
namespace {

class CpuMlaOps final : public MlaOps {
 public:
  void WriteLatent(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache,
                   const MlaShape& shape) override {
    cpu::WriteLatent(rows, slots, cache, shape);
  }
  void SplitLatents(const Tensor& a, const Tensor& q_norm, const Tensor& kv_norm, float eps, const RopeArgs& rope,
                    const Tensor& q_latent, const Tensor& kv_row) override {
    cpu::SplitLatents(a, q_norm, kv_norm, eps, rope, q_latent, kv_row);
  }
  void Expanded(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                const MlaShape& shape, const Tensor& out) override {
    cpu::MlaAttentionExpanded(q, cache, kv_b, seqs, shape, out);
  }
  void Absorbed(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                const MlaShape& shape, const Tensor& out) override {
    cpu::MlaAttentionAbsorbed(q, cache, kv_b, seqs, shape, out);
  }
};

class CpuDsaOps final : public DsaOps {
 public:
  void WriteIndexKeys(const Tensor& keys, std::span<const std::int64_t> slots, const Tensor& cache,
                      const IndexerShape& shape) override {
    cpu::WriteIndexKeys(keys, slots, cache, shape);
  }
  void IndexerTopK(const Tensor& q, const Tensor& weights, const Tensor& cache, std::span<const SeqAttention> seqs,
                   const IndexerShape& shape, const Tensor& topk) override {
    cpu::IndexerTopK(q, weights, cache, seqs, shape, topk);
  }
  void SparseMla(const Tensor& q, const Tensor& cache, const Tensor& kv_b, const Tensor& topk,
                 std::span<const SeqAttention> seqs, const MlaShape& shape, bool absorbed, const Tensor& out) override {
    FISSION_CHECK(topk.data != nullptr && topk.dtype == DType::kI32 && topk.rank() == 2, "SparseMla topk ",
                  topk.shape.ToString());
    if (absorbed) return cpu::MlaAttentionAbsorbed(q, cache, kv_b, seqs, shape, out, topk);
    cpu::MlaAttentionExpanded(q, cache, kv_b, seqs, shape, out, topk);
  }
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::Cpu(); }
  Allocator* allocator() override { return CpuAllocator(); }
  void Linear(const Tensor& x, const WeightView& w, const Tensor& out) override {
    if (!w.format.quantized()) return cpu::Linear(x, w.values, out);
    if (w.format == WeightFormat::Fp8Block128()) return cpu::LinearFp8(x, w.values, w.scales, out);
    if (IsBlockQuantizedFormat(w.format)) return cpu::LinearQuantized(x, w, out);
    Fail("Linear: the CPU backend has no kernel for weights of format ", w.format.Name());
  }
  void Embedding(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t vocab_start,
                 const Tensor& out) override {
    cpu::Embedding(table, ids, vocab_start, out);
  }
  void Zero(const Tensor& x) override { cpu::Zero(x); }
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    cpu::RmsNorm(x, weight, eps, out);
  }
  void LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) override {
    cpu::LayerNorm(x, weight, bias, eps, out);
  }
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) override { cpu::Add(a, b, out); }
  void SiluMul(const Tensor& gate_up, const Tensor& out) override { cpu::SiluMul(gate_up, out); }
  void Rope(const Tensor& x, std::int64_t rope_offset, std::int64_t rope_dim, std::span<const std::int32_t> positions,
            const Tensor& inv_freq, float scaling, bool interleaved) override {
    cpu::Rope(x, rope_offset, rope_dim, positions, inv_freq, scaling, interleaved);
  }
  void WriteKv(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache) override {
    cpu::WriteKv(rows, slots, cache);
  }
  void MoeRoute(const Tensor& router_logits, const Tensor& bias, const MoeRouting& routing, const Tensor& topk_ids,
                const Tensor& topk_weights) override {
    cpu::MoeRoute(router_logits, bias, routing, topk_ids, topk_weights);
  }
  void MoeExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                  std::span<const WeightView> gate_up, std::span<const WeightView> down, const Tensor& out) override {
    cpu::MoeExperts(x, topk_ids, topk_weights, gate_up, down, /*limit=*/0.0f, out);
  }
  MlaOps& mla() override { return mla_; }
  DsaOps& dsa() override { return dsa_; }
  V4Ops& v4() override { return v4_; }
  void GatherRows(const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out) override {
    cpu::GatherRows(x, indices, out);
  }
  void CopyToHost(const Tensor& src, float* dst) override { std::memcpy(dst, src.data, src.numel() * sizeof(float)); }
  void CopyFromHost(const float* src, const Tensor& dst) override {
    std::memcpy(dst.data, src, dst.numel() * sizeof(float));
  }
  void CopyBytesFromHost(const void* src, const Tensor& dst) override { std::memcpy(dst.data, src, dst.bytes()); }
  void CopyBytesToHost(const Tensor& src, void* dst) override { std::memcpy(dst, src.data, src.bytes()); }
  void Sample(const Tensor& logits, std::span<const SamplingRow> rows, std::span<SampledToken> out) override {
    FISSION_CHECK(logits.dtype == DType::kF32 && logits.rank() == 2 && rows.size() == out.size());
    const std::int64_t vocab = logits.dim(1);
    HostSamplingScratch scratch;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      FISSION_CHECK(rows[i].row >= 0 && rows[i].row < logits.dim(0), "sampling row ", rows[i].row, " of ", logits.dim(0));
      out[i] = SampleOnHost(static_cast<const float*>(logits.data) + rows[i].row * vocab, vocab, rows[i], scratch);
    }
  }

 private:
  CpuMlaOps mla_;
  CpuDsaOps dsa_;
  cpu::CpuV4Ops v4_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace fission::kernels
