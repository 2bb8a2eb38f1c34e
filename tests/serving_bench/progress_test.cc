// The progress output: a bar on a terminal, a line per tenth elsewhere.
#include "serving_bench/progress.h"

#include <gtest/gtest.h>

#include <sstream>

namespace fission::serving_bench {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(ProgressTest, WithoutATerminalOneLinePerTenth) {
  std::ostringstream err;
  ProgressReporter p(err, /*terminal=*/false);
  for (int done = 0; done <= 40; ++done) {
    p.Update(done, 40);
    p.Update(done, 40);  // the runner repeats counts ten times a second
  }
  p.Finish();
  const std::string text = err.str();
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(Count(text, "\n"), 11) << text;  // 0%, 10%, ..., 100%
  EXPECT_NE(text.find("progress: 0/40 requests (0%)"), std::string::npos) << text;
  EXPECT_NE(text.find("progress: 20/40 requests (50%)"), std::string::npos) << text;
  EXPECT_NE(text.find("progress: 40/40 requests (100%)"), std::string::npos) << text;
}

TEST(ProgressTest, OnATerminalABarRedrawnInPlace) {
  std::ostringstream err;
  ProgressReporter p(err, /*terminal=*/true);
  p.Update(3, 10);
  p.Update(10, 10);
  p.Finish();
  const std::string text = err.str();
  EXPECT_EQ(Count(text, "\r"), 2);
  EXPECT_NE(text.find(" 30%|"), std::string::npos) << text;
  EXPECT_NE(text.find("| 10/10 ["), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(ProgressBar(5, 10, 2.0).substr(0, 5), " 50%|");
}

}  // namespace
}  // namespace fission::serving_bench
