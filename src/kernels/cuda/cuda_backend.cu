#include "kernels/cuda/cuda_backend.h"

#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_v4.h"
#include "kernels/cuda/op_timer.h"

namespace fission::kernels::cuda {

class CudaMlaOps final : public MlaOps {
 public:
  explicit CudaMlaOps(CudaContext& ctx) : ctx_(ctx) {}
  void WriteLatent(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache,
                   const MlaShape& shape) override {
    OpTimer timer(ctx_, "WriteKv", rows.rank() > 1 ? rows.shape[0] : 1);
    cuda::WriteLatent(ctx_, rows, slots, cache, shape);
  }
  void SplitLatents(const Tensor& a, const Tensor& q_norm, const Tensor& kv_norm, float eps, const RopeArgs& rope,
                    const Tensor& q_latent, const Tensor& kv_row) override {
    OpTimer timer(ctx_, "SplitLatents", q_latent.rank() > 1 ? q_latent.shape[0] : 1);
    cuda::SplitLatents(ctx_, a, q_norm, kv_norm, eps, rope, q_latent, kv_row);
  }
  void Expanded(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                const MlaShape& shape, const Tensor& out) override {
    OpTimer timer(ctx_, "MlaAttentionExpanded", q.rank() > 1 ? q.shape[0] : 1);
    cuda::MlaAttentionExpanded(ctx_, q, cache, kv_b, seqs, shape, out);
  }
  void Absorbed(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                const MlaShape& shape, const Tensor& out) override {
    OpTimer timer(ctx_, "MlaAttentionAbsorbed", q.rank() > 1 ? q.shape[0] : 1);
    cuda::MlaAttentionAbsorbed(ctx_, q, cache, kv_b, seqs, shape, out);
  }

 private:
  CudaContext& ctx_;
};

class CudaDsaOps final : public DsaOps {
 public:
  explicit CudaDsaOps(CudaContext& ctx) : ctx_(ctx) {}
  void WriteIndexKeys(const Tensor& keys, std::span<const std::int64_t> slots, const Tensor& cache,
                      const IndexerShape& shape) override {
    OpTimer timer(ctx_, "WriteIndexKeys", static_cast<std::int64_t>(slots.size()));
    cuda::WriteIndexKeys(ctx_, keys, slots, cache, shape);
  }
  void IndexerTopK(const Tensor& q, const Tensor& weights, const Tensor& cache, std::span<const SeqAttention> seqs,
                   const IndexerShape& shape, const Tensor& topk) override {
    OpTimer timer(ctx_, "IndexerTopK", topk.rank() > 1 ? topk.shape[0] : 1);
    cuda::IndexerTopK(ctx_, q, weights, cache, seqs, shape, topk);
  }
  void SparseMla(const Tensor& q, const Tensor& cache, const Tensor& kv_b, const Tensor& topk,
                 std::span<const SeqAttention> seqs, const MlaShape& shape, bool absorbed, const Tensor& out) override {
    // Both forms run in the latent space (dsa_sparse_mla.cu): over topk keys a query that is the
    // cheaper form of the two, and they are equal up to rounding.
    OpTimer timer(ctx_, absorbed ? "SparseMlaAbsorbed" : "SparseMlaExpanded", topk.rank() > 1 ? topk.shape[0] : 1);
    cuda::SparseMla(ctx_, q, cache, kv_b, topk, seqs, shape, out);
  }

