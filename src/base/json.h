// JSON helpers on top of nlohmann::json: parsing with the source named in errors and bounds that
// make untrusted documents safe to handle, typed field access whose errors name the file and the
// field, and short previews of values for error messages.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace fission {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Documents nest at most this deep. Copying, printing, destroying or templating a value recurses
// once per level, so a deeper document could overflow a thread's stack: it is refused before it
// is parsed.
inline constexpr int kMaxJsonDepth = 128;

// Parses `text`. A syntax error names `source` and the byte offset; a number outside double's
// range and nesting deeper than kMaxJsonDepth are errors too. Messages quote at most a short
// prefix of what was read.
Json ParseJson(const std::string& text, const std::string& source);
OrderedJson ParseOrderedJson(const std::string& text, const std::string& source);
Json ReadJsonFile(const std::string& path);

// The byte offset where `text` first opens a level deeper than `max_depth` ('[' and '{' outside
// strings), or npos. Cheap enough to run before any parse.
std::size_t FindExcessNesting(std::string_view text, int max_depth);

// A short description of a value for error messages: numbers, booleans and null as JSON, strings
// quoted and abbreviated, arrays and objects by their size.
template <typename J>
std::string JsonPreview(const J& v) {
  if (v.is_string()) return "'" + Abbreviate(v.template get_ref<const std::string&>()) + "'";
  if (v.is_array()) return StrCat("an array of ", v.size(), " items");
  if (v.is_object()) return StrCat("an object of ", v.size(), " fields");
  return Abbreviate(v.dump());
}

// `v` as an int64 when it is exactly one: an integer in int64's range, or a number with no fraction
// inside that range (1e3, 5.0). nullopt otherwise, so no value is ever truncated or wrapped.
template <typename J>
std::optional<std::int64_t> ExactInt64(const J& v) {
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.template get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.template get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.template get<double>();
    // [-2^63, 2^63): every double in it converts exactly when it has no fraction.
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && std::trunc(d) == d)
      return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

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
