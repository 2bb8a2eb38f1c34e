// The whole model on CUDA: against the transformers fixtures (as tests/model/golden_parity_test.cc
// does on the CPU), against the CPU backend step by step, and every NCCL layout against one GPU.
// Weights, activations and the KV cache are fp32, but the CUDA MLA kernels run their products on
// tensor cores in bf16 (queries, latent rows and kv_b rounded to bf16, fp32 accumulation), so
// logits differ from an fp32 reference by bf16 rounding, not only by summation order. Greedy tokens
// are compared teacher-forced: every step feeds the reference's token, and a different argmax is
// allowed only where the reference's own top two are closer than that rounding can move them.
// An FP8 checkpoint keeps its FP8 matrices on the device unless --dtype float32: golden parity
// runs the exact (dequantized) path, and the FP8 path has its own bounds (model/fp8_testlib.h).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/fp8_testlib.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"

namespace fission::model {
namespace {

// Relative L2 bounds; measured values are printed and recorded in docs/cuda.md. A wrong head,
// row, scale or gather gives errors of order 1.
constexpr double kVersusFp32Bound = 3e-2;  // CUDA vs transformers / the CPU backend
constexpr double kLayoutBound = 1e-2;      // NCCL layouts vs one GPU (same kernels, other sums)
// bf16 weights and KV cache (--dtype bfloat16) vs the CPU: most rows within kBf16Typical; a few
// rows move further where a token's expert choice flips at a near tie of the router (measured:
// 23 of 725 rows above 0.1 with a bf16 router, before the router was kept in fp32).
constexpr double kBf16Typical = 5e-2;
constexpr double kBf16OutlierFraction = 0.1;

// Whether `got`'s argmax may differ from `want`'s: only at a near tie in `want`, closer than
// twice the error the bound allows per element.
bool NearTie(const std::vector<float>& got, const float* want, std::int64_t vocab, double bound) {
  const std::int32_t g = Argmax(got);
  std::int32_t w = 0;
  double sum_sq = 0.0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    if (want[i] > want[w]) w = static_cast<std::int32_t>(i);
    sum_sq += static_cast<double>(want[i]) * want[i];
  }
  if (g == w) return true;
  const double rms = std::sqrt(sum_sq / vocab);
  return want[w] - want[g] <= 2.0 * bound * rms;
}

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

LoadOptions OnCuda(int tp = 1, int cp = 1) {
  LoadOptions o;
  o.device = "cuda";
  o.tp_size = tp;
  o.attn_cp_size = cp;
  return o;
}

class CudaGoldenParity : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGoldenParity, PrefillAndGreedyDecodeMatchTransformers) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string dir = FixtureModelDir(GetParam());
  LoadOptions options = OnCuda();
  options.dtype = "float32";  // FP8 dequantized: the path that matches transformers
  auto model = LoadCausalLM(dir, options);
  const std::int64_t vocab = model->vocab_size();
  io::SafetensorsFile golden(dir + "/golden.safetensors");
  double worst = 0.0;
  int prompts = 0, flips = 0;
  for (int i = 0; golden.Find(StrCat("prompt", i, ".ids")) != nullptr; ++i, ++prompts) {
    const Tensor ids_t = golden.View(*golden.Find(StrCat("prompt", i, ".ids")));
    std::vector<std::int32_t> ids;
    for (std::int64_t j = 0; j < ids_t.numel(); ++j) ids.push_back(static_cast<std::int32_t>(ids_t.ptr<std::int64_t>()[j]));
    const std::int64_t prompt_len = golden.View(*golden.Find(StrCat("prompt", i, ".prompt_len"))).ptr<std::int64_t>()[0];
    const float* want = golden.View(*golden.Find(StrCat("prompt", i, ".logits"))).ptr<float>();
    StepRunner runner(*model, 4, 64, ids.size());
    const int seq = runner.AddSequence();
    auto rows = runner.Prefill(seq, {ids.begin(), ids.begin() + prompt_len}, true);
    for (std::int64_t p = 0; p < prompt_len; ++p) {
      const double err = RelativeL2(rows[p], want + p * vocab, vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, kVersusFp32Bound) << GetParam() << " prompt " << i << " position " << p;
    }
    std::vector<float> last = rows.back();
    for (std::size_t t = prompt_len; t < ids.size(); ++t) {
      // The reference's greedy token at t is ids[t]; it is fed whatever we predicted.
      if (Argmax(last) != ids[t]) {
        ++flips;
        EXPECT_TRUE(NearTie(last, want + (t - 1) * vocab, vocab, kVersusFp32Bound))
            << GetParam() << " prompt " << i << " greedy step " << t - prompt_len << ": " << Argmax(last)
            << " instead of " << ids[t];
      }
      last = runner.Decode(seq, ids[t]);
      const double err = RelativeL2(last, want + t * vocab, vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, kVersusFp32Bound) << GetParam() << " decode position " << t;
    }
  }
  EXPECT_EQ(prompts, 4);
  std::printf("cuda %s vs transformers: worst relative L2 %.3g, greedy near-tie flips %d\n", GetParam().c_str(), worst,
              flips);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaGoldenParity,
                         ::testing::Values("tiny-deepseek-v3", "tiny-glm-routing", "tiny-deepseek-v3-fp8"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// DeepSeek Sparse Attention on CUDA (fp32 weights and cache, exact index keys) against
// transformers at every position, prefill and the greedy continuation's positions alike. The
// selection past index_topk is only as stable as the indexer's inputs: the fixtures' top-k
// boundaries are at least 2e-6 apart relative to the scores (tools/golden/make_dsa_goldens.py),
// and the fp32 CUDA path stays within ~1e-6 of the CPU (measured: worst 1.1e-6, 400 of 400 sparse
// positions with transformers' argmax), so it selects what transformers selects.
class CudaSparseParity : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSparseParity, MatchesTransformersAtEveryPosition) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string dir = FixtureModelDir(GetParam());
  LoadOptions options = OnCuda();
  options.dtype = "float32";
  auto model = LoadCausalLM(dir, options);
  const std::int64_t vocab = model->vocab_size(), topk = io::LoadModelConfig(dir).indexer->topk;
  io::SafetensorsFile golden(dir + "/golden.safetensors");
  double worst_dense = 0.0, worst_sparse = 0.0;
  int sparse_rows = 0, sparse_argmax = 0;
  for (int i = 0; golden.Find(StrCat("prompt", i, ".ids")) != nullptr; ++i) {
    const Tensor ids_t = golden.View(*golden.Find(StrCat("prompt", i, ".ids")));
    std::vector<std::int32_t> ids;
    for (std::int64_t j = 0; j < ids_t.numel(); ++j) ids.push_back(static_cast<std::int32_t>(ids_t.ptr<std::int64_t>()[j]));
    const float* want = golden.View(*golden.Find(StrCat("prompt", i, ".logits"))).ptr<float>();
    StepRunner runner(*model, 4, static_cast<int>(ids.size() / 4 + 2), ids.size());
    const auto rows = runner.Prefill(runner.AddSequence(), ids, true);
    for (std::size_t p = 0; p < ids.size(); ++p) {
      const double err = RelativeL2(rows[p], want + p * vocab, vocab);
      EXPECT_LE(err, kVersusFp32Bound) << GetParam() << " prompt " << i << " position " << p;
      if (static_cast<std::int64_t>(p) < topk) {
        worst_dense = std::max(worst_dense, err);
        continue;
      }
      worst_sparse = std::max(worst_sparse, err);
      ++sparse_rows;
      const float* w = want + p * vocab;
      sparse_argmax += Argmax(rows[p]) == static_cast<std::int32_t>(std::max_element(w, w + vocab) - w);
    }
  }
  EXPECT_EQ(sparse_argmax, sparse_rows) << "a sparse position's argmax differs from transformers'";
  std::printf("cuda %s vs transformers: every key selected, worst relative L2 %.3g; sparse positions worst %.3g, "
              "argmax kept %d/%d\n",
              GetParam().c_str(), worst_dense, worst_sparse, sparse_argmax, sparse_rows);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaSparseParity, ::testing::Values("tiny-deepseek-v32", "tiny-glm-dsa"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// A selection larger than the CUDA indexer makes is refused before loading, naming the field.
TEST(CudaSparseModel, AnIndexTopkBeyondTheKernelIsRefused) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  LoadOptions options = OnCuda();
  options.json_model_override_args = R"({"index_topk": 8192})";
  try {
    LoadCausalLM(FixtureModelDir("tiny-deepseek-v32"), options);
    FAIL() << "index_topk 8192 loaded on cuda";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index_topk 8192 is larger than the CUDA indexer selects (at most 4096)"),
              std::string::npos)
        << e.what();
  }
}

