// The operation table: one case per Backend operation (and per weight format where an operation
// dispatches on one), each a function from named host tensors to named host tensors that runs the
// operation on any backend. Three users:
//   - tests/kernels/op_table_test.cc: the CPU reference against torch's outputs recorded by
//     tools/golden/make_op_goldens.py (tests/fixtures/ops/op_goldens.safetensors);
//   - tests/kernels_cuda/op_table_test.cc: the CUDA backend against the CPU on fresh random inputs;
//   - bench/cuda/cuda_bench.cc `ops`: the perf mode, every case at a larger size, timed.
// Scalars (an epsilon, an offset) travel as one-element tensors so that a case is its tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace fission::testing {

// A host tensor: its dtype, shape and bytes.
struct HostTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<std::byte> bytes;

  static HostTensor F32(Shape shape, const std::vector<float>& values);
  static HostTensor I32(Shape shape, const std::vector<std::int32_t>& values);
  static HostTensor I64(Shape shape, const std::vector<std::int64_t>& values);
  std::int64_t numel() const { return shape.numel(); }
  // The values as fp32 (any float dtype converted, integers cast).
  std::vector<float> Floats() const;
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  Tensor view() const;  // a host view (the bytes stay owned here)
};
using Tensors = std::map<std::string, HostTensor>;

// A case made ready on a backend: its inputs copied there and its outputs allocated. `launch`
// runs the operation (again, in the perf mode); `collect` brings the outputs back.
struct PreparedCase {
  std::function<void()> launch;
  std::function<Tensors()> collect;
};

struct OpCase {
  std::string name;  // "linear_fp8", "mla_absorbed", ...
  std::string op;    // the Backend operation it runs
  // Random inputs; `scale` 1 gives the test's small shapes, larger ones the perf mode's.
  std::function<Tensors(std::mt19937_64& rng, int scale)> inputs;
  std::function<PreparedCase(kernels::Backend& backend, const Tensors& inputs)> prepare;
  // Largest relative L2 of an output against the reference (per output name; "*" for any other):
  // the CPU against torch, and a device backend against the CPU (bf16 and FP8 kernels round).
  std::map<std::string, double> tolerance;
  std::map<std::string, double> device_tolerance;
  // Bytes one call reads and writes, and its floating-point operations (the perf mode's roofline).
  std::function<double(const Tensors& inputs)> bytes, flops;
};

const std::vector<OpCase>& OpCases();
// Runs a case once on `backend` and returns its outputs.
Tensors RunCase(const OpCase& c, kernels::Backend& backend, const Tensors& inputs);

// Relative L2 distance of `got` from `want` (0 when both are zero).
double RelativeL2(const std::vector<float>& got, const std::vector<float>& want);
// Compares every output of `want` with `got` under `tolerance` (a case's tolerance or
// device_tolerance); returns "" or what differs, naming the case.
std::string CompareOutputs(const OpCase& c, const Tensors& got, const Tensors& want,
                           const std::map<std::string, double>& tolerance);

}  // namespace fission::testing
