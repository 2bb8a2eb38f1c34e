// A small tokenizer for tests of the bench layer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace fission::serving_bench::testing {

// A tokenizer whose decode/encode round trip does not preserve length, like real BPE: ids 0..25
// are the letters, 26 is "ab" and 27 is "abc" (greedy longest match merges them back), 28 is " ",
// 29 is BOS and 30 EOS.
class FakeTokenizer : public tokenizer::Tokenizer {
 public:
  std::vector<std::int32_t> Encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<std::int32_t> ids;
    if (add_special_tokens) ids.push_back(29);
    size_t i = 0;
    while (i < text.size()) {
      if (text.substr(i, 3) == "abc") {
        ids.push_back(27);
        i += 3;
      } else if (text.substr(i, 2) == "ab") {
        ids.push_back(26);
        i += 2;
      } else if (text[i] == ' ') {
        ids.push_back(28);
        ++i;
      } else if (text.substr(i, 5) == "<bos>") {
        ids.push_back(29);
        i += 5;
      } else if (text.substr(i, 5) == "<eos>") {
        ids.push_back(30);
        i += 5;
      } else {
        // Anything outside a-z counts as one token (id 28) so any text can be measured.
        ids.push_back(text[i] >= 'a' && text[i] <= 'z' ? text[i] - 'a' : 28);
        ++i;
      }
    }
    return ids;
  }
  std::string Decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const override {
    std::string out;
    for (std::int32_t id : ids) {
      if (id < 26) {
        out += static_cast<char>('a' + id);
      } else if (id == 26) {
        out += "ab";
      } else if (id == 27) {
        out += "abc";
      } else if (id == 28) {
        out += " ";
      } else if (!skip_special_tokens) {
        out += id == 29 ? "<bos>" : "<eos>";
      }
    }
    return out;
  }
  std::int64_t vocab_size() const override { return 31; }
  std::optional<std::int32_t> TokenToId(std::string_view) const override { return std::nullopt; }
  std::optional<std::int32_t> bos_token_id() const override { return 29; }
  std::optional<std::int32_t> eos_token_id() const override { return 30; }
  std::optional<std::string> IdToToken(std::int32_t id) const override {
    if (id < 0 || id > 30) return std::nullopt;
    return Decode({id}, false);
  }
  bool IsSpecial(std::int32_t id) const override { return id == 29 || id == 30; }
  const tokenizer::TokenizerConfig& config() const override { return config_; }

 private:
  tokenizer::TokenizerConfig config_;
};


}  // namespace fission::serving_bench::testing
