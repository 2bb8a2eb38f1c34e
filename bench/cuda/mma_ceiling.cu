// The tensor-core rate that mma.sync itself reaches on this device (bench/cuda/dsa_bench.cc's
// ceilings for kernels written with it): every warp of a full grid issues independent MMAs on
// register operands, nothing loaded or stored in the loop.
#include <cuda_runtime.h>

#include <cstdint>
#include <algorithm>
#include <cstdio>

#include "bench/cuda/dsa_bench.h"

namespace fission::bench {
namespace {

template <bool kFp8, int kChains>
__global__ void MmaLoop(int iters, float* sink) {
  float d[kChains][4] = {};
  std::uint32_t a[4], b[2];
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = 0x3c3c3c3cu ^ (threadIdx.x * 2654435761u + i);
  b[0] = 0x38383838u ^ blockIdx.x;
  b[1] = 0x34343434u ^ blockIdx.x;
  for (int i = 0; i < iters; ++i) {
    // The operands change every iteration as far as the compiler knows, and differ by chain: sm_90's
    // e4m3 mma.sync is conversions and f16 MMAs into a fresh register plus an add of the
    // accumulator, whose products would otherwise be computed once, outside the loop.
    asm volatile("" : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3]), "+r"(b[0]), "+r"(b[1]));
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      const std::uint32_t b0 = b[0] ^ (0x01010101u * c), b1 = b[1] ^ (0x01010101u * c);
      if constexpr (kFp8) {
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
      } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
      }
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) sum += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  if (sum == 1234.5f) sink[threadIdx.x] = sum;  // keeps the loop
}

// TFLOP/s of `kernel` on blocks_per_sm × threads threads a multiprocessor, the best of 5 runs.
template <bool kFp8, int kChains>
double Measure(int sms, int blocks_per_sm, int threads, cudaStream_t stream, float* sink) {
  const int blocks = blocks_per_sm * sms, iters = 2048;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  MmaLoop<kFp8, kChains><<<blocks, threads, 0, stream>>>(iters, sink);  // warm-up (and clocks up)
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(start, stream);
    MmaLoop<kFp8, kChains><<<blocks, threads, 0, stream>>>(iters, sink);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    best = ms < best ? ms : best;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const double flop_per_mma = kFp8 ? 2.0 * 16 * 8 * 32 : 2.0 * 16 * 8 * 16;
  const double mmas = static_cast<double>(blocks) * (threads / 32) * iters * kChains;
  const double tflops = mmas * flop_per_mma / (best * 1e-3) / 1e12;
  std::printf("INFO mma.sync %s: %d blocks of %d threads a multiprocessor, %d chains a warp: %.1f TFLOP/s\n",
              kFp8 ? "m16n8k32 e4m3" : "m16n8k16 bf16", blocks_per_sm, threads, kChains, tflops);
  return tflops;
}

template <bool kFp8>
double Best(int sms, cudaStream_t stream, float* sink) {
  double best = 0.0;
  best = std::max(best, Measure<kFp8, 8>(sms, 4, 256, stream, sink));
  best = std::max(best, Measure<kFp8, 8>(sms, 2, 512, stream, sink));
  best = std::max(best, Measure<kFp8, 4>(sms, 2, 1024, stream, sink));
  best = std::max(best, Measure<kFp8, 16>(sms, 1, 256, stream, sink));
  best = std::max(best, Measure<kFp8, 2>(sms, 2, 1024, stream, sink));
  return best;
}

}  // namespace

double MmaCeilingTflops(bool fp8, cudaStream_t stream) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  float* sink = nullptr;
  if (cudaMalloc(&sink, 1024 * sizeof(float)) != cudaSuccess) return 0.0;
  const double best = fp8 ? Best<true>(sms, stream, sink) : Best<false>(sms, stream, sink);
  cudaFree(sink);
  if (cudaGetLastError() != cudaSuccess) return 0.0;
  return best;
}

}  // namespace fission::bench
