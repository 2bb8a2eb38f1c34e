// A compiled PCRE2 pattern (UTF, Unicode properties, JIT) that lists all non-overlapping matches,
// as the reference's Split pre-tokenizer and Replace normalizer consume them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fission::tokenizer {

class Regex {
 public:
  // `where` names the component in the error when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of all matches in `text` (valid UTF-8), left to right.
  // Empty matches are skipped.
  void FindAll(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>* matches) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

}  // namespace fission::tokenizer
