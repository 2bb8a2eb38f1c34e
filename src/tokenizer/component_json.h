// Small helpers to read tokenizer.json components with errors that name the component path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/json.h"

namespace fission::tokenizer {

// The "type" of a component object; `where` is its path, e.g. "tokenizer.json: pre_tokenizer".
inline std::string ComponentType(const Json& j, const std::string& where) {
  if (!j.is_object()) Fail(where, ": expected an object, got ", j.type_name());
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) Fail(where, ": missing string field \"type\"");
  return it->get<std::string>();
}

// A string-or-regex pattern object {"String": s} or {"Regex": r}.
struct PatternSpec {
  bool is_regex = false;
  std::string text;
};

inline PatternSpec ReadPattern(const Json& j, const std::string& where) {
  if (j.is_object()) {
    if (auto it = j.find("String"); it != j.end() && it->is_string()) return {false, it->get<std::string>()};
    if (auto it = j.find("Regex"); it != j.end() && it->is_string()) return {true, it->get<std::string>()};
  }
  if (j.is_string()) return {false, j.get<std::string>()};
  Fail(where, ": pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

inline std::string OptString(const Json& j, const char* key, const std::string& where, const std::string& fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) Fail(where, ": field \"", key, "\" must be a string");
  return it->get<std::string>();
}

inline bool OptBool(const Json& j, const char* key, const std::string& where, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) Fail(where, ": field \"", key, "\" must be a boolean");
  return it->get<bool>();
}

inline const Json& RequireArray(const Json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) Fail(where, ": missing array field \"", key, "\"");
  return *it;
}

// An integer field (JSON integer, not a float) or `fallback` when absent; other values fail.
inline std::int64_t IntField(const Json& j, const char* key, const std::string& where,
                             std::optional<std::int64_t> fallback = std::nullopt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (!fallback) Fail(where, ": missing integer field \"", key, "\"");
    return *fallback;
  }
  if (it->is_number_integer() && !(it->is_number_unsigned() && it->get<std::uint64_t>() > INT64_MAX)) {
    return it->get<std::int64_t>();
  }
  Fail(where, ": field \"", key, "\" must be an integer, got ", it->dump());
}

// The single code point of a one-character string field (Metaspace replacement, Strip content).
char32_t SingleChar(const std::string& s, const std::string& where, const char* field);

}  // namespace fission::tokenizer
