// Text helpers of the chat-template built-ins, with Python str semantics.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace fission::tokenizer::jinja {

// Argument `index` (positional) or `name` (keyword), else `fallback`.
Value Arg(Args& args, std::size_t index, const char* name, Value fallback = Value());
std::vector<std::string> CodePoints(const std::string& s);
bool IsPySpace(char32_t c);
// str.strip/lstrip/rstrip; `chars` none or undefined strips whitespace.
std::string Strip(const std::string& s, const Value& chars, bool left, bool right);
// str.split(sep, maxsplit).
ValueList Split(const std::string& s, const Value& sep, std::int64_t maxsplit);
// str.replace(old, new, count); count < 0 replaces all.
std::string Replace(const std::string& s, const std::string& from, const std::string& to, std::int64_t count);
std::string Upper(const std::string& s);
std::string Capitalize(const std::string& s);
std::string Title(const std::string& s);
std::string HtmlEscape(const std::string& s);
// Jinja's indent filter.
std::string Indent(const std::string& s, const Value& width, bool first, bool blank);

}  // namespace fission::tokenizer::jinja
