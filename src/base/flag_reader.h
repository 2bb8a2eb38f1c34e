// Walks command-line arguments flag by flag, the way argparse reads them: `--flag value` or
// `--flag=value`, with underscores in flag names read as dashes (`--num_fewshot` = `--num-fewshot`).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace fission {

class FlagReader {
 public:
  explicit FlagReader(const std::vector<std::string>& args) : args_(args) {}

  // Moves to the next argument; false when none is left.
  bool Next();
  // The current flag, without any `=value`.
  const std::string& flag() const { return flag_; }
  // The current flag's value (inline or the next argument); an Error "<flag>: missing value".
  std::string Value();
  // One or more values up to the next `--flag` (argparse's nargs="+").
  std::vector<std::string> Values();

 private:
  const std::vector<std::string>& args_;
  std::size_t next_ = 0;
  std::string flag_;
  std::optional<std::string> inline_value_;
};

// `value` of `flag` as a decimal integer in [lo, hi]; an Error naming the flag and the value.
long long IntegerValue(const std::string& flag, const std::string& value, long long lo, long long hi);
// `value` of `flag` as a number (not NaN); an Error naming the flag and the value.
double NumberValue(const std::string& flag, const std::string& value);

}  // namespace fission
