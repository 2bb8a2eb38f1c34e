#include "tokenizer/jinja_util.h"

#include <algorithm>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer::jinja {

// Argument `index` (positional) or `name` (keyword), else `fallback`.
Value Arg(Args& args, std::size_t index, const char* name, Value fallback) {
  for (auto& [k, v] : args.keyword) {
    if (k == name) return v;
  }
  if (index < args.positional.size()) return args.positional[index];
  return fallback;
}

std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t begin = i;
    NextCodePoint(s, &i);
    out.push_back(s.substr(begin, i - begin));
  }
  return out;
}

bool IsPySpace(char32_t c) { return IsWhitespace(c) || (c >= 0x1C && c <= 0x1F); }

std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<std::string> cps = CodePoints(s);
  auto strip_it = [&](const std::string& cp) {
    if (chars.is_none() || chars.is_undefined()) {
      std::size_t p = 0;
      return IsPySpace(NextCodePoint(cp, &p));
    }
    return chars.as_string().find(cp) != std::string::npos;
  };
  std::size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  std::string out;
  for (std::size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

ValueList Split(const std::string& s, const Value& sep, std::int64_t maxsplit) {
  ValueList out;
  if (sep.is_none() || sep.is_undefined()) {
    std::vector<std::string> cps = CodePoints(s);
    std::size_t i = 0;
    auto space = [&](std::size_t k) {
      std::size_t p = 0;
      return IsPySpace(NextCodePoint(cps[k], &p));
    };
    while (true) {
      while (i < cps.size() && space(i)) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) >= maxsplit) {
        std::string rest;
        for (std::size_t k = i; k < cps.size(); ++k) rest += cps[k];
        // Python strips trailing whitespace of the remainder only when splitting further.
        out.emplace_back(rest);
        break;
      }
      std::string word;
      while (i < cps.size() && !space(i)) word += cps[i++];
      out.emplace_back(word);
    }
    return out;
  }
  const std::string& d = sep.as_string();
  if (d.empty()) Fail("split: empty separator");
  std::size_t prev = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) >= maxsplit) break;
    std::size_t p = s.find(d, prev);
    if (p == std::string::npos) break;
    out.emplace_back(s.substr(prev, p - prev));
    prev = p + d.size();
  }
  out.emplace_back(s.substr(prev));
  return out;
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  std::string out;
  if (from.empty()) {
    std::vector<std::string> cps = CodePoints(s);
    std::int64_t n = 0;
    for (const std::string& cp : cps) {
      if (count < 0 || n < count) out += to, ++n;
      out += cp;
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::size_t prev = 0;
  std::int64_t n = 0;
  for (std::size_t p = s.find(from); p != std::string::npos && (count < 0 || n < count); p = s.find(from, prev)) {
    out.append(s, prev, p - prev);
    out += to;
    prev = p + from.size();
    ++n;
  }
  out.append(s, prev, std::string::npos);
  return out;
}

std::string Upper(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c -= 32;
  }
  return out;
}

std::string Capitalize(const std::string& s) {
  std::string out = ToLower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] -= 32;
  return out;
}

std::string Title(const std::string& s) {
  std::string out;
  bool boundary = true;
  for (char c : s) {
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alpha) {
      out.push_back(boundary ? (c >= 'a' ? c - 32 : c) : (c <= 'Z' ? c + 32 : c));
      boundary = false;
    } else {
      out.push_back(c);
      boundary = !((c >= '0' && c <= '9') || static_cast<unsigned char>(c) >= 0x80 || c == '\'');
    }
  }
  return out;
}


std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string Indent(const std::string& s, const Value& width, bool first, bool blank) {
  std::string pad = width.is_string() ? width.as_string() : std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, width.as_int())), ' ');
  std::vector<std::string> lines;
  std::string text = s + "\n";
  std::size_t prev = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || text[i] == '\r') {
      lines.push_back(text.substr(prev, i - prev));
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      prev = i + 1;
    }
  }
  if (prev < text.size()) lines.push_back(text.substr(prev));
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    bool indent_line = (i > 0 || first) && (blank || !lines[i].empty());
    if (indent_line) out += pad;
    out += lines[i];
  }
  return out;
}

}  // namespace fission::tokenizer::jinja
