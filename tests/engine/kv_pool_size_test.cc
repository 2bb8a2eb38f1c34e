// How the engine sizes its KV pool: --max-total-tokens in host memory, --mem-fraction-static of
// the device's memory on a GPU (capped by --max-total-tokens), and an Error when nothing is left.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/engine.h"
#include "engine/fake_model_testlib.h"

namespace fission::engine {
namespace {

using testing::FakeCausalLM;

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

std::int64_t PageBytes(const FakeCausalLM& model, std::int32_t page_size) {
  return model.Memory().page_bytes(page_size);
}

TEST(KvPoolSize, HostMemoryUsesMaxTotalTokensOrItsDefault) {
  FakeCausalLM model;
  EngineConfig c;
  c.page_size = 16;
  EXPECT_EQ(Engine(&model, c).num_pages(), kDefaultMaxTotalTokens / 16);
  c.max_total_tokens = 1000;
  EXPECT_EQ(Engine(&model, c).num_pages(), 1000 / 16);
}

TEST(KvPoolSize, DeviceMemoryLeftByTheFraction) {
  FakeCausalLM model;
  // Pages are tiny, so keep the numbers small: 1 MiB free of 4 MiB total.
  model.set_device_memory(kernels::DeviceMemory{1 << 20, 4 << 20});
  EngineConfig c;
  c.page_size = 16;
  c.mem_fraction_static = 0.9;  // reserves 0.4 MiB
  const std::int64_t budget = (1 << 20) - static_cast<std::int64_t>((4 << 20) * (1.0 - 0.9));
  EXPECT_EQ(Engine(&model, c).num_pages(), budget / PageBytes(model, 16));

  c.mem_fraction_static = 0;  // the default fraction reserves more
  const std::int64_t default_budget =
      (1 << 20) - static_cast<std::int64_t>((4 << 20) * (1.0 - kDefaultMemFractionStatic));
  EXPECT_EQ(Engine(&model, c).num_pages(), default_budget / PageBytes(model, 16));
}

TEST(KvPoolSize, MaxTotalTokensCapsTheDevicePool) {
  FakeCausalLM model;
  model.set_device_memory(kernels::DeviceMemory{60 * kGiB, 140 * kGiB});
  EngineConfig c;
  c.page_size = 16;
  c.max_total_tokens = 4096;
  EXPECT_EQ(Engine(&model, c).num_pages(), 4096 / 16);
}

TEST(KvPoolSize, NoMemoryLeftIsAnErrorThatSaysWhy) {
  FakeCausalLM model;
  model.set_device_memory(kernels::DeviceMemory{10 * kGiB, 140 * kGiB});  // 0.85 reserves 21 GiB
  EngineConfig c;
  try {
    Engine engine(&model, c);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--mem-fraction-static"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("free"), std::string::npos) << e.what();
  }
}

TEST(KvPoolSize, FlagIsParsedAndChecked) {
  EngineConfig c;
  std::vector<std::string> args = {"--mem-fraction-static", "0.7"};
  std::size_t i = 0;
  ASSERT_TRUE(ParseEngineFlag(args, &i, &c));
  EXPECT_DOUBLE_EQ(c.mem_fraction_static, 0.7);
  for (const char* bad : {"0", "1.5", "-0.2", "x", ""}) {
    std::vector<std::string> a = {"--mem-fraction-static", bad};
    std::size_t j = 0;
    EXPECT_THROW(ParseEngineFlag(a, &j, &c), Error) << bad;
  }
}

}  // namespace
}  // namespace fission::engine
