#include "base/flag_reader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

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

long long IntegerValue(const std::string& flag, const std::string& value, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
    Fail(flag, ": expected an integer in [", lo, ", ", hi, "], got '", value, "'");
  }
  return x;
}

double NumberValue(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const double x = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || std::isnan(x)) Fail(flag, ": expected a number, got '", value, "'");
  return x;
}

}  // namespace fission