// The real-size DSA configs load with dummy FP8 weights (3 layers: dense, MoE, MoE) and run a
// prefill longer than index_topk and a few decode steps to finite logits.
TEST(CudaSparseModel, RealSizeDummyConfigsRun) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  for (const char* name : {"deepseek-v3.2", "glm-5"}) {
    LoadOptions options = OnCuda();
    options.dtype = "bfloat16";
    options.load_format = "dummy";
    options.json_model_override_args = R"({"num_hidden_layers": 3, "first_k_dense_replace": 1})";
    auto model = LoadCausalLM(std::string(FISSION_SOURCE_DIR) + "/bench/configs/" + name, options);
    StepRunner runner(*model, 64, 80, 1);
    const int seq = runner.AddSequence();
    auto rows = runner.Prefill(seq, Tokens(3000, 5, model->vocab_size()), false);
    for (int t = 0; t < 4; ++t) rows.push_back(runner.Decode(seq, Argmax(rows.back())));
    for (const auto& row : rows)
      for (float v : row) ASSERT_TRUE(std::isfinite(v)) << name;
    std::printf("%s (3 layers, dummy FP8): prefill of 3000 tokens and 4 decode steps ran\n", name);
  }
}

double Compare(CausalLM& want_model, CausalLM& got_model, double bound, const std::string& what) {
  std::vector<std::int32_t> tokens;
  const auto want = RunMixedScenario(want_model, &tokens);
  const auto got = RunMixedScenario(got_model, &tokens);
  EXPECT_EQ(got.size(), want.size());
  const std::int64_t vocab = want_model.vocab_size();
  double worst = 0.0;
  int flips = 0;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double err = RelativeL2(got[i], want[i].data(), vocab);
    worst = std::max(worst, err);
    EXPECT_LE(err, bound) << what << " row " << i;
    if (Argmax(got[i]) != Argmax(want[i])) {
      ++flips;
      EXPECT_TRUE(NearTie(got[i], want[i].data(), vocab, bound)) << what << " row " << i << " argmax differs";
    }
  }
  std::printf("%s: worst relative L2 %.3g over %zu rows, argmax near-tie flips %d\n", what.c_str(), worst,
              want.size(), flips);
  return worst;
}

