// The indexer's selection kernel alone (dsa_topk.cu) on synthetic score rows, with the phases of
// its first block timed by clock64(): fission_cuda_bench dsa_topk.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "bench/cuda/dsa_bench.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/dsa_common.cuh"

namespace fission::bench {
namespace {

std::uint32_t HostOrdered(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  if ((b << 1) == 0) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

}  // namespace

void BenchTopkAlone(kernels::cuda::CudaBackend& gpu) {
  using namespace kernels::cuda;
  CudaContext& ctx = gpu.context();
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, ctx.device());
  std::mt19937 rng(31);
  for (int visible : {32768, 61440}) {
    for (int rows : {64, 4096}) {
      for (int kind = 0; kind < 2; ++kind) {  // 0: normal scores; 1: Σ_h w_h · ReLU(normal), 64 heads
        const std::int64_t stride = (visible + 3) / 4 * 4;
        std::vector<float> scores(static_cast<std::size_t>(rows) * stride, 0.0f);
        std::normal_distribution<float> normal;
        std::uniform_real_distribution<float> weight(-1.0f, 1.0f);
        std::vector<std::uint32_t> minmax(2 * rows, 0);
        std::vector<float> w(64);
        for (int r = 0; r < rows; ++r) {
          for (float& x : w) x = weight(rng);
          for (int i = 0; i < visible; ++i) {
            float v = 0.0f;
            if (kind == 0) {
              v = normal(rng);
            } else {
              for (int h = 0; h < 64; ++h) v += w[h] * std::max(normal(rng), 0.0f);
            }
            scores[r * stride + i] = v;
            const std::uint32_t u = HostOrdered(v);
            minmax[2 * r] = std::max(minmax[2 * r], u);
            minmax[2 * r + 1] = std::max(minmax[2 * r + 1], ~u);
          }
          if (kind == 1 && rows > 64 && r >= 64) {  // the rest as copies: host time
            for (int rr = r; rr < rows; ++rr) {
              std::copy(scores.begin() + (rr % 64) * stride, scores.begin() + (rr % 64 + 1) * stride,
                        scores.begin() + rr * stride);
              minmax[2 * rr] = minmax[2 * (rr % 64)];
              minmax[2 * rr + 1] = minmax[2 * (rr % 64) + 1];
            }
            break;
          }
        }
        std::vector<std::int32_t> positions(rows, visible - 1);
        Buffer d_scores(DType::kF32, Shape{rows, stride}, gpu.allocator()), d_mm(DType::kI32, Shape{rows, 2}, gpu.allocator());
        Buffer d_pos(DType::kI32, Shape{rows}, gpu.allocator()), d_out(DType::kI32, Shape{rows, 2048}, gpu.allocator());
        Buffer d_probe(DType::kI64, Shape{8}, gpu.allocator());
        gpu.CopyBytesFromHost(scores.data(), d_scores);
        gpu.CopyBytesFromHost(minmax.data(), d_mm);
        gpu.CopyBytesFromHost(positions.data(), d_pos);
        dsa::TopkArgs a;
        a.scores = d_scores.ptr<float>();
        a.stride = stride;
        a.minmax = d_mm.ptr<std::uint32_t>();
        a.positions = d_pos.ptr<std::int32_t>();
        a.reach = visible;
        a.topk = 2048;
        a.slots = rows;
        a.out = d_out.ptr<std::int32_t>();
        cudaEvent_t start, stop;
        cudaEventCreate(&start);
        cudaEventCreate(&stop);
        dsa::LaunchTopk(ctx, a);
        std::vector<float> times;
        for (int rep = 0; rep < 7; ++rep) {
          cudaEventRecord(start, ctx.stream());
          dsa::LaunchTopk(ctx, a);
          cudaEventRecord(stop, ctx.stream());
          cudaEventSynchronize(stop);
          float ms = 0;
          cudaEventElapsedTime(&ms, start, stop);
          times.push_back(ms * 1e3f);
        }
        std::sort(times.begin(), times.end());
        a.probe = d_probe.ptr<long long>();
        dsa::LaunchTopk(ctx, a);
        long long probe[8];
        gpu.CopyBytesToHost(d_probe, probe);
        // The first row's selection against a host sort (score descending, position ascending).
        std::vector<std::int32_t> got(2048), order(visible);
        gpu.CopyBytesToHost(d_out.tensor().Rows(0, 1), got.data());
        for (int i = 0; i < visible; ++i) order[i] = i;
        std::partial_sort(order.begin(), order.begin() + 2048, order.end(), [&](int x, int y) {
          return scores[x] > scores[y] || (scores[x] == scores[y] && x < y);
        });
        const bool same = std::equal(got.begin(), got.end(), order.begin());
        auto us = [&](int from, int to) { return (probe[to] - probe[from]) / (clock_khz * 1e-3); };
        std::printf("RESULT dsa_topk_alone_%s_v%d_r%d %.1f %.3f Mrows/s\n", kind == 0 ? "normal" : "indexer", visible,
                    rows, times[3], rows / times[3]);
        std::printf("INFO dsa_topk_alone_%s_v%d_r%d block 0 at %.0f MHz: first pass %.1f us, radix passes %.1f us (%lld), "
                    "gather %.1f us (%lld scores), sort %.1f us, write %.1f us; selection %s the host's\n",
                    kind == 0 ? "normal" : "indexer", visible, rows, clock_khz * 1e-3, us(0, 1), us(1, 2), probe[7],
                    us(2, 3), probe[6], us(3, 4), us(4, 5), same ? "equals" : "DIFFERS FROM");
        std::fflush(stdout);
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
      }
    }
  }
}

}  // namespace fission::bench
