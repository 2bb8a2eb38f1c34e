// Elementwise and row-copy operations: conversion, embedding, RMSNorm, add, SiLU-and-multiply,
// rotary embedding, KV-row writes and row gathers. fp32 or bf16 in and out, fp32 arithmetic.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace fission::kernels::cuda {
namespace {

constexpr int kThreads = 256;

std::int64_t LastDim(const Tensor& t) { return t.rank() == 0 ? 1 : t.shape[-1]; }

void CheckDevice(const CudaContext& ctx, const Tensor& t, const char* what) {
  FISSION_CHECK(t.device.type == DeviceType::kCuda && t.device.index == ctx.device(), what,
                " must live on CUDA device ", ctx.device(), ", not ", DeviceName(t.device));
}

__global__ void ConvertKernel(const void* src, Elem se, void* dst, Elem de, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    StoreF(dst, i, de, LoadF(src, i, se));
}

// Copies row src_rows[i] (or i) of src into row dst_rows[i] (or i) of dst, converting the dtype.
template <typename SrcIndex, typename DstIndex>
__global__ void CopyRowsKernel(const void* src, Elem se, const SrcIndex* src_rows, void* dst, Elem de,
                               const DstIndex* dst_rows, std::int64_t width) {
  const std::int64_t i = blockIdx.x;
  const std::int64_t s = src_rows ? static_cast<std::int64_t>(src_rows[i]) : i;
  const std::int64_t d = dst_rows ? static_cast<std::int64_t>(dst_rows[i]) : i;
  if (d < 0) return;  // a skipped row (WriteKv's padding)
  for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x)
    StoreF(dst, d * width + j, de, LoadF(src, s * width + j, se));
}

__global__ void EmbeddingKernel(const void* table, Elem te, std::int64_t rows, const std::int32_t* ids,
                                std::int64_t vocab_start, void* out, Elem oe, std::int64_t width) {
  const std::int64_t i = blockIdx.x;
  const std::int64_t row = static_cast<std::int64_t>(ids[i]) - vocab_start;
  const bool inside = row >= 0 && row < rows;
  for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x)
    StoreF(out, i * width + j, oe, inside ? LoadF(table, row * width + j, te) : 0.0f);
}

// Row-wise RMSNorm of the first d of `width` values, the rest copied. With `residual` (AddRmsNorm)
// the row is first the sum x + residual, stored back into x (its own dtype) and normalised as
// stored, so the fused form gives the bits of Add then RmsNorm. Thread i takes values i, i +
// kThreads, ...: with kHeld > 0 (width ≤ kThreads · kHeld, every model's hidden size) it loads all
// of them, the residual and the weight at once and keeps them in registers, so a row costs one
// memory round trip instead of three; wider rows (kHeld 0) are read again in each pass. The sums
// run in the same order either way.
template <bool kAdd, int kHeld>
__global__ void __launch_bounds__(kThreads) RmsNormKernel(void* x, Elem xe, const void* residual, Elem re, const void* w,
                                                          Elem we, void* out, Elem oe, std::int64_t d, std::int64_t width,
                                                          float eps) {
  const std::int64_t base = blockIdx.x * width;
  constexpr bool kInRegisters = kHeld > 0;
  float v[kInRegisters ? kHeld : 1], wv[kInRegisters ? kHeld : 1];
  float sum = 0.0f;
  if constexpr (kInRegisters) {
    float r[kHeld];
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int j = static_cast<int>(threadIdx.x) + i * kThreads;
      v[i] = j < width ? LoadF(x, base + j, xe) : 0.0f;
      if constexpr (kAdd) r[i] = j < width ? LoadF(residual, base + j, re) : 0.0f;
      wv[i] = j < d ? LoadF(w, j, we) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int j = static_cast<int>(threadIdx.x) + i * kThreads;
      if constexpr (kAdd) {
        if (j < width) {
          const float added = v[i] + r[i];
          StoreF(x, base + j, xe, added);
          v[i] = RoundAs(xe, added);  // the row as stored, as Add then RmsNorm reads it
        }
      }
      if (j < d) sum += v[i] * v[i];
    }
  } else {
    if constexpr (kAdd)
      for (std::int64_t j = threadIdx.x; j < width; j += kThreads)
        StoreF(x, base + j, xe, LoadF(x, base + j, xe) + LoadF(residual, base + j, re));
    for (std::int64_t j = threadIdx.x; j < d; j += kThreads) {
      const float value = LoadF(x, base + j, xe);
      sum += value * value;
    }
  }
  __shared__ float partial[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    float s = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) partial[0] = s;
  }
  __syncthreads();
  const float inv = 1.0f / sqrtf(partial[0] / static_cast<float>(d) + eps);
  // Every thread has read its inputs before any writes (x and out may alias), guaranteed by the barrier.
  if constexpr (kInRegisters) {
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int j = static_cast<int>(threadIdx.x) + i * kThreads;
      if (j < width) StoreF(out, base + j, oe, j < d ? wv[i] * (v[i] * inv) : v[i]);
    }
  } else {
    for (std::int64_t j = threadIdx.x; j < width; j += kThreads) {
      const float value = LoadF(x, base + j, xe);
      StoreF(out, base + j, oe, j < d ? LoadF(w, j, we) * (value * inv) : value);
    }
  }
}