// The mixed scenario on both models: most rows within kBf16Typical, the median within half of it
// (a row further away is one where a token's expert choice flipped at a near tie of the router).
void ExpectMostRowsClose(CausalLM& want_model, CausalLM& got_model, const std::string& what) {
  std::vector<std::int32_t> tokens;
  const auto want = RunMixedScenario(want_model, &tokens);
  const auto got = RunMixedScenario(got_model, &tokens);
  ASSERT_EQ(got.size(), want.size()) << what;
  std::vector<double> errors;
  for (std::size_t i = 0; i < want.size(); ++i)
    errors.push_back(RelativeL2(got[i], want[i].data(), want_model.vocab_size()));
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  const std::size_t outliers = static_cast<std::size_t>(
      std::count_if(errors.begin(), errors.end(), [](double e) { return e > kBf16Typical; }));
  EXPECT_LE(median, kBf16Typical / 2) << what;
  EXPECT_LE(static_cast<double>(outliers), kBf16OutlierFraction * errors.size()) << what;
  std::printf("%s: median relative L2 %.3g, worst %.3g, %zu of %zu rows above %.2g\n", what.c_str(), median,
              errors.back(), outliers, errors.size(), kBf16Typical);
}

TEST(CudaModel, EqualsCpuBackend) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string dir = FixtureModelDir("tiny-deepseek-v3");
  auto cpu = LoadCausalLM(dir);
  auto cuda = LoadCausalLM(dir, OnCuda());
  Compare(*cpu, *cuda, kVersusFp32Bound, "cuda vs cpu");
}

