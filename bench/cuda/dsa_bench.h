// DeepSeek Sparse Attention's kernel benchmarks (dsa_bench.cc), run by fission_cuda_bench's
// dsa_indexer, dsa_topk, dsa_sparse_prefill and dsa_sparse_decode modes.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace fission::kernels::cuda {
class CudaBackend;
}

namespace fission::bench {

// mma.sync's own rate on this device in TFLOP/s: m16n8k32 e4m3 (fp8) or m16n8k16 bf16, register
// operands only (mma_ceiling.cu).
double MmaCeilingTflops(bool fp8, cudaStream_t stream);

// The selection kernel alone on synthetic rows, its first block's phases timed (dsa_topk_bench.cu).
void BenchTopkAlone(kernels::cuda::CudaBackend& gpu);

// Runs the modes `want` names (dsa_indexer, dsa_topk, dsa_sparse_prefill, dsa_sparse_decode).
void RunDsaBenchmarks(kernels::cuda::CudaBackend& gpu, const std::function<bool(const char*)>& want);

}  // namespace fission::bench
