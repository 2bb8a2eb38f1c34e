#include "base/flag_reader.h"

#include <algorithm>

#include "base/error.h"

namespace fission {

bool FlagReader::Next() {
  if (next_ >= args_.size()) return false;
  flag_ = args_[next_++];
  inline_value_.reset();
  if (const std::size_t eq = flag_.find('='); flag_.rfind("--", 0) == 0 && eq != std::string::npos) {
    inline_value_ = flag_.substr(eq + 1);
    flag_.resize(eq);
  }
  std::replace(flag_.begin(), flag_.end(), '_', '-');
  return true;
}

std::string FlagReader::Value() {
  if (inline_value_) return *inline_value_;
  if (next_ >= args_.size()) Fail(flag_, ": missing value");
  return args_[next_++];
}

std::vector<std::string> FlagReader::Values() {
  std::vector<std::string> values;
  if (inline_value_) values.push_back(*inline_value_);
  while (next_ < args_.size() && args_[next_].rfind("--", 0) != 0) values.push_back(args_[next_++]);
  if (values.empty()) Fail(flag_, ": missing value");
  return values;
}

}  // namespace fission
