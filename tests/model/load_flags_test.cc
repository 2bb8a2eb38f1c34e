#include <gtest/gtest.h>

#include "model/load_flags.h"

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

TEST(LoadFlags, ErrorsNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tp-size", "0"}, "--tp-size expects a positive integer"},
      {{"--tp-size", "two"}, "--tp-size expects a positive integer"},
      {{"--tp-size", "4", "--attn-cp-size", "3"}, "--attn-cp-size (3) must divide --tp-size (4)"},
      {{"--nsa-prefill-cp-mode", "in-seq-split"}, "supported modes: round-robin-split"},
      {{"--load-format", "gguf"}, "--load-format 'gguf'"},
      {{"--attn-cp-size"}, "--attn-cp-size needs a value"},
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
