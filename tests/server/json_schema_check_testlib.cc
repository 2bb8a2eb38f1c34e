#include "server/json_schema_check_testlib.h"

#include <regex>

namespace fission::server::testing {
namespace {

std::size_t CodePoints(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool HasType(const Json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

}  // namespace

std::string SchemaViolation(const Json& v, const Json& s, const std::string& path) {
  if (s.contains("anyOf")) {
    for (const Json& option : s["anyOf"])
      if (SchemaViolation(v, option, path).empty()) return "";
    return path + ": matches no anyOf option";
  }
  if (s.contains("enum")) {
    for (const Json& e : s["enum"])
      if (e == v) return "";
    return path + ": not in the enum";
  }
  if (s.contains("const") && s["const"] != v) return path + ": not the const";
  if (s.contains("type") && !HasType(v, s["type"].get<std::string>())) return path + ": not of type " + s["type"].dump();
  if (v.is_object()) {
    for (const Json& r : s.value("required", Json::array()))
      if (!v.contains(r.get<std::string>())) return path + ": misses " + r.dump();
    const Json props = s.value("properties", Json::object());
    for (const auto& [key, value] : v.items()) {
      if (props.contains(key)) {
        if (std::string e = SchemaViolation(value, props[key], path + "." + key); !e.empty()) return e;
      } else if (s.contains("additionalProperties") && s["additionalProperties"] == false) {
        return path + ": has the extra key " + key;
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<std::size_t>()) return path + ": too few items";
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<std::size_t>()) return path + ": too many items";
    if (s.contains("items"))
      for (std::size_t i = 0; i < v.size(); ++i)
        if (std::string e = SchemaViolation(v[i], s["items"], path + "[" + std::to_string(i) + "]"); !e.empty()) return e;
  }
  if (v.is_string()) {
    const std::string& text = v.get_ref<const std::string&>();
    if (s.contains("minLength") && CodePoints(text) < s["minLength"].get<std::size_t>()) return path + ": too short";
    if (s.contains("maxLength") && CodePoints(text) > s["maxLength"].get<std::size_t>()) return path + ": too long";
    if (s.contains("pattern") && !std::regex_search(text, std::regex(s["pattern"].get<std::string>())))
      return path + ": does not match the pattern";
  }
  if (v.is_number()) {
    if (s.contains("minimum") && v.get<double>() < s["minimum"].get<double>()) return path + ": below the minimum";
    if (s.contains("maximum") && v.get<double>() > s["maximum"].get<double>()) return path + ": above the maximum";
  }
  return "";
}

Json PersonSchema() {
  return Json::parse(R"({"type": "object", "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "color": {"enum": ["red", "green", "blue"]},
    "address": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city"],
                "additionalProperties": false},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
    "scores": {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "minItems": 1, "maxItems": 4},
    "active": {"type": "boolean"},
    "nickname": {"anyOf": [{"type": "string", "maxLength": 6}, {"type": "null"}]}},
    "required": ["name", "age", "color", "address", "scores"], "additionalProperties": false})");
}

}  // namespace fission::server::testing
