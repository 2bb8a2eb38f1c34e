// The grammar of forced tool calls (tool_choice "required" or a named function): the markup of the
// --tool-call-parser with each call's arguments following its tool's `parameters` schema, so the
// parser always finds valid calls.
//
// Formats whose arguments are one JSON object: `qwen` (Hermes: <tool_call>\n{"name": "NAME",
// "arguments": ARGS}\n</tool_call>, calls separated by a newline), `deepseekv3` (the fenced ```json
// arguments inside the <｜tool▁calls▁begin｜> block) and `deepseekv31` (bare arguments). Formats
// that tag each argument: `glm45` / `glm47` (<arg_key>K</arg_key><arg_value>V</arg_value>, with and
// without newlines) and `deepseekv32` / `deepseekv4` (DSML parameter tags inside a function_calls /
// tool_calls block). In those a string-only parameter is free text up to its closing tag (or one
// of its enum strings; other string keywords such as pattern are not enforced there), every other
// parameter is JSON following its schema; declared properties come in the schema's order, the
// required ones always, the others optionally.
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
