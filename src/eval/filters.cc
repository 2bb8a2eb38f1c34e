#include "eval/filters.h"

#include <algorithm>
#include <cctype>

#include "eval/regex.h"

namespace fission::eval {

namespace {

// lm-eval's RegexFilter: findall, pick a match, take its first non-empty group, strip.
std::string Extract(const Regex& regex, std::string_view response, bool last) {
  const auto matches = regex.FindAll(response);
  if (matches.empty()) return std::string(kInvalid);
  const std::vector<std::string>& m = last ? matches.back() : matches.front();
  std::string picked;
  bool found = false;
  for (const std::string& g : m) {
    if (!g.empty()) {
      picked = g;
      found = true;
      break;
    }
  }
  if (!found) return std::string(kInvalid);
  // Python's str.strip(): whitespace at both ends.
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  picked.erase(picked.begin(), std::find_if(picked.begin(), picked.end(), not_space));
  picked.erase(std::find_if(picked.rbegin(), picked.rend(), not_space).base(), picked.end());
  return picked;
}

}  // namespace

std::string StrictMatch(std::string_view response) {
  static const Regex kStrict("#### (\\-?[0-9\\.\\,]+)");
  return Extract(kStrict, response, /*last=*/false);
}

std::string FlexibleExtract(std::string_view response) {
  static const Regex kFlexible("(-?[$0-9.,]{2,})|(-?[0-9]+)");
  return Extract(kFlexible, response, /*last=*/true);
}

std::string NormalizeForExactMatch(std::string_view text) {
  static const Regex kIgnore[] = {Regex(","), Regex("\\$"), Regex("(?s).*#### "), Regex("\\.$")};
  std::string s(text);
  for (const Regex& r : kIgnore) s = r.Sub(s, "");
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ExactMatch(std::string_view prediction, std::string_view reference) {
  return NormalizeForExactMatch(prediction) == NormalizeForExactMatch(reference);
}

}  // namespace fission::eval
