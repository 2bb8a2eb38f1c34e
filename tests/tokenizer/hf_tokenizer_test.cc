#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/test_paths.h"

namespace fission::tokenizer {
namespace {

using testing::DeepSeekDir;
using testing::QwenDir;

class RealTokenizers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    deepseek_ = Tokenizer::Load(DeepSeekDir()).release();
    qwen_ = Tokenizer::Load(QwenDir()).release();
  }
  static void TearDownTestSuite() {
    delete deepseek_;
    delete qwen_;
  }
  static Tokenizer* deepseek_;
  static Tokenizer* qwen_;
};
Tokenizer* RealTokenizers::deepseek_ = nullptr;
Tokenizer* RealTokenizers::qwen_ = nullptr;

TEST_F(RealTokenizers, Smoke) {
  for (Tokenizer* t : {deepseek_, qwen_}) {
    auto ids = t->Encode("Hello world! 12345 你好", false);
    std::string s;
    for (auto id : ids) s += std::to_string(id) + ",";
    std::cout << s << "\n" << t->Decode(ids) << "\n";
  }
}

}  // namespace
}  // namespace fission::tokenizer
