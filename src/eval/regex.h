// A small PCRE2 wrapper with the Python `re` behaviour the gsm8k metrics rely on: findall (group
// semantics included) and sub. PCRE2's `$` matches before a final newline, as Python's does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fission::eval {

class Regex {
 public:
  // Throws fission::Error naming the pattern when it does not compile.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // re.findall: per match, the whole match when the pattern has no groups, else every group
  // ("" for a group that did not take part).
  std::vector<std::vector<std::string>> FindAll(std::string_view text) const;
  // re.sub(pattern, replacement, text) with a literal replacement.
  std::string Sub(std::string_view text, std::string_view replacement) const;
  int group_count() const { return groups_; }

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  int groups_ = 0;
};

}  // namespace fission::eval
