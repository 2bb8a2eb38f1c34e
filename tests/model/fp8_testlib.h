// Helpers for the tests of FP8 weights kept as stored (tests/model on the CPU's FP8 operations,
// tests/model_cuda on the device): the dequantized values of a kept weight, a model loaded with
// its FP8 kept on a given backend, and its logits against the fixture's golden (dequantized) logits.
//
// Bounds (measured on the CPU's FP8 operations for tiny-deepseek-v3-fp8, values in docs/cuda.md):
// activations are quantized to e4m3 before every FP8 product (3 mantissa bits: about 2.5% RMS
// relative error per quantized vector), which the dequantized reference does not do. Most rows
// move by a few percent; a few move by order 1 where the perturbation flips the router's choice of
// group or expert at a near tie (this random model keeps one group of two and two experts of eight).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/causal_lm.h"

namespace fission::model {

inline constexpr double kFp8MedianBound = 8e-2;      // median relative L2 of a row of logits
inline constexpr double kFp8Typical = 0.2;           // rows above it count as routing flips ...
inline constexpr double kFp8OutlierFraction = 0.1;   // ... and may be at most this fraction
inline constexpr double kFp8GreedyFraction = 0.8;    // teacher-forced decode steps whose argmax agrees
// The device's FP8 path against the CPU's FP8 operations (same codes; bf16 GEMM outputs and
// summation order move a few activations across e4m3 rounding boundaries): median only, since a
// router flip can happen between them too.
inline constexpr double kFp8DeviceVsCpuMedian = 3e-2;

// Host fp32 values code · scale[row / 128][col / 128] of host e4m3 codes [m, k].
std::vector<float> DequantizeFp8(const Tensor& codes, const Tensor& scales);

// The fixture's model with its FP8 matrices kept (WeightLoader::KeepFp8) on `backend`.
std::unique_ptr<CausalLM> LoadKeptFp8(const std::string& dir, const io::Checkpoint& checkpoint,
                                      kernels::Backend& backend);

struct Fp8Comparison {
  double median = 0, worst = 0;
  int rows = 0, outliers = 0;  // rows above kFp8Typical
  int greedy_same = 0, greedy_steps = 0;
  std::vector<std::vector<float>> logits;  // every row compared, in order
};
// Runs the golden prompts (prefill, then the golden continuation teacher-forced) and compares
// every row with golden.safetensors; greedy counts decode steps whose argmax is the golden token.
Fp8Comparison CompareWithGolden(CausalLM& model, const std::string& dir);

}  // namespace fission::model
