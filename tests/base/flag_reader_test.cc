#include "base/flag_reader.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace fission {
namespace {

TEST(FlagReader, ValuesInlineSeparateAndSeveral) {
  const std::vector<std::string> args = {"--num_fewshot", "3", "--model=demo", "--metric-percentiles", "50", "99",
                                         "--help"};
  FlagReader r(args);
  ASSERT_TRUE(r.Next());
  EXPECT_EQ(r.flag(), "--num-fewshot");
  EXPECT_EQ(r.Value(), "3");
  ASSERT_TRUE(r.Next());
  EXPECT_EQ(r.flag(), "--model");
  EXPECT_EQ(r.Value(), "demo");
  ASSERT_TRUE(r.Next());
  EXPECT_EQ(r.Values(), (std::vector<std::string>{"50", "99"}));
  ASSERT_TRUE(r.Next());
  EXPECT_EQ(r.flag(), "--help");
  EXPECT_FALSE(r.Next());
}

TEST(FlagReader, MissingValuesNameTheFlag) {
  const std::vector<std::string> args = {"--port"};
  FlagReader r(args);
  ASSERT_TRUE(r.Next());
  try {
    r.Value();
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--port: missing value");
  }
  const std::vector<std::string> several = {"--goodput", "--seed", "1"};
  FlagReader s(several);
  ASSERT_TRUE(s.Next());
  EXPECT_THROW(s.Values(), Error);
}

}  // namespace
}  // namespace fission
