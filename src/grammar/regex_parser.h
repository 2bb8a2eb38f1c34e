// Regular expressions (SGLang's `regex`, JSON schema `pattern`) into grammar expressions.
//
// The syntax is ECMAScript's, which JSON schema uses, without what is not regular: literals and
// UTF-8 text, `.` (any character but a line terminator), classes `[a-z]` `[^...]` with `\d \w \s`
// and their negations, escapes (`\n \t \r \f \v \0 \xHH \uHHHH \u{H...}` and escaped punctuation),
// groups `(...)` `(?:...)` `(?<name>...)`, alternation, and the quantifiers `* + ? {n} {n,} {n,m}`
// (a lazy `?` after one matches the same language). The whole text must match: `^` at the start
// and `$` at the end are accepted and mean nothing more. Backreferences, lookaround, word
// boundaries, flags and Unicode property classes are an Error naming them and their offset.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace fission::grammar {

struct RegexOptions {
  // Characters are written as they appear inside a JSON string: `"`, `\` and control characters
  // as their escapes (JSON schema `pattern` applies to the decoded string).
  bool json_string = false;
};

// The regex as an expression of `g`; Error names the problem and its offset.
Grammar::Node ParseRegex(std::string_view pattern, Grammar* g, const RegexOptions& options = {});
// A grammar whose root is the regex.
Grammar RegexGrammar(std::string_view pattern);

}  // namespace fission::grammar
