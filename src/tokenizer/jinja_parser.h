// Parser of the chat-template Jinja subset: tokens to a statement tree.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_lexer.h"

namespace fission::tokenizer::jinja {

// Errors throw fission::Error naming `source_name`, the line and the column.
Body Parse(const std::vector<Token>& tokens, const std::string& source_name);

}  // namespace fission::tokenizer::jinja