 private:
  CudaContext& ctx_;
};

// DeepSeek-V4 (cuda_v4.h): each operation timed under its own name, the experts through the
// backend's format dispatch with V4's clamp.
class CudaV4Ops final : public V4Ops {
 public:
  explicit CudaV4Ops(CudaBackend& backend) : backend_(backend), ctx_(backend.context()) {}
  void ExpandStreams(const Tensor& x, const Tensor& out) override {
    OpTimer timer(ctx_, "V4ExpandStreams", Rows(x));
    V4ExpandStreams(ctx_, x, out);
  }
  void HyperPre(const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                const HyperShape& shape, const Tensor& collapsed, const Tensor& post, const Tensor& comb) override {
    OpTimer timer(ctx_, "V4HyperPre", Rows(streams));
    V4HyperPre(ctx_, streams, fn, base, scale, shape, collapsed, post, comb);
  }
  void HyperPost(const Tensor& block_out, const Tensor& streams, const Tensor& post, const Tensor& comb,
                 const Tensor& out) override {
    OpTimer timer(ctx_, "V4HyperPost", Rows(streams));
    V4HyperPost(ctx_, block_out, streams, post, comb, out);
  }
  void HyperHead(const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                 const HyperShape& shape, const Tensor& out) override {
    OpTimer timer(ctx_, "V4HyperHead", Rows(streams));
    V4HyperHead(ctx_, streams, fn, base, scale, shape, out);
  }
  void Rope(const Tensor& x, std::int64_t offset, std::int64_t dim, std::span<const std::int32_t> positions,
            const Tensor& inv_freq, bool inverse) override {
    OpTimer timer(ctx_, "V4Rope", Rows(x));
    V4Rope(ctx_, x, offset, dim, positions, inv_freq, inverse);
  }
  void Compress(const Tensor& kv, const Tensor& gate, const Tensor& ape, const Tensor& state,
                std::span<const ClosedWindow> windows, const CompressorShape& shape, const Tensor& pooled) override {
    OpTimer timer(ctx_, "V4Compress", static_cast<std::int64_t>(windows.size()));
    V4Compress(ctx_, kv, gate, ape, state, windows, shape, pooled);
  }
  void UpdateCompressorState(const Tensor& kv, const Tensor& gate, const Tensor& state,
                             std::span<const std::int64_t> slots, const CompressorShape& shape) override {
    OpTimer timer(ctx_, "V4UpdateCompressorState", Rows(kv));
    V4UpdateCompressorState(ctx_, kv, gate, state, slots, shape);
  }
  void Attention(const Tensor& q, const Tensor& kv, const Tensor& window_kv, const Tensor& entries,
                 const Tensor& selection, const Tensor& sinks, const V4Queries& queries,
                 const V4AttentionShape& shape, const Tensor& out) override {
    OpTimer timer(ctx_, "V4Attention", Rows(q));
    V4Attention(ctx_, q, kv, window_kv, entries, selection, sinks, queries, shape, out);
  }
  void RoundToStorage(const Tensor& rows, std::int64_t rope_dim) override {
    OpTimer timer(ctx_, "V4RoundToStorage", Rows(rows));
    V4RoundToStorage(ctx_, rows, rope_dim);
  }
  void WriteEntries(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache, V4KvFormat format,
                    std::int64_t rope_dim) override {
    OpTimer timer(ctx_, "V4WriteEntries", static_cast<std::int64_t>(slots.size()));
    V4WriteEntries(ctx_, rows, slots, cache, format, rope_dim);
  }
  void GroupedLinear(const Tensor& x, const Tensor& w, std::int64_t groups, const Tensor& out) override {
    OpTimer timer(ctx_, "V4GroupedLinear", Rows(x), w.shape);
    V4GroupedLinear(ctx_, x, w, groups, out);
  }
  void RouteSqrtSoftplus(const Tensor& router_logits, const Tensor& bias, const Tensor& hash_table,
                         std::span<const std::int32_t> token_ids, std::int64_t top_k, float scaling, const Tensor& ids,
                         const Tensor& weights) override {
    OpTimer timer(ctx_, "V4Route", Rows(router_logits));
    V4RouteSqrtSoftplus(ctx_, router_logits, bias, hash_table, token_ids, top_k, scaling, ids, weights);
  }
  void ClampedSwiGlu(const Tensor& gate_up, float limit, const Tensor& out) override {
    OpTimer timer(ctx_, "SiluMul", Rows(gate_up));
    SiluMul(ctx_, gate_up, out, limit);
  }
  void MoeExperts(const Tensor& x, const Tensor& ids, const Tensor& weights, std::span<const WeightView> gate_up,
                  std::span<const WeightView> down, float limit, const Tensor& out) override {
    backend_.RoutedExperts(x, ids, weights, gate_up, down, limit, out);
  }