TEST(CudaModel, Bf16WeightsAndCacheStayCloseToCpu) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string dir = FixtureModelDir("tiny-deepseek-v3");
  auto cpu = LoadCausalLM(dir);
  LoadOptions options = OnCuda();
  options.dtype = "bfloat16";
  auto cuda = LoadCausalLM(dir, options);
  EXPECT_EQ(cuda->Memory().classes[0].fields[0].dtype, DType::kBF16);
  ExpectMostRowsClose(*cpu, *cuda, "cuda bf16 vs cpu");
}

// A bf16 checkpoint's matrices go to a bf16 device as their stored bytes (WeightLoader::ReadMatrix:
// no fp32 round trip). tiny-deepseek-v3 with every matrix rounded to bf16 (ties to even; vectors
// kept fp32), written once as BF16 and once as the same values in F32: under --dtype bfloat16 the
// F32 copy's matrices are converted on the way (exactly: they are bf16 values) and what the model
// keeps in fp32 (the router, say) reads the same values from either file, so the logits must be
// equal bit for bit.
void WriteRoundedCopy(const std::string& src, const std::string& dir, DType matrices) {
  std::filesystem::create_directories(dir);
  for (const char* file : {"config.json", "generation_config.json"})
    std::filesystem::copy_file(src + "/" + file, dir + "/" + file, std::filesystem::copy_options::overwrite_existing);
  for (const char* file : {"model.safetensors", "model-mtp.safetensors"}) {
    io::SafetensorsFile in(src + "/" + file);
    std::vector<std::vector<std::uint16_t>> bf16;
    std::vector<std::vector<float>> f32;
    std::vector<io::TensorToWrite> out;
    bf16.reserve(in.tensors().size());
    f32.reserve(in.tensors().size());
    for (const auto& [name, info] : in.tensors()) {
      Tensor t = in.View(info);
      if (info.dtype == DType::kF32 && info.shape.rank() == 2) {
        const std::int64_t n = info.shape.numel();
        auto& b = bf16.emplace_back(static_cast<std::size_t>(n));
        ConvertFromF32(DType::kBF16, t.ptr<float>(), b.data(), n);
        if (matrices == DType::kBF16) {
          t.data = b.data();
          t.dtype = DType::kBF16;
        } else {
          auto& f = f32.emplace_back(static_cast<std::size_t>(n));
          ConvertToF32(DType::kBF16, b.data(), f.data(), n);
          t.data = f.data();
        }
      }
      out.push_back({name, t});
    }
    io::WriteSafetensors(dir + "/" + file, out);
  }
}

TEST(CudaModel, Bf16CheckpointMatricesLoadAsStoredBytes) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string src = FixtureModelDir("tiny-deepseek-v3");
  const std::string bf16_dir = ::testing::TempDir() + "/fission-bf16-copy",
                    f32_dir = ::testing::TempDir() + "/fission-bf16-values-in-f32";
  WriteRoundedCopy(src, bf16_dir, DType::kBF16);
  WriteRoundedCopy(src, f32_dir, DType::kF32);
  LoadOptions options = OnCuda();
  options.dtype = "bfloat16";
  auto from_f32 = LoadCausalLM(f32_dir, options);
  auto from_bf16 = LoadCausalLM(bf16_dir, options);
  std::vector<std::int32_t> tokens;
  const auto want = RunMixedScenario(*from_f32, &tokens);
  const auto got = RunMixedScenario(*from_bf16, &tokens);
  ASSERT_EQ(got.size(), want.size());
  std::size_t same = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    same += std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)) == 0 ? 1 : 0;
  std::printf("bf16 checkpoint vs the same values in f32 under --dtype bfloat16: %zu of %zu rows bit-identical\n",
              same, want.size());
  EXPECT_EQ(same, want.size());
  std::filesystem::remove_all(bf16_dir);
  std::filesystem::remove_all(f32_dir);
}

