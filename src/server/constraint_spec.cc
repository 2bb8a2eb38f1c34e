#include "server/constraint_spec.h"

#include <vector>

#include "base/error.h"

namespace fission::server {
namespace {

// response_format: text (no constraint), json_object, or json_schema with its schema under
// `json_schema.schema` (OpenAI) or `schema` (SGLang's shortcut).
template <typename J>
std::optional<ConstraintSpec> FromResponseFormat(const J& format, const std::string& field) {
  if (!format.is_object()) Fail("'", field, "' must be an object");
  const std::string type = format.contains("type") && format["type"].is_string() ? format["type"].template get<std::string>() : "";
  if (type == "text") return std::nullopt;
  if (type == "json_object") return ConstraintSpec{"json_object", "", field, ""};
  if (type == "json_schema") {
    if (format.contains("json_schema") && format["json_schema"].is_object()) {
      const J& wrapper = format["json_schema"];
      if (!wrapper.contains("schema")) Fail("'", field, ".json_schema.schema' is required");
      return ConstraintSpec{"json_schema", wrapper["schema"].dump(), field + ".json_schema.schema", ""};
    }
    if (format.contains("schema")) return ConstraintSpec{"json_schema", format["schema"].dump(), field + ".schema", ""};
    Fail("'", field, ".json_schema' must be an object with a 'schema'");
  }
  if (type == "structural_tag") Fail("'", field, "' of type 'structural_tag' is not supported");
  Fail("'", field, ".type' must be text, json_object or json_schema, got '", Abbreviate(type), "'");
}

}  // namespace

template <typename J>
std::optional<ConstraintSpec> ReadConstraintFields(const J& body, const std::string& where, bool response_format) {
  std::vector<ConstraintSpec> found;
  auto present = [&](const char* key) {
    auto it = body.find(key);
    return it != body.end() && !it->is_null();
  };
  for (const char* key : {"regex", "ebnf"}) {
    if (!present(key)) continue;
    if (!body[key].is_string()) Fail("'", where, key, "' must be a string");
    found.push_back({key, body[key].template get<std::string>(), where + key, ""});
  }
  if (present("json_schema")) {
    const J& schema = body["json_schema"];
    std::string text;
    if (schema.is_string()) {
      text = schema.template get<std::string>();
    } else if (schema.is_object() || schema.is_boolean()) {
      text = schema.dump();
    } else {
      Fail("'", where, "json_schema' must be a JSON schema (an object or its JSON text)");
    }
    found.push_back({"json_schema", text, where + "json_schema", ""});
  }
  if (response_format && present("response_format"))
    if (auto spec = FromResponseFormat(body["response_format"], where + "response_format")) found.push_back(*spec);
  if (present("structural_tag")) Fail("'", where, "structural_tag' is not supported");
  if (found.size() > 1)
    Fail("only one of regex, ebnf, json_schema and response_format may constrain the output; got '", found[0].field,
         "' and '", found[1].field, "'");
  if (found.empty()) return std::nullopt;
  return found[0];
}

template std::optional<ConstraintSpec> ReadConstraintFields(const Json&, const std::string&, bool);
template std::optional<ConstraintSpec> ReadConstraintFields(const OrderedJson&, const std::string&, bool);

}  // namespace fission::server
