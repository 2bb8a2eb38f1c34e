#include "base/json.h"

#include <cstdint>

#include "base/mapped_file.h"

namespace fission {

std::size_t FindExcessNesting(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, a quote included
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

namespace {

template <typename J>
J Parse(const std::string& text, const std::string& source) {
  const std::size_t deep = FindExcessNesting(text, kMaxJsonDepth);
  if (deep != std::string_view::npos)
    Fail(source, ": JSON nested deeper than ", kMaxJsonDepth, " levels at byte ", deep);
  try {
    return J::parse(text);
  } catch (const typename J::parse_error& e) {
    // nlohmann's message quotes the token it read, which may be most of the text.
    Fail(source, ": invalid JSON at byte ", e.byte, ": ", Abbreviate(e.what(), 200));
  } catch (const typename J::exception& e) {  // a number too large for a double
    Fail(source, ": invalid JSON: ", Abbreviate(e.what(), 200));
  }
}

}  // namespace

Json ParseJson(const std::string& text, const std::string& source) { return Parse<Json>(text, source); }

OrderedJson ParseOrderedJson(const std::string& text, const std::string& source) {
  return Parse<OrderedJson>(text, source);
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
  if (const std::optional<std::int64_t> i = ExactInt64(v)) return *i;
  if (v.is_number()) Fail(where, ": field '", key, "' must be an integer in int64's range, got ", JsonPreview(v));
  Fail(where, ": field '", key, "' must be an integer, got ", JsonPreview(v));
}

double AsDouble(const Json& v, const std::string& key, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  Fail(where, ": field '", key, "' must be a number, got ", JsonPreview(v));
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
  if (!v->is_boolean()) Fail(where, ": field '", key, "' must be true or false, got ", JsonPreview(*v));
  return v->get<bool>();
}
std::string GetString(const Json& object, const std::string& key, const std::string& where) {
  const Json& v = RequireField(object, key, where);
  if (!v.is_string()) Fail(where, ": field '", key, "' must be a string, got ", JsonPreview(v));
  return v.get<std::string>();
}
std::string GetString(const Json& object, const std::string& key, const std::string& where,
                      const std::string& fallback) {
  const Json* v = Find(object, key, where);
  if (!v) return fallback;
  if (!v->is_string()) Fail(where, ": field '", key, "' must be a string, got ", JsonPreview(*v));
  return v->get<std::string>();
}
std::optional<std::int64_t> GetOptionalInt(const Json& object, const std::string& key, const std::string& where) {
  const Json* v = Find(object, key, where);
  if (!v) return std::nullopt;
  return AsInt(*v, key, where);
}

}  // namespace fission
