#include "model/v4_quantized_testlib.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include <unistd.h>

#include "base/json.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/step_runner_testlib.h"
#include "tensor/quantize.h"

namespace fission::model {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
std::string Stem(const std::string& weight) { return weight.substr(0, weight.size() - std::string(".weight").size()); }

// e4m3 codes with one power-of-two scale per 128x128 block (2^ceil(log2(amax / 448))), the values
// they decode to written back into `w`.
void QuantizeFp8Ue8m0(std::vector<float>& w, std::int64_t rows, std::int64_t cols, std::vector<std::uint8_t>& codes,
                      std::vector<std::uint8_t>& scales) {
  const std::int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
  codes.assign(static_cast<std::size_t>(rows * cols), 0);
  scales.assign(static_cast<std::size_t>(br * bc), 0);
  for (std::int64_t i = 0; i < br; ++i)
    for (std::int64_t j = 0; j < bc; ++j) {
      float amax = 1e-8f;
      for (std::int64_t r = i * 128; r < std::min(rows, (i + 1) * 128); ++r)
        for (std::int64_t c = j * 128; c < std::min(cols, (j + 1) * 128); ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const int e = static_cast<int>(std::ceil(std::log2(amax / 448.0f)));
      scales[i * bc + j] = static_cast<std::uint8_t>(e + 127);
      const float scale = std::ldexp(1.0f, e);
      for (std::int64_t r = i * 128; r < std::min(rows, (i + 1) * 128); ++r)
        for (std::int64_t c = j * 128; c < std::min(cols, (j + 1) * 128); ++c) {
          const std::uint8_t code = F32ToF8E4M3(w[r * cols + c] / scale);
          codes[r * cols + c] = code;
          w[r * cols + c] = F8E4M3ToF32(code) * scale;
        }
    }
}

Tensor HostTensor(const void* data, DType dtype, Shape shape) {
  Tensor t;
  t.data = const_cast<void*>(data);
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

// `fp8_linears`: the attention and shared-expert linears in e4m3 too (DeepSeek's layout).
V4QuantizedDirs Write(bool fp8_linears, const std::string& name) {
  const std::string source = FixtureModelDir("tiny-deepseek-v4");
  // One folder per process: ctest runs the tests that share these checkpoints as separate
  // processes at once, and a file rewritten while another process maps it faults that process.
  const std::string base = ::testing::TempDir() + "/" + name + "-" + std::to_string(getpid());
  V4QuantizedDirs dirs{base, base + "-twin"};
  std::filesystem::create_directories(dirs.quantized);
  std::filesystem::create_directories(dirs.twin);
  const io::Checkpoint ckpt(source);
  std::vector<std::vector<std::uint8_t>> bytes;  // storage of what is written
  std::vector<std::vector<float>> values;
  std::vector<io::TensorToWrite> quantized, twin;
  bytes.reserve(4096);
  values.reserve(4096);
  for (const std::string& name : ckpt.Names()) {
    const io::TensorInfo& info = ckpt.Info(name);
    const Tensor stored = ckpt.View(name);
    const bool linear = info.shape.rank() == 2 && EndsWith(name, ".weight");
    const bool expert = linear && name.find(".ffn.experts.") != std::string::npos;
    const bool fp8 = fp8_linears && linear && !expert &&
                     (name.find(".attn.wq_") != std::string::npos || name.find(".attn.wkv.") != std::string::npos ||
                      name.find(".attn.wo_b.") != std::string::npos || name.find(".shared_experts.") != std::string::npos);
    if (!expert && !fp8) {
      quantized.push_back({name, stored});
      twin.push_back({name, stored});
      continue;
    }
    const std::int64_t rows = info.shape[0], cols = info.shape[1];
    std::vector<float>& w = values.emplace_back(stored.ptr<float>(), stored.ptr<float>() + rows * cols);
    if (expert) {
      const QuantizedMatrix q = QuantizeMatrix(w.data(), rows, cols, WeightFormat::Mxfp4());
      DequantizeMatrix(WeightView(q.codes.tensor(), q.scales.tensor(), WeightFormat::Mxfp4()), w.data());
      auto& codes = bytes.emplace_back(q.codes.ptr<std::uint8_t>(), q.codes.ptr<std::uint8_t>() + q.codes.tensor().bytes());
      auto& scales =
          bytes.emplace_back(q.scales.ptr<std::uint8_t>(), q.scales.ptr<std::uint8_t>() + q.scales.tensor().bytes());
      quantized.push_back({name, HostTensor(codes.data(), DType::kI8, Shape{rows, cols / 2})});
      quantized.push_back({Stem(name) + ".scale", HostTensor(scales.data(), DType::kE8M0, q.scales.tensor().shape)});
    } else {
      std::vector<std::uint8_t>& codes = bytes.emplace_back();
      std::vector<std::uint8_t>& scales = bytes.emplace_back();
      QuantizeFp8Ue8m0(w, rows, cols, codes, scales);
      quantized.push_back({name, HostTensor(codes.data(), DType::kF8E4M3, info.shape)});
      quantized.push_back(
          {Stem(name) + ".scale", HostTensor(scales.data(), DType::kE8M0, Shape{(rows + 127) / 128, (cols + 127) / 128})});
    }
    twin.push_back({name, HostTensor(w.data(), DType::kF32, info.shape)});
  }
  io::WriteSafetensors(dirs.quantized + "/model.safetensors", quantized);
  io::WriteSafetensors(dirs.twin + "/model.safetensors", twin);
  Json config = ReadJsonFile(source + "/config.json");
  std::ofstream(dirs.twin + "/config.json") << config.dump(2);
  if (fp8_linears)
    config["quantization_config"] = Json::parse(
        R"({"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0", "weight_block_size": [128, 128],
            "activation_scheme": "dynamic"})");
  config["expert_dtype"] = "fp4";
  std::ofstream(dirs.quantized + "/config.json") << config.dump(2);
  return dirs;
}

}  // namespace

const V4QuantizedDirs& V4QuantizedCheckpoints() {
  static const V4QuantizedDirs dirs = Write(/*fp8_linears=*/true, "v4-quantized");
  return dirs;
}

const V4QuantizedDirs& V4Fp4ExpertsCheckpoints() {
  static const V4QuantizedDirs dirs = Write(/*fp8_linears=*/false, "v4-fp4-experts");
  return dirs;
}

}  // namespace fission::model
