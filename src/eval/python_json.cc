#include "eval/python_json.h"

#include <charconv>
#include <cmath>

namespace fission::eval {

namespace {

// repr() of a float: the shortest round-trip digits, "1.0" for integral values, "1e-05" style
// exponents.
std::string PythonFloat(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, end);
  const size_t e = s.find('e');
  if (e == std::string::npos) {
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  std::string exp = s.substr(e + 1);
  char sign = '+';
  if (exp[0] == '-' || exp[0] == '+') {
    sign = exp[0];
    exp.erase(0, 1);
  }
  if (exp.size() < 2) exp = "0" + exp;
  return s.substr(0, e) + "e" + sign + exp;
}

void Dump(const nlohmann::ordered_json& v, int indent, int depth, std::string& out) {
  const bool pretty = indent >= 0;
  auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent * level), ' ');
  };
  if (v.is_object() || v.is_array()) {
    const bool object = v.is_object();
    if (v.empty()) {
      out += object ? "{}" : "[]";
      return;
    }
    out += object ? '{' : '[';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += pretty ? "," : ", ";
      first = false;
      if (pretty) newline(depth + 1);
      if (object) out += nlohmann::ordered_json(it.key()).dump(-1, ' ', false) + ": ";
      Dump(it.value(), indent, depth + 1, out);
    }
    if (pretty) newline(depth);
    out += object ? '}' : ']';
  } else if (v.is_number_float()) {
    out += PythonFloat(v.get<double>());
  } else if (v.is_boolean()) {
    out += v.get<bool>() ? "true" : "false";
  } else {
    // Strings (escapes as json.dumps writes them without ensure_ascii), integers and null.
    out += v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
}

}  // namespace

std::string PythonJsonDumps(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  Dump(value, indent, 0, out);
  return out;
}

}  // namespace fission::eval
