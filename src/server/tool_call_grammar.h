// The grammar of forced tool calls (tool_choice "required" or a named function): the markup of the
// --tool-call-parser with each call's arguments following its tool's `parameters` schema, so the
// parser always finds valid calls.
//
// Formats: `qwen` (Hermes: <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>, calls
// separated by a newline), `deepseekv3` (the fenced ```json arguments inside the
// <｜tool▁calls▁begin｜> block) and `deepseekv31` (bare arguments). The other parsers write
// arguments as tagged values (glm45, glm47, deepseekv4): asking for one is an Error saying so.
#pragma once

#include <string>

#include "base/json.h"
#include "grammar/grammar.h"

namespace fission::server {

// The parsers whose calls can be forced.
bool ToolCallGrammarSupports(const std::string& parser);

// `description`: {"parser": NAME, "tools": [{"name", "parameters"}], "name": the one function
// (or null: any of the tools), "parallel": several calls allowed}. An Error names the tool whose
// parameters schema is unsupported.
grammar::Grammar ToolCallGrammar(const OrderedJson& description);

}  // namespace fission::server
