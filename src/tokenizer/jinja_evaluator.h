// Evaluator of the chat-template Jinja subset: renders a parsed template with a context.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_value.h"

namespace fission::tokenizer::jinja {

// Renders `body`. Runtime errors throw fission::Error naming `source_name`, line and column.
std::string Render(const Body& body, const std::unordered_map<std::string, Value>& context,
                   const std::string& source_name);

}  // namespace fission::tokenizer::jinja
