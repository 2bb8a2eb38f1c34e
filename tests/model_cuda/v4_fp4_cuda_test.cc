// DeepSeek-V4's FP4 routed experts on --device cuda: kept as stored (WeightFormat::Mxfp4A8, the
// W4A8 experts kernel of moe_fp4.cu) by the loader, against the CPU running the same checkpoint
// with its experts kept too (v4_quantized_testlib.h writes it from the tiny fixture).
//
// Bound. The experts checkpoint quantizes only the routed experts, so on the device everything
// but them is exact (fp32 weights, fp32 V4 operations: summation order), and both sides quantize
// the experts' activations by the same rule: they differ by summation order, and where that moves
// an activation across an e4m3 rounding boundary, by one step of it in one element (rare). The
// median row of logits is held to 1e-3. The kept path really ran: --dtype float32 (experts
// dequantized into fp32, activations unquantized) differs from it by more than summation order (a
// median of at least 1e-5). A router near a tie may flip for a few rows, so the worst row is
// printed, not bounded.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "model/arch/deepseek_v4.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"
#include "model/v4_quantized_testlib.h"
#include "model/v4_scenarios_testlib.h"
#include "model/weights.h"

namespace fission::model {
namespace {

constexpr double kSameQuantization = 1e-3;  // median relative L2 of a row of logits
constexpr double kPathRan = 1e-5;              // kept against dequantized experts, at least

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

LoadOptions OnCuda(const std::string& dtype = "auto") {
  LoadOptions o;
  o.device = "cuda";
  o.dtype = dtype;
  return o;
}

// The loader's decision for the fixture on one GPU keeps the experts, and a loader on the CUDA
// backend told so holds them on the device as the checkpoint's bytes.
TEST(CudaV4Fp4, ExpertsStayFp4OnTheDevice) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const V4QuantizedDirs& dirs = V4QuantizedCheckpoints();
  ASSERT_TRUE(DecideV4ExpertsOnCuda(io::LoadModelConfig(dirs.quantized), OnCuda()).keep);
  const io::Checkpoint checkpoint(dirs.quantized);
  auto backend = kernels::MakeCudaBackend(0);
  WeightLoader loader(&checkpoint, *backend);
  loader.KeepMxfp4Experts(WeightFormat::Mxfp4A8());
  const std::string p = "layers.2.ffn.experts.4.";
  const Weight gu = loader.LoadLinearStacked(p + "w1.weight", p + "w3.weight", Shape{32, 64});
  const Weight dn = loader.LoadLinearCols(p + "w2.weight", Shape{64, 32}, {}, gu.quantized());
  ASSERT_EQ(gu.format, WeightFormat::Mxfp4A8());
  ASSERT_EQ(dn.format, WeightFormat::Mxfp4A8());
  EXPECT_EQ(gu.values.tensor().device.type, DeviceType::kCuda);
  std::vector<std::uint8_t> codes(gu.values.tensor().bytes());
  backend->CopyBytesToHost(gu.values.tensor(), codes.data());
  const Tensor w1 = checkpoint.View(p + "w1.weight");  // I8 [32, 32]: gate's codes, the first half
  EXPECT_EQ(std::memcmp(codes.data(), w1.data, w1.bytes()), 0);
}

std::vector<double> SortedRowErrors(const std::vector<std::vector<float>>& got,
                                    const std::vector<std::vector<float>>& want, std::int64_t vocab) {
  std::vector<double> errors;
  for (std::size_t i = 0; i < want.size(); ++i) errors.push_back(RelativeL2(got[i], want[i].data(), vocab));
  std::sort(errors.begin(), errors.end());
  return errors;
}

TEST(CudaV4Fp4, LogitsMatchTheCpusWithTheSameQuantization) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const V4QuantizedDirs& dirs = V4Fp4ExpertsCheckpoints();
  const io::Checkpoint checkpoint(dirs.quantized);
  auto cpu_backend = kernels::MakeCpuBackend();
  WeightLoader loader(&checkpoint, *cpu_backend);
  loader.KeepMxfp4Experts(WeightFormat::Mxfp4A8());
  DeepseekV4Model cpu_model(io::LoadModelConfig(dirs.quantized), loader, ShardOptions{});
  CausalLM* cpu = &cpu_model;
  auto cuda = LoadCausalLM(dirs.quantized, OnCuda());
  auto cuda_exact = LoadCausalLM(dirs.quantized, OnCuda("float32"));
  std::vector<std::int32_t> tokens;
  const auto want = V4MixedScenario(*cpu, &tokens);
  const auto got = V4MixedScenario(*cuda, &tokens);
  const auto exact = V4MixedScenario(*cuda_exact, &tokens);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(exact.size(), want.size());
  const std::vector<double> versus_cpu = SortedRowErrors(got, want, cpu->vocab_size());
  const std::vector<double> versus_exact = SortedRowErrors(got, exact, cpu->vocab_size());
  const std::vector<double> exact_versus_cpu = SortedRowErrors(exact, want, cpu->vocab_size());
  const double median = versus_cpu[versus_cpu.size() / 2], median_exact = versus_exact[versus_exact.size() / 2];
  std::printf("cuda FP4 experts (W4A8) vs the CPU's kept experts: median relative L2 %.3g, worst %.3g over %zu rows; "
              "vs dequantized experts on cuda: median %.3g; dequantized on cuda vs the CPU: median %.3g\n",
              median, versus_cpu.back(), versus_cpu.size(), median_exact,
              exact_versus_cpu[exact_versus_cpu.size() / 2]);
  EXPECT_LE(median, kSameQuantization);
  EXPECT_GE(median_exact, kPathRan);
}

// DeepSeek's published layout (FP8 linears and FP4 experts, expert_dtype "fp4") with
// --load-format dummy: the experts are drawn FP4 on the device (codes by the device's fill, one
// scale for every group) and the model runs.
TEST(CudaV4Fp4, DummyExpertsOfAConfigDeclaringFp4LoadAndRun) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  LoadOptions options = OnCuda();
  options.load_format = "dummy";
  const std::string dir = V4QuantizedCheckpoints().quantized;
  ASSERT_TRUE(DecideV4ExpertsOnCuda(io::LoadModelConfig(dir), options).keep);
  auto model = LoadCausalLM(dir, options);
  StepRunner runner(*model, 4, 64, 3);
  const auto rows = runner.Prefill(runner.AddSequence(), Tokens(40, 9, model->vocab_size()), true);
  double sum_sq = 0;
  for (const auto& row : rows)
    for (float v : row) {
      ASSERT_TRUE(std::isfinite(v));
      sum_sq += static_cast<double>(v) * v;
    }
  EXPECT_GT(sum_sq, 0.0);
}

}  // namespace
}  // namespace fission::model
