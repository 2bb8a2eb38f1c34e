// JSON text as grammar expressions: whitespace, strings, numbers, and any value (recursive rules).
// Shared by the JSON schema compiler, the json_object format and the tool-call formats.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace fission::grammar {

// Whitespace between JSON tokens: at most this many of space, tab, newline and carriage return,
// so that a model cannot fill its whole budget with it.
inline constexpr std::int32_t kMaxJsonWhitespace = 20;

Grammar::Node JsonWhitespace(Grammar* g);
// One character of a JSON string: any character but '"', '\' and controls, or an escape
// (\uXXXX escapes of surrogates are excluded, so every string decodes).
Grammar::Node JsonStringChar(Grammar* g);
// A quoted string of [min_chars, max_chars] characters (max -1: unbounded).
Grammar::Node JsonString(Grammar* g, std::int32_t min_chars = 0, std::int32_t max_chars = Grammar::kUnbounded);
// One character of `ranges` as it is written inside a JSON string (an escape for '"', '\' and
// control characters, the character itself otherwise).
Grammar::Node JsonStringChars(const std::vector<CodePointRange>& ranges, Grammar* g);
Grammar::Node JsonNumber(Grammar* g);
Grammar::Node JsonInteger(Grammar* g);
// `text` written as a JSON string literal (quotes included), as the grammar's canonical form.
std::string JsonQuote(std::string_view text);
// The rule of any JSON value (and its object and array rules), added to `g` once.
std::int32_t JsonValueRule(Grammar* g);
std::int32_t JsonObjectRule(Grammar* g);
// A grammar of any JSON object (response_format json_object).
Grammar JsonObjectGrammar();

}  // namespace fission::grammar
