// A profiler for when no profiler is installed: with FISSION_CUDA_OP_TIMING=1 in the environment,
// every Backend operation waits for the device before and after it and adds its wall time (launch
// and host work included) to a per-process table, split by step size (<= 64 rows: decode-sized;
// more: prefill-sized). The table goes to stderr at exit. Off (one branch per operation) otherwise.
// Timing serializes the device, so totals are larger than an untimed run's; shares are what count.
// Timers inside an operation (names starting with '.') are parts of it and counted in it too.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace fission::kernels::cuda {

class CudaContext;

class OpTimer {
 public:
  OpTimer(CudaContext& ctx, const char* op, std::int64_t rows);
  // Also splits the table by a weight shape (the GEMMs of a step differ by it).
  OpTimer(CudaContext& ctx, const char* op, std::int64_t rows, const Shape& weight);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  CudaContext* ctx_ = nullptr;  // null when timing is off
  std::string op_;
  std::int64_t rows_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace fission::kernels::cuda