// --kv-cache-dtype fp8_e4m3 on both backends (fp32 weights): the CUDA kernels read the FP8 rows
// the CUDA WriteLatent stored (the bytes the CPU stores from the same rows, tested in
// kernels_cuda/mla_fp8_test.cc): dense MLA on tiny-deepseek-v3, the indexer's fp8 keys and
// sparse MLA on tiny-deepseek-v32. Rows written from values that differ by the tensor cores' bf16
// rounding may round to neighbouring e4m3 codes, so the bound is the bf16 case's.
TEST(CudaModel, Fp8KvCacheStaysCloseToCpu) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  for (const char* fixture : {"tiny-deepseek-v3", "tiny-deepseek-v32"}) {
    const std::string dir = FixtureModelDir(fixture);
    LoadOptions cpu_options;
    cpu_options.kv_cache_dtype = "fp8_e4m3";
    LoadOptions cuda_options = OnCuda();
    cuda_options.kv_cache_dtype = "fp8_e4m3";
    auto cpu = LoadCausalLM(dir, cpu_options);
    auto cuda = LoadCausalLM(dir, cuda_options);
    EXPECT_EQ(cuda->Memory().classes[0].fields[0].dtype, DType::kF8E4M3) << fixture;
    ExpectMostRowsClose(*cpu, *cuda, StrCat("cuda fp8 kv vs cpu fp8 kv, ", fixture));
  }
}

// Online ptpc_fp8 (every quantizable module but the lm_head, embeddings and routers, as the GLM-5.2
// recipe's global rule) on CUDA against the same configuration on the CPU, fp32 activations: both
// quantize the weights on the host by the same rule and each token's activations by the same
// per-token rule, so rows differ where the CUDA path's bf16 attention moves an activation across
// an e4m3 rounding boundary (the bound of the bf16 case).
TEST(CudaModel, OnlinePtpcFp8StaysCloseToCpu) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string dir = FixtureModelDir("tiny-deepseek-v3");
  const std::string ptpc = R"({"online_quant_config": {"global_quant_config": "ptpc_fp8", )"
                           R"("exclude_layer": ["lm_head", "model.embed_tokens", "*.mlp.gate"]}})";
  LoadOptions cpu_options;
  cpu_options.model_loader_extra_config = ptpc;
  LoadOptions cuda_options = OnCuda();
  cuda_options.dtype = "float32";
  cuda_options.model_loader_extra_config = ptpc;
  auto cpu = LoadCausalLM(dir, cpu_options);
  auto cuda = LoadCausalLM(dir, cuda_options);
  ExpectMostRowsClose(*cpu, *cuda, "cuda ptpc_fp8 vs cpu ptpc_fp8");
}

// The GLM-5.2 recipe's online quantization (ptpc_fp8 everywhere but the lm_head, embeddings and
// routers, mxfp8 on the routed experts: LinearFp8PerChannel and MoeExpertsMx) on CUDA against the
// same plan on the CPU, as the ptpc case above: rows differ where bf16 attention or the tensor
// cores' shorter fp32 alignment in a 1x32 group moves an activation across a rounding boundary.
TEST(CudaModel, Glm52RecipeQuantizationStaysCloseToCpu) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string dir = FixtureModelDir("tiny-deepseek-v3");
  const std::string recipe =
      R"({"online_quant_config": {"global_quant_config": "ptpc_fp8", )"
      R"("layer_quant_config": {"model.layers.*.mlp.experts": "mxfp8"}, )"
      R"("exclude_layer": ["lm_head", "model.embed_tokens", "*.mlp.gate"]}})";
  LoadOptions cpu_options;
  cpu_options.model_loader_extra_config = recipe;
  LoadOptions cuda_options = OnCuda();
  cuda_options.dtype = "float32";
  cuda_options.model_loader_extra_config = recipe;
  auto cpu = LoadCausalLM(dir, cpu_options);
  auto cuda = LoadCausalLM(dir, cuda_options);
  ExpectMostRowsClose(*cpu, *cuda, "cuda ptpc_fp8 + mxfp8 experts vs cpu");
}