template <bool kAdd, int kHeld>
void LaunchRmsNormAs(CudaContext& ctx, std::int64_t rows, void* x, Elem xe, const void* residual, Elem re,
                     const void* w, Elem we, void* out, Elem oe, std::int64_t d, std::int64_t width, float eps) {
  RmsNormKernel<kAdd, kHeld><<<static_cast<unsigned>(rows), kThreads, 0, ctx.stream()>>>(x, xe, residual, re, w, we, out,
                                                                                         oe, d, width, eps);
  FISSION_LAUNCHED();
}

// Registers for as few values a thread as the row needs (more cost occupancy at prefill sizes).
template <bool kAdd>
void LaunchRmsNorm(CudaContext& ctx, std::int64_t rows, void* x, Elem xe, const void* residual, Elem re, const void* w,
                   Elem we, void* out, Elem oe, std::int64_t d, std::int64_t width, float eps) {
  if (width <= 8 * kThreads) return LaunchRmsNormAs<kAdd, 8>(ctx, rows, x, xe, residual, re, w, we, out, oe, d, width, eps);
  if (width <= 32 * kThreads)
    return LaunchRmsNormAs<kAdd, 32>(ctx, rows, x, xe, residual, re, w, we, out, oe, d, width, eps);
  LaunchRmsNormAs<kAdd, 0>(ctx, rows, x, xe, residual, re, w, we, out, oe, d, width, eps);
}

// Sum of v over the block (kThreads threads); `partial` holds kThreads / 32 floats. Every thread
// gets the total; the barriers also order the caller's earlier reads before later writes.
__device__ float BlockSum(float v, float* partial) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  __syncthreads();
  return total;
}

// One block per row: the mean, then the biased variance around it (two passes, as the reference),
// then weight · (x − mean) / sqrt(var + eps) + bias. Each element is read and written by the same
// thread, so x and out may alias.
__global__ void LayerNormKernel(const void* x, Elem xe, const void* w, Elem we, const void* b, Elem be, void* out,
                                Elem oe, std::int64_t d, float eps) {
  __shared__ float partial[kThreads / 32];
  const std::int64_t base = blockIdx.x * d;
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += LoadF(x, base + j, xe);
  const float mean = BlockSum(sum, partial) / static_cast<float>(d);
  float sq = 0.0f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float c = LoadF(x, base + j, xe) - mean;
    sq += c * c;
  }
  const float inv = 1.0f / sqrtf(BlockSum(sq, partial) / static_cast<float>(d) + eps);
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x)
    StoreF(out, base + j, oe, (LoadF(x, base + j, xe) - mean) * inv * LoadF(w, j, we) + LoadF(b, j, be));
}

__global__ void AddKernel(const void* a, Elem ae, const void* b, Elem be, void* out, Elem oe, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    StoreF(out, i, oe, LoadF(a, i, ae) + LoadF(b, i, be));
}

// With limit > 0 (DeepSeek-V4) the gate is clamped from above and up to [-limit, limit] first.
__global__ void SiluMulKernel(const void* gu, Elem ge, void* out, Elem oe, std::int64_t rows, std::int64_t inter,
                              float limit) {
  const std::int64_t n = rows * inter;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / inter, j = i - r * inter;
    StoreF(out, i, oe, SiluMulOf(LoadF(gu, r * 2 * inter + j, ge), LoadF(gu, r * 2 * inter + inter + j, ge), limit));
  }
}

