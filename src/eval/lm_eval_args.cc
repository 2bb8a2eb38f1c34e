#include "eval/lm_eval_args.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "base/error.h"

namespace fission::eval {

namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// handle_arg_string.
nlohmann::ordered_json ArgValue(const std::string& v) {
  if (Lower(v) == "true") return true;
  if (Lower(v) == "false") return false;
  if (!v.empty() && std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return std::stoll(v);
  }
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (!v.empty() && end == v.c_str() + v.size()) return d;
  return v;
}

}  // namespace

nlohmann::ordered_json ParseArgString(const std::string& text) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  size_t start = 0;
  const std::string s = Trim(text);
  while (start <= s.size() && !s.empty()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = s.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) Fail("'", item, "' in '", text, "' is not KEY=VALUE");
    out[Trim(item.substr(0, eq))] = ArgValue(Trim(item.substr(eq + 1)));
  }
  return out;
}

nlohmann::ordered_json ParseGenKwargs(const std::string& text) {
  const std::string s = Trim(text);
  if (!s.empty() && s[0] == '{') {
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(s);
    } catch (const nlohmann::ordered_json::exception& e) {
      Fail("--gen_kwargs: not valid JSON: ", e.what());
    }
    if (!j.is_object()) Fail("--gen_kwargs: expected a JSON object");
    return j;
  }
  return ParseArgString(s);
}

}  // namespace fission::eval