// FP8 kept on the device (--dtype auto on an FP8 checkpoint: LinearFp8 and MoeExpertsFp8) against
// the dequantized model, within the bounds the CPU's FP8 operations meet (fp8_testlib.h), and
// against those CPU operations themselves: the same codes and scales, so the two differ only where
// a bf16 GEMM output or a summation order moves an activation across an e4m3 rounding boundary.
TEST(CudaModel, Fp8WeightsKeptStayWithinTheFp8Bound) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string dir = FixtureModelDir("tiny-deepseek-v3-fp8");
  auto cuda = LoadCausalLM(dir, OnCuda());
  const Fp8Comparison got = CompareWithGolden(*cuda, dir);
  io::Checkpoint checkpoint(dir);
  auto cpu_backend = kernels::MakeCpuBackend();
  auto cpu_fp8 = LoadKeptFp8(dir, checkpoint, *cpu_backend);
  const Fp8Comparison cpu = CompareWithGolden(*cpu_fp8, dir);
  LoadOptions exact = OnCuda();
  exact.dtype = "float32";
  auto cuda_exact = LoadCausalLM(dir, exact);
  const Fp8Comparison dequantized = CompareWithGolden(*cuda_exact, dir);
  ASSERT_EQ(got.rows, cpu.rows);
  std::vector<double> versus_cpu, versus_exact;
  for (int i = 0; i < got.rows; ++i) {
    versus_cpu.push_back(RelativeL2(got.logits[i], cpu.logits[i].data(), cuda->vocab_size()));
    versus_exact.push_back(RelativeL2(got.logits[i], dequantized.logits[i].data(), cuda->vocab_size()));
  }
  std::sort(versus_cpu.begin(), versus_cpu.end());
  std::sort(versus_exact.begin(), versus_exact.end());
  std::printf("cuda fp8 kept vs dequantized (golden): median relative L2 %.3g, worst %.3g, %d of %d rows above %.2g, "
              "greedy %d of %d; vs the CPU's FP8 operations: median %.3g, worst %.3g\n",
              got.median, got.worst, got.outliers, got.rows, kFp8Typical, got.greedy_same, got.greedy_steps,
              versus_cpu[versus_cpu.size() / 2], versus_cpu.back());
  EXPECT_LE(got.median, kFp8MedianBound);
  EXPECT_LE(got.outliers, kFp8OutlierFraction * got.rows);
  EXPECT_GE(got.greedy_same, kFp8GreedyFraction * got.greedy_steps);
  EXPECT_LE(versus_cpu[versus_cpu.size() / 2], kFp8DeviceVsCpuMedian);
  // The FP8 path really ran: the dequantized device model differs from it by activation quantization.
  EXPECT_GE(versus_exact[versus_exact.size() / 2], 1e-3);
}

