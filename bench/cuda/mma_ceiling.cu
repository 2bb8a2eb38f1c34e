// The tensor-core rate that mma.sync itself reaches on this device (bench/cuda/dsa_bench.cc's
// ceilings for kernels written with it): every warp of a full grid issues independent MMAs on
// register operands, nothing loaded or stored in the loop.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "bench/cuda/dsa_bench.h"

namespace fission::bench {
namespace {

constexpr int kChains = 8, kThreads = 256;

__global__ void MmaLoop(bool fp8, int iters, float* sink) {
  float d[kChains][4] = {};
  const std::uint32_t a = 0x3c3c3c3cu ^ threadIdx.x, b = 0x38383838u ^ blockIdx.x;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      if (fp8) {
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
            : "r"(a), "r"(a + c), "r"(a), "r"(a + c), "r"(b), "r"(b + c));
      } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
            : "r"(a), "r"(a + c), "r"(a), "r"(a + c), "r"(b), "r"(b + c));
      }
    }
  }
  float sum = 0.0f;
  for (int c = 0; c < kChains; ++c) sum += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  if (sum == 1234.5f) sink[threadIdx.x] = sum;  // keeps the loop
}

}  // namespace

double MmaCeilingTflops(bool fp8, cudaStream_t stream) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  float* sink = nullptr;
  if (cudaMalloc(&sink, kThreads * sizeof(float)) != cudaSuccess) return 0.0;
  const int blocks = 4 * sms, iters = 4096;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  MmaLoop<<<blocks, kThreads, 0, stream>>>(fp8, iters / 8, sink);  // warm-up
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(start, stream);
    MmaLoop<<<blocks, kThreads, 0, stream>>>(fp8, iters, sink);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    best = ms < best ? ms : best;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(sink);
  if (cudaGetLastError() != cudaSuccess) return 0.0;
  const double flop_per_mma = fp8 ? 2.0 * 16 * 8 * 32 : 2.0 * 16 * 8 * 16;
  const double mmas = static_cast<double>(blocks) * (kThreads / 32) * iters * kChains;
  return mmas * flop_per_mma / (best * 1e-3) / 1e12;
}

}  // namespace fission::bench