 private:
  static std::int64_t Rows(const Tensor& t) { return t.rank() > 1 ? t.shape[0] : 1; }
  CudaBackend& backend_;
  CudaContext& ctx_;
};

CudaBackend::CudaBackend(int device)
    : ctx_(std::make_unique<CudaContext>(device)),
      mla_(std::make_unique<CudaMlaOps>(*ctx_)),
      dsa_(std::make_unique<CudaDsaOps>(*ctx_)),
      v4_(std::make_unique<CudaV4Ops>(*this)) {}
CudaBackend::~CudaBackend() = default;
MlaOps& CudaBackend::mla() { return *mla_; }
DsaOps& CudaBackend::dsa() { return *dsa_; }
V4Ops& CudaBackend::v4() { return *v4_; }

Device CudaBackend::device() const { return Device::Cuda(ctx_->device()); }
Allocator* CudaBackend::allocator() { return ctx_->allocator(); }
std::optional<DeviceMemory> CudaBackend::Memory() {
  ctx_->allocator()->ReleaseCached();  // cached scratch blocks count as free
  FISSION_CUDA(cudaSetDevice(ctx_->device()));
  std::size_t free_bytes = 0, total_bytes = 0;
  FISSION_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceMemory{static_cast<std::int64_t>(free_bytes), static_cast<std::int64_t>(total_bytes)};
}

void CudaBackend::Linear(const Tensor& x, const WeightView& w, const Tensor& out) {
  if (!w.format.quantized()) {
    OpTimer timer(*ctx_, "Linear", x.rank() > 1 ? x.shape[0] : 1, w.values.shape);
    return cuda::Linear(*ctx_, x, w.values, out);
  }
  if (w.format == WeightFormat::Fp8Block128()) {
    OpTimer timer(*ctx_, "LinearFp8", x.rank() > 1 ? x.shape[0] : 1, w.values.shape);
    return cuda::LinearFp8(*ctx_, x, w.values, w.scales, out);
  }
  if (w.format == WeightFormat::Fp8PerChannel()) {
    OpTimer timer(*ctx_, "LinearFp8PerChannel", x.rank() > 1 ? x.shape[0] : 1, w.values.shape);
    return cuda::LinearFp8PerChannel(*ctx_, x, w.values, w.scales, out);
  }
  if (w.format == WeightFormat::Mxfp4() || w.format == WeightFormat::Mxfp8()) {
    OpTimer timer(*ctx_, w.format == WeightFormat::Mxfp4() ? "LinearMxfp4" : "LinearMxfp8",
                  x.rank() > 1 ? x.shape[0] : 1, w.values.shape);
    return cuda::LinearMx(*ctx_, x, w.values, w.scales, out);
  }
  if (w.format == WeightFormat::Mxfp4A8()) {
    OpTimer timer(*ctx_, "LinearFp4", x.rank() > 1 ? x.shape[0] : 1, w.values.shape);
    return cuda::LinearFp4(*ctx_, x, w.values, w.scales, out);
  }
  Fail("Linear: the CUDA backend has no kernel for weights of format ", w.format.Name());
}
void CudaBackend::Embedding(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t vocab_start,
                            const Tensor& out) {
  OpTimer timer(*ctx_, "Embedding", out.rank() > 1 ? out.shape[0] : 1);
  cuda::Embedding(*ctx_, table, ids, vocab_start, out);
}
void CudaBackend::Zero(const Tensor& x) {
  OpTimer timer(*ctx_, "Zero", x.rank() > 1 ? x.shape[0] : 1);
  cuda::Zero(*ctx_, x);
}
void CudaBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  OpTimer timer(*ctx_, "RmsNorm", x.rank() > 1 ? x.shape[0] : 1);
  cuda::RmsNorm(*ctx_, x, weight, eps, out);
}
void CudaBackend::LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) {
  OpTimer timer(*ctx_, "LayerNorm", x.rank() > 1 ? x.shape[0] : 1);
  cuda::LayerNorm(*ctx_, x, weight, bias, eps, out);
}
void CudaBackend::AddRmsNorm(const Tensor& h, const Tensor& y, const Tensor& weight, float eps, const Tensor& out) {
  OpTimer timer(*ctx_, "AddRmsNorm", h.rank() > 1 ? h.shape[0] : 1);
  cuda::AddRmsNorm(*ctx_, h, y, weight, eps, out);
}
void CudaBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  OpTimer timer(*ctx_, "Add", a.rank() > 1 ? a.shape[0] : 1);
  cuda::Add(*ctx_, a, b, out);
}
void CudaBackend::SiluMul(const Tensor& gate_up, const Tensor& out) {
  OpTimer timer(*ctx_, "SiluMul", gate_up.rank() > 1 ? gate_up.shape[0] : 1);
  cuda::SiluMul(*ctx_, gate_up, out);
}
void CudaBackend::Rope(const Tensor& x, std::int64_t rope_offset, std::int64_t rope_dim,
                       std::span<const std::int32_t> positions, const Tensor& inv_freq, float scaling,
                       bool interleaved) {
  OpTimer timer(*ctx_, "Rope", x.rank() > 1 ? x.shape[0] : 1);
  cuda::Rope(*ctx_, x, rope_offset, rope_dim, positions, inv_freq, scaling, interleaved);
}
void CudaBackend::WriteKv(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache) {
  OpTimer timer(*ctx_, "WriteKv", rows.rank() > 1 ? rows.shape[0] : 1);
  cuda::WriteKv(*ctx_, rows, slots, cache);
}
void CudaBackend::MoeRoute(const Tensor& router_logits, const Tensor& bias, const MoeRouting& routing,
                           const Tensor& topk_ids, const Tensor& topk_weights) {
  OpTimer timer(*ctx_, "MoeRoute", router_logits.rank() > 1 ? router_logits.shape[0] : 1);
  cuda::MoeRoute(*ctx_, router_logits, bias, routing, topk_ids, topk_weights);
}
void CudaBackend::MoeExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                             std::span<const WeightView> gate_up, std::span<const WeightView> down, const Tensor& out) {
  RoutedExperts(x, topk_ids, topk_weights, gate_up, down, /*limit=*/0.0f, out);
}
void CudaBackend::RoutedExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                                std::span<const WeightView> gate_up, std::span<const WeightView> down, float limit,
                                const Tensor& out) {
  const WeightFormat format = CommonFormat(gate_up, down, "MoeExperts");
  const std::vector<Tensor> gu = ValuesOf(gate_up), dn = ValuesOf(down);
  if (!format.quantized()) {
    OpTimer timer(*ctx_, "MoeExperts", x.rank() > 1 ? x.shape[0] : 1);
    return cuda::MoeExperts(*ctx_, x, topk_ids, topk_weights, gu, dn, out, limit);
  }
  if (format == WeightFormat::Fp8Block128()) {
    OpTimer timer(*ctx_, "MoeExpertsFp8", x.rank() > 1 ? x.shape[0] : 1);
    return cuda::MoeExpertsFp8(*ctx_, x, topk_ids, topk_weights, gu, ScalesOf(gate_up), dn, ScalesOf(down), out,
                               limit);
  }
  if (format == WeightFormat::Fp8PerChannel()) {
    OpTimer timer(*ctx_, "MoeExpertsFp8PerChannel", x.rank() > 1 ? x.shape[0] : 1);
    return cuda::MoeExpertsFp8PerChannel(*ctx_, x, topk_ids, topk_weights, gu, ScalesOf(gate_up), dn, ScalesOf(down),
                                         out, limit);
  }
  if (format == WeightFormat::Mxfp4() || format == WeightFormat::Mxfp8()) {
    OpTimer timer(*ctx_, format == WeightFormat::Mxfp4() ? "MoeExpertsMxfp4" : "MoeExpertsMxfp8",
                  x.rank() > 1 ? x.shape[0] : 1);
    return cuda::MoeExpertsMx(*ctx_, x, topk_ids, topk_weights, gu, ScalesOf(gate_up), dn, ScalesOf(down), out,
                              limit);
  }
  if (format == WeightFormat::Mxfp4A8()) {
    OpTimer timer(*ctx_, "MoeExpertsFp4", x.rank() > 1 ? x.shape[0] : 1);
    return cuda::MoeExpertsFp4(*ctx_, x, topk_ids, topk_weights, gu, ScalesOf(gate_up), dn, ScalesOf(down), out,
                               limit);
  }
  Fail("MoeExperts: the CUDA backend has no kernel for experts of format ", format.Name());
}
void CudaBackend::GatherRows(const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out) {
  OpTimer timer(*ctx_, "GatherRows", out.rank() > 1 ? out.shape[0] : 1);
  cuda::GatherRows(*ctx_, x, indices, out);
}

