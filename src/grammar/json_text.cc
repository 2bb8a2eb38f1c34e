#include "grammar/json_text.h"

#include "base/error.h"
#include "grammar/regex_parser.h"

namespace fission::grammar {
namespace {

// The escape a JSON string writes for a character that cannot appear raw.
std::string JsonEscape(char32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  static const char kHex[] = "0123456789abcdef";
  return StrCat("\\u00", kHex[c >> 4], kHex[c & 15]);
}

bool NeedsEscape(char32_t c) { return c < 0x20 || c == '"' || c == '\\'; }

}  // namespace

Grammar::Node JsonWhitespace(Grammar* g) {
  ByteSet ws;
  for (char c : {' ', '\t', '\n', '\r'}) ws.Add(static_cast<std::uint8_t>(c));
  return g->Repeat(g->Bytes(ws), 0, kMaxJsonWhitespace);
}

Grammar::Node JsonStringChar(Grammar* g) {
  const Grammar::Node plain = g->CodePoints({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodePoint}});
  const Grammar::Node escape = ParseRegex(R"(\\(["\\/bfnrt]|u([0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})))", g);
  return g->Alt({plain, escape});
}

Grammar::Node JsonString(Grammar* g, std::int32_t min_chars, std::int32_t max_chars) {
  return g->Seq({g->Literal("\""), g->Repeat(JsonStringChar(g), min_chars, max_chars), g->Literal("\"")});
}

Grammar::Node JsonStringChars(const std::vector<CodePointRange>& ranges, Grammar* g) {
  std::vector<CodePointRange> plain;
  std::vector<Grammar::Node> options;
  for (const auto& [lo, hi] : ranges) {
    for (char32_t c = lo; c <= hi && c < 0x5D; ++c)  // the escaped characters are all below ']'
      if (NeedsEscape(c)) options.push_back(g->Literal(JsonEscape(c)));
    // The raw part: the range without the escaped characters.
    char32_t start = lo;
    for (char32_t c = lo; c <= hi && c < 0x5D; ++c) {
      if (!NeedsEscape(c)) continue;
      if (c > start) plain.emplace_back(start, c - 1);
      start = c + 1;
    }
    if (start <= hi) plain.emplace_back(start, hi);
  }
  if (!plain.empty()) options.insert(options.begin(), g->CodePoints(std::move(plain)));
  if (options.empty()) Fail("a character class matches no character");
  return g->Alt(std::move(options));
}

Grammar::Node JsonNumber(Grammar* g) { return ParseRegex(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)", g); }

Grammar::Node JsonInteger(Grammar* g) { return ParseRegex(R"(-?(0|[1-9][0-9]*))", g); }

std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (NeedsEscape(c)) {
      out += JsonEscape(c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
  return out;
}

std::int32_t JsonValueRule(Grammar* g) {
  if (const std::int32_t found = g->FindRule("json_value"); found >= 0) return found;
  const std::int32_t value = g->AddRule("json_value");
  const std::int32_t object = g->AddRule("json_object");
  const std::int32_t array = g->AddRule("json_array");
  auto ws = [g] { return JsonWhitespace(g); };
  auto sep = [&](const char* c) { return g->Seq({ws(), g->Literal(c), ws()}); };
  g->Define(value, g->Alt({g->Ref(object), g->Ref(array), JsonString(g), JsonNumber(g), g->Literal("true"),
                           g->Literal("false"), g->Literal("null")}));
  auto member = [&] { return g->Seq({JsonString(g), sep(":"), g->Ref(value)}); };
  g->Define(object, g->Seq({g->Literal("{"), ws(),
                            g->Optional(g->Seq({member(), g->Star(g->Seq({sep(","), member()})), ws()})),
                            g->Literal("}")}));
  g->Define(array, g->Seq({g->Literal("["), ws(),
                           g->Optional(g->Seq({g->Ref(value), g->Star(g->Seq({sep(","), g->Ref(value)})), ws()})),
                           g->Literal("]")}));
  return value;
}

std::int32_t JsonObjectRule(Grammar* g) {
  JsonValueRule(g);
  return g->FindRule("json_object");
}

Grammar JsonObjectGrammar() {
  Grammar g;
  const std::int32_t root = g.AddRule("root");
  g.Define(root, g.Ref(JsonObjectRule(&g)));
  g.set_root(root);
  return g;
}

}  // namespace fission::grammar