// MXFP4 routed experts kept on the device (a Quark checkpoint with fp4 activations:
// MoeExpertsMx) against the CPU running the same products: the bf16 twin (the decoded weights)
// with online mxfp4 on the routed experts, whose codes decode to the same values (re-quantizing
// decoded MX values is exact), activations quantized by the same rule. The two differ by fp32
// summation orders and where those move an activation across an e2m1 rounding boundary or the
// router across a near tie: a median relative L2 of the logits of at most 1e-3 (rows without a
// flip agree to about 1e-5). The MXFP4 path really ran: --dtype float32 (experts dequantized,
// activations not quantized) differs from it by a median of at least 1e-2.
TEST(CudaModel, Mxfp4ExpertsKeptMatchTheCpusMxfp4Products) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string dir = FixtureModelDir("tiny-deepseek-v3-mxfp4");
  LoadOptions cpu_options;
  cpu_options.model_loader_extra_config =
      R"({"online_quant_config":{"layer_quant_config":{"model.layers.*.mlp.experts":"mxfp4"}}})";
  auto cpu = LoadCausalLM(dir + "/bf16-twin", cpu_options);
  auto cuda = LoadCausalLM(dir, OnCuda());
  LoadOptions exact = OnCuda();
  exact.dtype = "float32";
  auto cuda_exact = LoadCausalLM(dir, exact);
  std::vector<std::int32_t> tokens;
  const auto want = RunMixedScenario(*cpu, &tokens);
  const auto got = RunMixedScenario(*cuda, &tokens);
  const auto dequantized = RunMixedScenario(*cuda_exact, &tokens);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(dequantized.size(), want.size());
  std::vector<double> versus_cpu, versus_exact;
  for (std::size_t i = 0; i < want.size(); ++i) {
    versus_cpu.push_back(RelativeL2(got[i], want[i].data(), cpu->vocab_size()));
    versus_exact.push_back(RelativeL2(got[i], dequantized[i].data(), cpu->vocab_size()));
  }
  std::sort(versus_cpu.begin(), versus_cpu.end());
  std::sort(versus_exact.begin(), versus_exact.end());
  const double median = versus_cpu[versus_cpu.size() / 2], median_exact = versus_exact[versus_exact.size() / 2];
  std::printf("cuda mxfp4 experts vs the CPU's mxfp4 products: median relative L2 %.3g, worst %.3g over %zu rows; "
              "vs dequantized experts: median %.3g\n",
              median, versus_cpu.back(), versus_cpu.size(), median_exact);
  EXPECT_LE(median, 1e-3);
  EXPECT_GE(median_exact, 1e-2);
}

// --load-format dummy with an FP8 quantization_config: codes and scales drawn on the device.
TEST(CudaModel, DummyFp8WeightsLoadAndRun) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  LoadOptions options = OnCuda();
  options.load_format = "dummy";
  auto model = LoadCausalLM(FixtureModelDir("tiny-deepseek-v3-fp8"), options);
  StepRunner runner(*model, 4, 64, 3);
  const int seq = runner.AddSequence();
  const auto rows = runner.Prefill(seq, Tokens(40, 9, model->vocab_size()), true);
  double sum_sq = 0;
  for (const auto& row : rows)
    for (float v : row) {
      ASSERT_TRUE(std::isfinite(v));
      sum_sq += static_cast<double>(v) * v;
    }
  EXPECT_GT(sum_sq, 0.0);
}

TEST(CudaModel, TheModelsMemoryLivesOnTheDevice) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  auto cuda = LoadCausalLM(FixtureModelDir("tiny-deepseek-v3"), OnCuda());
  cuda->AllocateMemory({8, 16, 0});
  EXPECT_EQ(MemoryOf(*cuda).entries(0, 0).device.type, DeviceType::kCuda);
}

struct Layout {
  int tp, cp;
};
class NcclLayouts : public ::testing::TestWithParam<Layout> {};

// NCCL tensor and context parallelism equal one GPU (pcp threshold lowered so every prefill splits).
TEST_P(NcclLayouts, EqualSingleGpu) {
  const Layout layout = GetParam();
  if (DeviceCount() < layout.tp) GTEST_SKIP() << "needs " << layout.tp << " GPUs, " << DeviceCount() << " here";
  const std::string dir = FixtureModelDir("tiny-deepseek-v3");
  auto single = LoadCausalLM(dir, OnCuda());
  LoadOptions options = OnCuda(layout.tp, layout.cp);
  options.pcp_min_tokens = 2;
  auto parallel = LoadCausalLM(dir, options);
  Compare(*single, *parallel, kLayoutBound, StrCat("nccl tp", layout.tp, " cp", layout.cp));
}

INSTANTIATE_TEST_SUITE_P(Nccl, NcclLayouts,
                         ::testing::Values(Layout{2, 1}, Layout{2, 2}, Layout{4, 1}, Layout{4, 2}, Layout{4, 4}),
                         [](const auto& info) { return StrCat("tp", info.param.tp, "_cp", info.param.cp); });

}  // namespace
}  // namespace fission::model
