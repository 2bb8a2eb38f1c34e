#include <gtest/gtest.h>

#include <cstdlib>

#include "model/runtime/load_flags.h"
#include "model/runtime/model_loader.h"

namespace fission::model {
namespace {

LoadOptions Parse(const std::vector<std::string>& args) {
  LoadOptions options;
  for (std::size_t i = 0; i < args.size();) {
    if (!ParseLoadFlag(args, &i, &options)) Fail("not a load flag: ", args[i]);
  }
  ValidateLoadOptions(options);
  return options;
}

TEST(LoadFlags, SglangRecipeFlags) {
  const LoadOptions o = Parse({"--tp-size", "4", "--attn-cp-size=2", "--enable-nsa-prefill-context-parallel",
                               "--nsa-prefill-cp-mode", "round-robin-split", "--load-format", "dummy",
                               "--json-model-override-args", R"({"num_hidden_layers": 4})"});
  EXPECT_EQ(o.tp_size, 4);
  EXPECT_EQ(o.attn_cp_size, 2);
  EXPECT_EQ(o.load_format, "dummy");
  EXPECT_EQ(o.json_model_override_args, R"({"num_hidden_layers": 4})");
  EXPECT_EQ(Parse({"--tensor-parallel-size=8"}).tp_size, 8);
}

TEST(LoadFlags, CudaGraphFlags) {
  const LoadOptions o = Parse({"--cuda-graph-bs", "1", "2", "8", "--cuda-graph-max-bs", "64", "--tp-size", "2"});
  EXPECT_EQ(o.cuda_graphs.batch_sizes, (std::vector<int>{1, 2, 8}));
  EXPECT_EQ(o.cuda_graphs.max_batch_size, 64);
  EXPECT_EQ(o.tp_size, 2);
  EXPECT_FALSE(o.cuda_graphs.disabled);
  EXPECT_EQ(Parse({"--cuda-graph-bs=4,16"}).cuda_graphs.batch_sizes, (std::vector<int>{4, 16}));
  EXPECT_TRUE(Parse({"--disable-cuda-graph"}).cuda_graphs.disabled);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--cuda-graph-bs"}, {"--cuda-graph-bs", "2", "x"}, {"--cuda-graph-bs=0"}, {"--cuda-graph-bs=1,,2"},
           {"--cuda-graph-max-bs", "-3"}}) {
    try {
      Parse(bad);
      ADD_FAILURE() << bad[0] << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--cuda-graph"), std::string::npos) << e.what();
    }
  }
}

TEST(LoadFlags, DeviceAndDtype) {
  const LoadOptions o = Parse({"--device", "cuda:1", "--dtype=bfloat16"});
  EXPECT_EQ(o.device, "cuda:1");
  EXPECT_EQ(o.dtype, "bfloat16");
  const DeviceSpec spec = ParseDevice("cuda:1");
  EXPECT_TRUE(spec.cuda);
  EXPECT_EQ(spec.index, 1);
  EXPECT_FALSE(ParseDevice("cpu").cuda);
  EXPECT_TRUE(ParseDevice("auto").automatic);
  EXPECT_EQ(LoadOptions{}.device, "cpu");
}

// fission generate takes --kv-cache-dtype as serve does: bf16 rows are auto's, fp8_e4m3 the FP8
// latent cache, anything else an Error naming the flag.
TEST(LoadFlags, KvCacheDtype) {
  EXPECT_EQ(Parse({"--kv-cache-dtype", "fp8_e4m3"}).kv_cache_dtype, "fp8_e4m3");
  EXPECT_EQ(Parse({"--kv-cache-dtype=bf16"}).kv_cache_dtype, "auto");
  EXPECT_EQ(Parse({"--kv-cache-dtype", "bfloat16"}).kv_cache_dtype, "auto");
  try {
    Parse({"--kv-cache-dtype", "fp8_e5m2"});
    ADD_FAILURE() << "fp8_e5m2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cache-dtype fp8_e5m2"), std::string::npos) << e.what();
  }
}

// Without a CUDA backend in the build, or without a device on the host, --device cuda is an
// Error that says so; it never falls back to the CPU silently.
TEST(LoadFlags, CudaWithoutADeviceIsAnError) {
  if (std::system("nvidia-smi -L > /dev/null 2>&1") == 0) GTEST_SKIP() << "a GPU answers here";
  LoadOptions options;
  options.device = "cuda";
  try {
    LoadCausalLM(std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/tiny-deepseek-v3", options);
    ADD_FAILURE() << "--device cuda loaded without a device";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("no CUDA backend") != std::string::npos || what.find("CUDA devices") != std::string::npos)
        << what;
  }
}

TEST(LoadFlags, ErrorsNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tp-size", "0"}, "--tp-size expects a positive integer"},
      {{"--tp-size", "two"}, "--tp-size expects a positive integer"},
      {{"--tp-size", "4", "--attn-cp-size", "3"}, "--attn-cp-size (3) must divide --tp-size (4)"},
      {{"--nsa-prefill-cp-mode", "in-seq-split"}, "supported modes: round-robin-split"},
      {{"--load-format", "gguf"}, "--load-format 'gguf'"},
      {{"--attn-cp-size"}, "--attn-cp-size needs a value"},
      {{"--device", "tpu"}, "--device 'tpu' is not a device"},
      {{"--device", "cuda:"}, "--device 'cuda:' is not a device"},
      {{"--dtype", "float16"}, "--dtype 'float16' is not supported"},
  };
  for (const auto& [args, message] : cases) {
    try {
      Parse(args);
      ADD_FAILURE() << args[0] << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace fission::model
