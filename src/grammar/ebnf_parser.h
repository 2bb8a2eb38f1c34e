// EBNF grammars (SGLang's `ebnf`, the GBNF dialect of llama.cpp that xgrammar reads) into a
// Grammar whose root is the rule `root`.
//
//   root   ::= "{" ws pair ("," ws pair)* "}"     # a comment
//   pair   ::= [a-z]+ ws ":" ws value
//   value  ::= [0-9]+ | "\"" [^"]* "\"" | "(" ws value ws ")"
//   ws     ::= [ \t\n]*
//
// Strings in double or single quotes and character classes `[...]`, `[^...]` are UTF-8 text with
// the escapes \n \r \t \\ \" \' \[ \] \- \xHH \uHHHH \UHHHHHHHH; items group with parentheses,
// alternate with `|` and repeat with `*` `+` `?` `{m}` `{m,}` `{m,n}`. A rule ends where the next
// `name ::=` begins, so rules may span lines. Rules may be recursive (left recursion included).
// An Error names the line and column of the problem.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace fission::grammar {

Grammar ParseEbnf(std::string_view text);

}  // namespace fission::grammar
