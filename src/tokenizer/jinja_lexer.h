// Lexer of the chat-template Jinja subset. It applies whitespace control ({%- -%}, {{- -}},
// {#- -#}, {%+) and the trim_blocks / lstrip_blocks settings transformers uses, and removes one
// trailing newline of the source as Jinja does by default.
#pragma once

#include <string>
#include <vector>

namespace fission::tokenizer::jinja {

enum class TokenKind {
  kText,        // template text outside tags
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value holds the unescaped text
  kInt,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenKind kind;
  std::string value;
  int line = 1;
  int column = 1;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Errors throw fission::Error naming `source_name`, the line and the column.
std::vector<Token> Tokenize(const std::string& source, const std::string& source_name,
                            const LexerOptions& options = {});

}  // namespace fission::tokenizer::jinja