// One warp per (token, head): the rope slice is read into shared memory before any lane writes, so
// the interleaved-to-half-split reordering is safe in place.
constexpr int kRopeWarps = 4;
constexpr int kMaxRopeDim = 512;
__global__ void RopeKernel(void* x, Elem xe, std::int64_t n, std::int64_t heads, std::int64_t head_dim,
                           std::int64_t offset, std::int64_t rope_dim, const std::int32_t* positions,
                           const float* inv_freq, float scaling, bool interleaved) {
  __shared__ float slice[kRopeWarps][kMaxRopeDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t item = blockIdx.x * static_cast<std::int64_t>(kRopeWarps) + warp;
  if (item >= n * heads) return;
  const std::int64_t t = item / heads;
  const std::int64_t base = item * head_dim + offset;
  float* v = slice[warp];
  for (std::int64_t i = lane; i < rope_dim; i += 32) v[i] = LoadF(x, base + i, xe);
  __syncwarp();
  const std::int64_t half = rope_dim / 2;
  const float pos = static_cast<float>(positions[t]);
  for (std::int64_t i = lane; i < half; i += 32) {
    const float angle = pos * inv_freq[i];
    const float c = cosf(angle) * scaling, s = sinf(angle) * scaling;
    const float a = interleaved ? v[2 * i] : v[i];
    const float b = interleaved ? v[2 * i + 1] : v[i + half];
    StoreF(x, base + i, xe, a * c + (-b) * s);
    StoreF(x, base + i + half, xe, b * c + a * s);
  }
}

}  // namespace

void Convert(CudaContext& ctx, const Tensor& src, const Tensor& dst) {
  FISSION_CHECK(src.numel() == dst.numel(), "Convert ", src.shape.ToString(), " -> ", dst.shape.ToString());
  if (src.numel() == 0) return;
  if (src.dtype == dst.dtype) {
    FISSION_CUDA(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDeviceToDevice, ctx.stream()));
    return;
  }
  ConvertKernel<<<std::min(Blocks(src.numel(), kThreads), 4096u), kThreads, 0, ctx.stream()>>>(
      src.data, ElemOf(src), dst.data, ElemOf(dst), src.numel());
  FISSION_LAUNCHED();
}

void Embedding(CudaContext& ctx, const Tensor& table, std::span<const std::int32_t> ids, std::int64_t vocab_start,
               const Tensor& out) {
  CheckDevice(ctx, table, "Embedding table");
  const std::int64_t rows = table.shape[0], d = table.shape[1];
  FISSION_CHECK(out.numel() == static_cast<std::int64_t>(ids.size()) * d, "Embedding out ", out.shape.ToString());
  if (ids.empty()) return;
  DeviceMeta dev = ctx.Upload(ids);
  EmbeddingKernel<<<static_cast<unsigned>(ids.size()), kThreads, 0, ctx.stream()>>>(
      table.data, ElemOf(table), rows, dev.ptr<std::int32_t>(), vocab_start, out.data, ElemOf(out), d);
  FISSION_LAUNCHED();
}

void Zero(CudaContext& ctx, const Tensor& x) {
  if (x.numel() == 0) return;
  FISSION_CUDA(cudaMemsetAsync(x.data, 0, x.bytes(), ctx.stream()));
}

void RmsNorm(CudaContext& ctx, const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const std::int64_t d = weight.numel(), width = LastDim(x);
  const std::int64_t n = x.numel() / width;
  FISSION_CHECK(width >= d && out.numel() == x.numel(), "RmsNorm x", x.shape.ToString(), " weight ", d);
  if (n == 0) return;
  LaunchRmsNorm<false>(ctx, n, x.data, ElemOf(x), nullptr, Elem::kF32, weight.data, ElemOf(weight), out.data,
                       ElemOf(out), d, width, eps);
}

void AddRmsNorm(CudaContext& ctx, const Tensor& h, const Tensor& y, const Tensor& weight, float eps,
                const Tensor& out) {
  const std::int64_t d = weight.numel(), width = LastDim(h);
  const std::int64_t n = h.numel() / width;
  FISSION_CHECK(width >= d && y.numel() == h.numel() && out.numel() == h.numel() && y.data != h.data,
                "AddRmsNorm h", h.shape.ToString(), " y", y.shape.ToString(), " weight ", d);
  if (n == 0) return;
  LaunchRmsNorm<true>(ctx, n, h.data, ElemOf(h), y.data, ElemOf(y), weight.data, ElemOf(weight), out.data,
                      ElemOf(out), d, width, eps);
}

void LayerNorm(CudaContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
               const Tensor& out) {
  const std::int64_t d = LastDim(x), n = x.numel() / std::max<std::int64_t>(d, 1);
  FISSION_CHECK(d > 0 && weight.numel() == d && bias.numel() == d && out.numel() == x.numel(), "LayerNorm x",
                x.shape.ToString(), " weight ", weight.numel(), " bias ", bias.numel());
  if (n == 0) return;
  LayerNormKernel<<<static_cast<unsigned>(n), kThreads, 0, ctx.stream()>>>(
      x.data, ElemOf(x), weight.data, ElemOf(weight), bias.data, ElemOf(bias), out.data, ElemOf(out), d, eps);
  FISSION_LAUNCHED();
}

