// gsm8k's answer extraction and scoring exactly as lm-eval's task config defines them:
//   strict-match:     regex "#### (\-?[0-9\.\,]+)", first match, else "[invalid]"
//   flexible-extract: regex "(-?[$0-9.,]{2,})|(-?[0-9]+)", last match (the non-empty group),
//                     else "[invalid]"
//   exact_match:      on prediction and reference alike remove ",", "$", everything through
//                     "#### " and a trailing ".", lower-case, then compare.
#pragma once

#include <string>
#include <string_view>

namespace fission::eval {

inline constexpr std::string_view kInvalid = "[invalid]";

std::string StrictMatch(std::string_view response);
std::string FlexibleExtract(std::string_view response);
// The normalisation exact_match applies to both sides.
std::string NormalizeForExactMatch(std::string_view text);
bool ExactMatch(std::string_view prediction, std::string_view reference);

}  // namespace fission::eval
