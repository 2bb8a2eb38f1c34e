#include "model/fp8_testlib.h"

#include <algorithm>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/arch/deepseek_v3.h"
#include "model/step_runner_testlib.h"
#include "model/weights.h"

namespace fission::model {

std::vector<float> DequantizeFp8(const Tensor& codes, const Tensor& scales) {
  const std::int64_t m = codes.shape[0], k = codes.shape[1], kb = (k + 127) / 128;
  std::vector<float> out(m * k);
  ConvertToF32(DType::kF8E4M3, codes.data, out.data(), m * k);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c) out[r * k + c] *= scales.ptr<float>()[(r / 128) * kb + c / 128];
  return out;
}

std::unique_ptr<CausalLM> LoadKeptFp8(const std::string& dir, const io::Checkpoint& checkpoint,
                                      kernels::Backend& backend) {
  WeightLoader loader(&checkpoint, backend);
  loader.KeepFp8();
  return std::make_unique<DeepseekV3Model>(io::LoadModelConfig(dir), loader, ShardOptions{});
}

Fp8Comparison CompareWithGolden(CausalLM& model, const std::string& dir) {
  const std::int64_t vocab = model.vocab_size();
  io::SafetensorsFile golden(dir + "/golden.safetensors");
  Fp8Comparison r;
  std::vector<double> errors;
  auto compare = [&](const std::vector<float>& got, const float* want) {
    errors.push_back(RelativeL2(got, want, vocab));
    r.logits.push_back(got);
  };
  for (int i = 0; golden.Find(StrCat("prompt", i, ".ids")) != nullptr; ++i) {
    const Tensor ids_t = golden.View(*golden.Find(StrCat("prompt", i, ".ids")));
    std::vector<std::int32_t> ids;
    for (std::int64_t j = 0; j < ids_t.numel(); ++j) ids.push_back(static_cast<std::int32_t>(ids_t.ptr<std::int64_t>()[j]));
    const std::int64_t prompt_len = golden.View(*golden.Find(StrCat("prompt", i, ".prompt_len"))).ptr<std::int64_t>()[0];
    const float* want = golden.View(*golden.Find(StrCat("prompt", i, ".logits"))).ptr<float>();
    StepRunner runner(model, 4, 64, ids.size());
    const int seq = runner.AddSequence();
    auto rows = runner.Prefill(seq, {ids.begin(), ids.begin() + prompt_len}, true);
    for (std::int64_t p = 0; p < prompt_len; ++p) compare(rows[p], want + p * vocab);
    std::vector<float> last = rows.back();
    for (std::size_t t = prompt_len; t < ids.size(); ++t) {
      ++r.greedy_steps;
      if (Argmax(last) == ids[t]) ++r.greedy_same;
      last = runner.Decode(seq, ids[t]);
      compare(last, want + t * vocab);
    }
  }
  r.rows = static_cast<int>(errors.size());
  r.outliers = static_cast<int>(std::count_if(errors.begin(), errors.end(), [](double e) { return e > kFp8Typical; }));
  std::sort(errors.begin(), errors.end());
  if (!errors.empty()) {
    r.median = errors[errors.size() / 2];
    r.worst = errors.back();
  }
  return r;
}

}  // namespace fission::model