void CudaBackend::Sample(const Tensor& logits, std::span<const SamplingRow> rows, std::span<SampledToken> out) {
  cuda::Sample(*ctx_, logits, rows, out);
}

void CudaBackend::CopyToHost(const Tensor& src, float* dst) {
  OpTimer timer(*ctx_, "CopyToHost", src.rank() > 1 ? src.shape[0] : 1);
  if (src.dtype == DType::kF32) {
    ctx_->DownloadBytes(dst, src.data, src.bytes());
    return;
  }
  Buffer tmp(DType::kF32, src.shape, ctx_->allocator());
  Convert(*ctx_, src, tmp);
  ctx_->DownloadBytes(dst, tmp.tensor().data, tmp.tensor().bytes());
}

void CudaBackend::CopyFromHost(const float* src, const Tensor& dst) {
  const std::int64_t n = dst.numel();
  switch (dst.dtype) {
    case DType::kF32:
      ctx_->UploadBytes(dst.data, src, n * sizeof(float));
      break;
    case DType::kBF16:
    case DType::kF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2: {
      std::vector<std::uint8_t> bytes(dst.bytes());
      ConvertFromF32(dst.dtype, src, bytes.data(), n);
      ctx_->UploadBytes(dst.data, bytes.data(), bytes.size());
      break;
    }
    case DType::kI32: {
      std::vector<std::int32_t> ints(n);
      for (std::int64_t i = 0; i < n; ++i) ints[i] = static_cast<std::int32_t>(src[i]);
      ctx_->UploadBytes(dst.data, ints.data(), n * sizeof(std::int32_t));
      break;
    }
    default:
      Fail("CopyFromHost into a ", DTypeName(dst.dtype), " tensor is not supported");
  }
  // No wait: UploadBytes has copied small sources into pinned staging, and a pageable copy returns
  // only once its source has been read.
}

void CudaBackend::CopyBytesToHost(const Tensor& src, void* dst) { ctx_->DownloadBytes(dst, src.data, src.bytes()); }
void CudaBackend::CopyBytesFromHost(const void* src, const Tensor& dst) {
  ctx_->UploadBytes(dst.data, src, dst.bytes());
}
void CudaBackend::Synchronize() { ctx_->Synchronize(); }

}  // namespace fission::kernels::cuda

namespace fission::kernels {
std::unique_ptr<Backend> MakeCudaBackend(int device) { return std::make_unique<cuda::CudaBackend>(device); }
}  // namespace fission::kernels
