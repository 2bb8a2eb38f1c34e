#include "tokenizer/deepseek_encoding_testlib.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "tokenizer/corpus_testlib.h"
#include "tokenizer/test_paths.h"

namespace fission::tokenizer::testing {

ordered_json EncodingFixture(const std::string& file) { return ordered_json::parse(ReadFile(FixtureDir() + "/" + file)); }

ChatRenderOptions RequestOptions(const ordered_json& c) {
  ChatRenderOptions o;
  o.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  o.tools = c["tools"];
  o.extra = c["chat_template_kwargs"];
  return o;
}

void ExpectMatchesReference(const ordered_json& fixture, const std::function<std::string(const ordered_json&)>& render,
                            int min_outputs, int min_errors) {
  int outputs = 0, errors = 0;
  for (const ordered_json& c : fixture["cases"]) {
    const std::string name = c["name"].get<std::string>();
    if (c.contains("error")) {
      EXPECT_THROW(render(c), Error) << name << "\nreference: " << c["error"];
      ++errors;
      continue;
    }
    try {
      EXPECT_EQ(render(c), c["output"].get<std::string>()) << name;
    } catch (const Error& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
    ++outputs;
  }
  EXPECT_GE(outputs, min_outputs);
  EXPECT_GE(errors, min_errors);
}

void ExpectEncoderMatchesShapedRequests(const ordered_json& fixture,
                                        const std::function<std::string(const ordered_json&)>& encode, int min) {
  int n = 0;
  for (const ordered_json& c : fixture["cases"]) {
    if (c["kind"] != "request" || c.contains("error")) continue;
    std::string expected = c["output"].get<std::string>();
    if (!c["add_generation_prompt"].get<bool>()) {
      // The continued assistant text follows the encoding; the encoder alone stops before it.
      const std::string tail = c["messages"].back()["content"].get<std::string>();
      ASSERT_EQ(expected.substr(expected.size() - tail.size()), tail);
      expected.resize(expected.size() - tail.size());
    }
    EXPECT_EQ(encode(c), expected) << c["name"];
    ++n;
  }
  EXPECT_GE(n, min);
}

}  // namespace fission::tokenizer::testing
