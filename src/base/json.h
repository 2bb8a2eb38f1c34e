// JSON helpers on top of nlohmann::json: parsing with the source named in errors, and typed field
// access whose errors name the file and the field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/error.h"

namespace fission {

using Json = nlohmann::json;

// Parses `text`; a syntax error names `source` and the byte offset.
Json ParseJson(const std::string& text, const std::string& source);
Json ReadJsonFile(const std::string& path);

// Typed access to object fields; `where` names the object in errors (for example "config.json").
const Json& RequireField(const Json& object, const std::string& key, const std::string& where);
std::int64_t GetInt(const Json& object, const std::string& key, const std::string& where);
std::int64_t GetInt(const Json& object, const std::string& key, const std::string& where, std::int64_t fallback);
double GetDouble(const Json& object, const std::string& key, const std::string& where);
double GetDouble(const Json& object, const std::string& key, const std::string& where, double fallback);
bool GetBool(const Json& object, const std::string& key, const std::string& where, bool fallback);
std::string GetString(const Json& object, const std::string& key, const std::string& where);
std::string GetString(const Json& object, const std::string& key, const std::string& where,
                      const std::string& fallback);
// Absent or null -> nullopt.
std::optional<std::int64_t> GetOptionalInt(const Json& object, const std::string& key, const std::string& where);

}  // namespace fission
