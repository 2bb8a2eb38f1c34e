// A DeepSeek-V4 checkpoint in the layout DeepSeek publishes it, written from the tiny fixture for
// the tests of its loading (tests/model on the CPU, tests/model_cuda on the device): attention
// and shared-expert linears as e4m3 with a ue8m0 `.scale` per 128x128 block, routed experts as FP4
// (I8 [rows, cols / 2] of e2m1 pairs, the even column in the low nibble, with a ue8m0 `.scale` per
// 32 values), config.json with DeepSeek's quantization_config and expert_dtype "fp4"; and its twin
// holding the values the quantized tensors decode to, in fp32, with the fixture's config.
#pragma once

#include <string>

namespace fission::model {

struct V4QuantizedDirs {
  std::string quantized, twin;
};
// Writes both checkpoints from FixtureModelDir("tiny-deepseek-v4") under the test temporary
// directory, once per process, and returns their directories.
const V4QuantizedDirs& V4QuantizedCheckpoints();
// The same with only the routed experts quantized (FP4): every other matrix as the fixture stores
// it and no quantization_config, expert_dtype "fp4" at the top level. A device then keeps the
// experts FP4 and everything else exact, so its logits differ from the twin's by the experts'
// kernel alone.
const V4QuantizedDirs& V4Fp4ExpertsCheckpoints();

}  // namespace fission::model