void Add(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out) {
  FISSION_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), "Add shapes");
  if (a.numel() == 0) return;
  AddKernel<<<std::min(Blocks(a.numel(), kThreads), 8192u), kThreads, 0, ctx.stream()>>>(
      a.data, ElemOf(a), b.data, ElemOf(b), out.data, ElemOf(out), a.numel());
  FISSION_LAUNCHED();
}

void SiluMul(CudaContext& ctx, const Tensor& gate_up, const Tensor& out, float limit) {
  const std::int64_t inter = LastDim(out);
  const std::int64_t n = out.numel() / inter;
  FISSION_CHECK(LastDim(gate_up) == 2 * inter && gate_up.numel() == 2 * out.numel(), "SiluMul shapes");
  if (n == 0) return;
  SiluMulKernel<<<std::min(Blocks(out.numel(), kThreads), 8192u), kThreads, 0, ctx.stream()>>>(
      gate_up.data, ElemOf(gate_up), out.data, ElemOf(out), n, inter, limit);
  FISSION_LAUNCHED();
}

void Rope(CudaContext& ctx, const Tensor& x, std::int64_t rope_offset, std::int64_t rope_dim,
          std::span<const std::int32_t> positions, const Tensor& inv_freq, float scaling, bool interleaved) {
  FISSION_CHECK(x.rank() == 3 && rope_offset + rope_dim <= x.shape[2] && rope_dim % 2 == 0 &&
                rope_dim <= kMaxRopeDim, "Rope x", x.shape.ToString(), " rope ", rope_offset, "+", rope_dim);
  const std::int64_t n = x.shape[0], heads = x.shape[1];
  FISSION_CHECK(static_cast<std::int64_t>(positions.size()) == n && inv_freq.numel() == rope_dim / 2 &&
                inv_freq.dtype == DType::kF32, "Rope positions/inv_freq");
  if (n == 0) return;
  DeviceMeta pos = ctx.Upload(positions);
  RopeKernel<<<Blocks(n * heads, kRopeWarps), kRopeWarps * 32, 0, ctx.stream()>>>(
      x.data, ElemOf(x), n, heads, x.shape[2], rope_offset, rope_dim, pos.ptr<std::int32_t>(), inv_freq.ptr<float>(),
      scaling, interleaved);
  FISSION_LAUNCHED();
}

void WriteKv(CudaContext& ctx, const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache) {
  const std::int64_t width = cache.shape[1];
  FISSION_CHECK(rows.numel() == static_cast<std::int64_t>(slots.size()) * width, "WriteKv rows ",
                rows.shape.ToString(), " cache ", cache.shape.ToString());
  for (std::int64_t s : slots) FISSION_CHECK(s >= -1 && s < cache.shape[0], "kv slot ", s);
  if (slots.empty()) return;
  DeviceMeta dev = ctx.Upload(slots);
  CopyRowsKernel<std::int32_t, std::int64_t><<<static_cast<unsigned>(slots.size()), kThreads, 0, ctx.stream()>>>(
      rows.data, ElemOf(rows), nullptr, cache.data, ElemOf(cache), dev.ptr<std::int64_t>(), width);
  FISSION_LAUNCHED();
}

void GatherRowsDevice(CudaContext& ctx, const Tensor& x, const std::int32_t* indices, std::int64_t count,
                      const Tensor& out) {
  if (count == 0) return;
  const std::int64_t d = LastDim(x);
  CopyRowsKernel<std::int32_t, std::int32_t><<<static_cast<unsigned>(count), kThreads, 0, ctx.stream()>>>(
      x.data, ElemOf(x), indices, out.data, ElemOf(out), nullptr, d);
  FISSION_LAUNCHED();
}

void GatherRows(CudaContext& ctx, const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out) {
  const std::int64_t d = LastDim(x);
  const std::int64_t n = x.numel() / d;
  FISSION_CHECK(out.numel() == static_cast<std::int64_t>(indices.size()) * d, "GatherRows out ",
                out.shape.ToString());
  for (std::int32_t i : indices) FISSION_CHECK(i >= 0 && i < n, "GatherRows index ", i, " of ", n);
  if (indices.empty()) return;
  DeviceMeta dev = ctx.Upload(indices);
  GatherRowsDevice(ctx, x, dev.ptr<std::int32_t>(), static_cast<std::int64_t>(indices.size()), out);
}

}  // namespace fission::kernels::cuda
