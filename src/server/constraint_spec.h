// What a request asks its output to follow, as read from its fields (structured_output.h compiles
// it). SGLang's fields: `regex`, `ebnf`, `json_schema` (in /generate's sampling_params and as
// extra fields of the OpenAI routes) and `response_format`; forced tool calls come from
// `tool_choice`. At most one per request.
#pragma once

#include <optional>
#include <string>

#include "base/json.h"

namespace fission::server {

struct ConstraintSpec {
  std::string kind;   // "regex", "ebnf", "json_schema", "json_object" or "tool_calls"
  std::string text;   // the regex, the grammar, the schema's JSON, or the tool calls' description
  std::string field;  // the request field it came from, named in errors
  // Free text up to this tag comes first (a reasoning block the chat template opened); empty: none.
  std::string reasoning_end;
};

// Reads `regex`, `ebnf`, `json_schema` (a JSON string or an object) and, when `response_format`
// is true, `response_format` from `body`. More than one, or a malformed one, is an Error naming
// the fields; `where` prefixes the field names ("sampling_params.").
template <typename J>
std::optional<ConstraintSpec> ReadConstraintFields(const J& body, const std::string& where, bool response_format);

}  // namespace fission::server
