#include "eval/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/error.h"

namespace fission::eval {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern) : code_(std::make_unique<Code>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), 0, &error, &offset, nullptr);
  if (!code_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    Fail("regex '", pattern, "' at offset ", offset, ": ", reinterpret_cast<const char*>(message));
  }
  std::uint32_t count = 0;
  pcre2_pattern_info(code_->code, PCRE2_INFO_CAPTURECOUNT, &count);
  groups_ = static_cast<int>(count);
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

namespace {

// Calls on_match(ovector) for each non-overlapping match, left to right, as Python scans.
template <typename F>
void ForEachMatch(pcre2_code* code, std::string_view text, F&& on_match) {
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  PCRE2_SIZE start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, 0, data, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
    on_match(ov);
    // An empty match moves one position on, so the scan always advances.
    start = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
  }
  pcre2_match_data_free(data);
}

}  // namespace

std::vector<std::vector<std::string>> Regex::FindAll(std::string_view text) const {
  std::vector<std::vector<std::string>> out;
  ForEachMatch(code_->code, text, [&](const PCRE2_SIZE* ov) {
    std::vector<std::string> groups;
    if (groups_ == 0) {
      groups.emplace_back(text.substr(ov[0], ov[1] - ov[0]));
    } else {
      for (int g = 1; g <= groups_; ++g) {
        const PCRE2_SIZE b = ov[2 * g], e = ov[2 * g + 1];
        groups.emplace_back(b == PCRE2_UNSET ? std::string() : std::string(text.substr(b, e - b)));
      }
    }
    out.push_back(std::move(groups));
  });
  return out;
}

std::string Regex::Sub(std::string_view text, std::string_view replacement) const {
  std::string out;
  size_t copied = 0;
  ForEachMatch(code_->code, text, [&](const PCRE2_SIZE* ov) {
    out.append(text.substr(copied, ov[0] - copied));
    out.append(replacement);
    copied = ov[1];
  });
  out.append(text.substr(copied));
  return out;
}

}  // namespace fission::eval
