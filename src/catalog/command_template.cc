#include "catalog/command_template.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace fission::catalog {

std::string ShellQuote(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_./:=@%+,-").find(c) != std::string_view::npos;
  });
  if (plain) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string ExpandTemplate(const std::string& tmpl, const TemplateVars& vars, const std::string& what) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    const char c = tmpl[i];
    if (c == '{' && i + 1 < tmpl.size() && tmpl[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < tmpl.size() && tmpl[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      const size_t close = tmpl.find('}', i);
      if (close == std::string::npos) Fail(what, ": unclosed '{' at offset ", i, " in \"", tmpl, "\"");
      const std::string name = tmpl.substr(i + 1, close - i - 1);
      auto it = vars.find(name);
      if (it == vars.end()) {
        std::string known;
        for (const auto& [k, v] : vars) known += (known.empty() ? "" : ", ") + ("{" + k + "}");
        Fail(what, ": unknown placeholder {", name, "} (known: ", known, ")");
      }
      out += it->second.raw ? it->second.text : ShellQuote(it->second.text);
      i = close;
    } else if (c == '}') {
      Fail(what, ": unmatched '}' at offset ", i, " in \"", tmpl, "\" (write '}}' for a literal brace)");
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace fission::catalog
