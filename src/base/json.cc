#include "base/json.h"

#include <cstdint>

#include "base/mapped_file.h"

namespace fission {

Json ParseJson(const std::string& text, const std::string& source) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    Fail(source, ": invalid JSON at byte ", e.byte, ": ", e.what());
  } catch (const Json::exception& e) {  // e.g. a number too large for a double
    Fail(source, ": invalid JSON: ", e.what());
  }
}

Json ReadJsonFile(const std::string& path) { return ParseJson(ReadFile(path), path); }

const Json& RequireField(const Json& object, const std::string& key, const std::string& where) {
  if (!object.is_object()) Fail(where, ": expected a JSON object");
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) Fail(where, ": missing field '", key, "'");
  return *it;
}

namespace {
const Json* Find(const Json& object, const std::string& key, const std::string& where) {
  if (!object.is_object()) Fail(where, ": expected a JSON object");
  auto it = object.find(key);
  return (it == object.end() || it->is_null()) ? nullptr : &*it;
}

std::int64_t AsInt(const Json& v, const std::string& key, const std::string& where) {
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    Fail(where, ": field '", key, "' is too large: ", v.dump());
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // Only whole numbers inside int64's range convert; anything else would be undefined.
    if (d >= -9.2e18 && d <= 9.2e18 && d == static_cast<double>(static_cast<std::int64_t>(d)))
      return static_cast<std::int64_t>(d);
  }
  Fail(where, ": field '", key, "' must be an integer, got ", v.dump());
}

double AsDouble(const Json& v, const std::string& key, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  Fail(where, ": field '", key, "' must be a number, got ", v.dump());
}
}  // namespace

std::int64_t GetInt(const Json& object, const std::string& key, const std::string& where) {
  return AsInt(RequireField(object, key, where), key, where);
}
std::int64_t GetInt(const Json& object, const std::string& key, const std::string& where, std::int64_t fallback) {
  const Json* v = Find(object, key, where);
  return v ? AsInt(*v, key, where) : fallback;
}
double GetDouble(const Json& object, const std::string& key, const std::string& where) {
  return AsDouble(RequireField(object, key, where), key, where);
}
double GetDouble(const Json& object, const std::string& key, const std::string& where, double fallback) {
  const Json* v = Find(object, key, where);
  return v ? AsDouble(*v, key, where) : fallback;
}
bool GetBool(const Json& object, const std::string& key, const std::string& where, bool fallback) {
  const Json* v = Find(object, key, where);
  if (!v) return fallback;
  if (!v->is_boolean()) Fail(where, ": field '", key, "' must be true or false, got ", v->dump());
  return v->get<bool>();
}
std::string GetString(const Json& object, const std::string& key, const std::string& where) {
  const Json& v = RequireField(object, key, where);
  if (!v.is_string()) Fail(where, ": field '", key, "' must be a string, got ", v.dump());
  return v.get<std::string>();
}
std::string GetString(const Json& object, const std::string& key, const std::string& where,
                      const std::string& fallback) {
  const Json* v = Find(object, key, where);
  if (!v) return fallback;
  if (!v->is_string()) Fail(where, ": field '", key, "' must be a string, got ", v->dump());
  return v->get<std::string>();
}
std::optional<std::int64_t> GetOptionalInt(const Json& object, const std::string& key, const std::string& where) {
  const Json* v = Find(object, key, where);
  if (!v) return std::nullopt;
  return AsInt(*v, key, where);
}

}  // namespace fission
