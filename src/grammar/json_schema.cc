#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "base/error.h"
#include "grammar/integer_range.h"
#include "grammar/json_text.h"
#include "grammar/regex_parser.h"

namespace fission::grammar {
namespace {

const std::set<std::string>& AnnotationKeywords() {
  static const std::set<std::string> k = {"title",    "description", "default",   "examples", "$schema",
                                          "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
                                          "$defs",    "definitions", "discriminator",
                                          "contentMediaType", "contentEncoding"};
  return k;
}

const std::map<std::string, std::string>& FormatRegexes() {
  static const std::string date = R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))";
  static const std::string time = R"(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))";
  static const std::map<std::string, std::string> k = {
      {"date", date},
      {"time", time},
      {"date-time", date + "T" + time},
      {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      {"email", R"([a-zA-Z0-9._%+\-]{1,64}@[a-zA-Z0-9\-]{1,63}(\.[a-zA-Z0-9\-]{1,63}){0,8}\.[a-zA-Z]{2,24})"},
      {"ipv4", R"(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))"},
  };
  return k;
}

// Keywords each type reads; the others of that type's list are errors when present.
const std::set<std::string>& TypeKeywords(const std::string& type) {
  static const std::map<std::string, std::set<std::string>> k = {
      {"object", {"properties", "required", "additionalProperties"}},
      {"array", {"items", "prefixItems", "minItems", "maxItems"}},
      {"string", {"minLength", "maxLength", "pattern", "format"}},
      {"integer", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
      {"number", {}},
      {"boolean", {}},
      {"null", {}},
  };
  static const std::set<std::string> none;
  auto it = k.find(type);
  return it == k.end() ? none : it->second;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const OrderedJson& root, Grammar* g) : root_(root), g_(g) {}

  Grammar::Node Schema(const OrderedJson& s, const std::string& path, int depth = 0) {
    if (depth > 64) Fail("the schema nests more than 64 levels at ", Where(path));
    if (s.is_boolean()) {
      if (!s.get<bool>()) Fail("the schema 'false' matches nothing at ", Where(path));
      return g_->Ref(JsonValueRule(g_));
    }
    if (!s.is_object()) Fail("a schema must be an object or a boolean at ", Where(path));
    CheckKeywords(s, path);
    if (s.contains("$ref")) return RefTo(s, path, depth);
    if (s.contains("allOf")) return AllOf(s, path, depth);
    Grammar::Node n = -1;
    if (s.contains("anyOf") || s.contains("oneOf")) {
      n = AnyOf(s, path, depth);
    } else if (s.contains("const")) {
      n = g_->Literal(s["const"].dump());
    } else if (s.contains("enum")) {
      n = Enum(s, path);
    } else {
      n = Typed(s, path, depth);
    }
    if (s.contains("nullable") && s["nullable"].is_boolean() && s["nullable"].get<bool>())
      n = g_->Alt({n, g_->Literal("null")});
    return n;
  }

 private:
  static std::string Where(const std::string& path) { return "#" + path; }
  static std::string Escape(const std::string& key) {
    std::string out;
    for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return out;
  }

  void CheckKeywords(const OrderedJson& s, const std::string& path) {
    static const std::set<std::string> common = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "nullable"};
    for (const auto& [key, value] : s.items()) {
      if (common.contains(key) || AnnotationKeywords().contains(key)) continue;
      bool known = false;
      for (const char* t : {"object", "array", "string", "integer"}) known |= TypeKeywords(t).contains(key);
      if (!known) Fail("unsupported JSON schema keyword '", Abbreviate(key), "' at ", Where(path));
    }
  }

  Grammar::Node RefTo(const OrderedJson& s, const std::string& path, int depth) {
    if (!s["$ref"].is_string()) Fail("'$ref' must be a string at ", Where(path));
    for (const auto& [key, value] : s.items())
      if (key != "$ref" && !AnnotationKeywords().contains(key))
        Fail("'$ref' with the sibling keyword '", Abbreviate(key), "' is not supported at ", Where(path));
    const std::string ref = s["$ref"].get<std::string>();
    if (ref.empty() || ref[0] != '#') Fail("only local references ('#...') are supported, got '", Abbreviate(ref), "' at ", Where(path));
    if (auto it = refs_.find(ref); it != refs_.end()) return g_->Ref(it->second);
    const OrderedJson* target = Resolve(ref.substr(1), path);
    const std::int32_t rule = g_->AddRule("ref");
    refs_[ref] = rule;  // before the body, so that a recursive reference finds it
    g_->Define(rule, Schema(*target, ref.substr(1), depth + 1));
    return g_->Ref(rule);
  }

  // A JSON pointer into the root schema.
  const OrderedJson* Resolve(const std::string& pointer, const std::string& path) {
    const OrderedJson* at = &root_;
    std::size_t i = 0;
    while (i < pointer.size()) {
      if (pointer[i] != '/') Fail("a malformed reference '#", Abbreviate(pointer), "' at ", Where(path));
      const std::size_t next = pointer.find('/', i + 1);
      std::string token = pointer.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
      for (std::size_t p = 0; (p = token.find('~', p)) != std::string::npos; ++p)
        token.replace(p, 2, token.compare(p, 2, "~1") == 0 ? "/" : "~");
      if (at->is_object() && at->contains(token)) {
        at = &(*at)[token];
      } else if (at->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(token) < at->size()) {
        at = &(*at)[std::stoul(token)];
      } else {
        Fail("the reference '#", Abbreviate(pointer), "' points to nothing at ", Where(path));
      }
      i = next == std::string::npos ? pointer.size() : next;
    }
    return at;
  }

  void OnlyAnnotationsBeside(const OrderedJson& s, const char* keyword, const std::string& path) {
    for (const auto& [key, value] : s.items())
      if (key != keyword && !AnnotationKeywords().contains(key) && key != "nullable")
        Fail("'", keyword, "' with the sibling keyword '", Abbreviate(key), "' is not supported at ", Where(path));
  }

  Grammar::Node AllOf(const OrderedJson& s, const std::string& path, int depth) {
    OnlyAnnotationsBeside(s, "allOf", path);
    const OrderedJson& all = s["allOf"];
    if (!all.is_array() || all.size() != 1)
      Fail("'allOf' is supported with exactly one schema at ", Where(path));
    return Schema(all[0], path + "/allOf/0", depth + 1);
  }

  Grammar::Node AnyOf(const OrderedJson& s, const std::string& path, int depth) {
    const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
    OnlyAnnotationsBeside(s, key, path);
    const OrderedJson& options = s[key];
    if (!options.is_array() || options.empty()) Fail("'", key, "' must be a non-empty array at ", Where(path));
    std::vector<Grammar::Node> alts;
    for (std::size_t i = 0; i < options.size(); ++i)
      alts.push_back(Schema(options[i], StrCat(path, "/", key, "/", i), depth + 1));
    return g_->Alt(std::move(alts));
  }

  Grammar::Node Enum(const OrderedJson& s, const std::string& path) {
    const OrderedJson& values = s["enum"];
    if (!values.is_array() || values.empty()) Fail("'enum' must be a non-empty array at ", Where(path));
    std::vector<Grammar::Node> alts;
    for (const OrderedJson& v : values) alts.push_back(g_->Literal(v.dump()));
    return g_->Alt(std::move(alts));
  }

  // The types the schema allows: its `type`, or what its keywords imply, or every type.
  std::vector<std::string> Types(const OrderedJson& s, const std::string& path) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const OrderedJson& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const OrderedJson& x : t) {
          if (!x.is_string()) Fail("'type' must hold strings at ", Where(path));
          types.push_back(x.get<std::string>());
        }
      } else {
        Fail("'type' must be a string or a non-empty array at ", Where(path));
      }
      for (const std::string& type : types)
        if (!TypeKeywords(type).size() && type != "number" && type != "boolean" && type != "null")
          Fail("unsupported type '", Abbreviate(type), "' at ", Where(path));
      return types;
    }
    for (const char* t : {"object", "array", "string", "integer"})
      for (const auto& [key, value] : s.items())
        if (TypeKeywords(t).contains(key) && std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
    return types;
  }

  Grammar::Node Typed(const OrderedJson& s, const std::string& path, int depth) {
    const std::vector<std::string> types = Types(s, path);
    if (types.empty()) return g_->Ref(JsonValueRule(g_));
    // A keyword of a type the schema does not allow is a mistake worth naming.
    for (const auto& [key, value] : s.items()) {
      bool used = false;
      for (const std::string& t : types) used |= TypeKeywords(t).contains(key);
      bool typed = false;
      for (const char* t : {"object", "array", "string", "integer"}) typed |= TypeKeywords(t).contains(key);
      if (typed && !used)
        Fail("unsupported JSON schema keyword '", key, "' for type ", types.size() == 1 ? types[0] : "list",
             " at ", Where(path));
    }
    std::vector<Grammar::Node> alts;
    for (const std::string& t : types) {
      if (t == "object") alts.push_back(Object(s, path, depth));
      if (t == "array") alts.push_back(Array(s, path, depth));
      if (t == "string") alts.push_back(String(s, path));
      if (t == "integer") alts.push_back(Integer(s, path));
      if (t == "number") alts.push_back(JsonNumber(g_));
      if (t == "boolean") alts.push_back(g_->Alt({g_->Literal("true"), g_->Literal("false")}));
      if (t == "null") alts.push_back(g_->Literal("null"));
    }
    return g_->Alt(std::move(alts));
  }

  std::optional<std::int64_t> Count(const OrderedJson& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return std::nullopt;
    const std::optional<std::int64_t> v = ExactInt64(s[key]);
    if (!v || *v < 0 || *v > 100000) Fail("'", key, "' must be an integer in [0, 100000] at ", Where(path));
    return v;
  }

  Grammar::Node String(const OrderedJson& s, const std::string& path) {
    const auto min = Count(s, "minLength", path), max = Count(s, "maxLength", path);
    if (min && max && *min > *max) Fail("'minLength' is above 'maxLength' at ", Where(path));
    std::optional<std::string> regex;
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) Fail("'pattern' must be a string at ", Where(path));
      regex = s["pattern"].get<std::string>();
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) Fail("'format' must be a string at ", Where(path));
      const std::string format = s["format"].get<std::string>();
      auto it = FormatRegexes().find(format);
      if (it == FormatRegexes().end())
        Fail("unsupported string format '", Abbreviate(format), "' at ", Where(path),
             " (supported: date, time, date-time, uuid, email, ipv4)");
      if (regex) Fail("'format' together with 'pattern' is not supported at ", Where(path));
      regex = it->second;
    }
    if (!regex)
      return JsonString(g_, static_cast<std::int32_t>(min.value_or(0)),
                        max ? static_cast<std::int32_t>(*max) : Grammar::kUnbounded);
    if (min || max) Fail("'minLength'/'maxLength' together with 'pattern' or 'format' is not supported at ", Where(path));
    try {
      RegexOptions options;
      options.json_string = true;
      return g_->Seq({g_->Literal("\""), ParseRegex(*regex, g_, options), g_->Literal("\"")});
    } catch (const Error& e) {
      Fail(e.what(), " (the 'pattern' at ", Where(path), ")");
    }
  }

  Grammar::Node Integer(const OrderedJson& s, const std::string& path) {
    std::optional<std::int64_t> lo, hi;
    auto bound = [&](const char* key, bool lower, bool exclusive) {
      if (!s.contains(key)) return;
      const OrderedJson& v = s[key];
      if (!v.is_number()) Fail("'", key, "' must be a number at ", Where(path));
      const double d = v.get<double>();
      if (!(std::fabs(d) <= 1e18)) Fail("'", key, "' beyond 10^18 in magnitude at ", Where(path));
      std::int64_t b = static_cast<std::int64_t>(lower ? std::ceil(d) : std::floor(d));
      if (exclusive && static_cast<double>(b) == d) b += lower ? 1 : -1;
      if (lower) {
        lo = lo ? std::max(*lo, b) : b;
      } else {
        hi = hi ? std::min(*hi, b) : b;
      }
    };
    bound("minimum", true, false);
    bound("exclusiveMinimum", true, true);
    bound("maximum", false, false);
    bound("exclusiveMaximum", false, true);
    if (!lo && !hi) return JsonInteger(g_);
    try {
      return ParseRegex(IntegerRangeRegex(lo, hi), g_);
    } catch (const Error& e) {
      Fail(e.what(), " at ", Where(path));
    }
  }

  Grammar::Node Sep(const char* c) { return g_->Seq({JsonWhitespace(g_), g_->Literal(c), JsonWhitespace(g_)}); }

  Grammar::Node Object(const OrderedJson& s, const std::string& path, int depth) {
    struct Property {
      Grammar::Node member;
      bool required;
    };
    std::vector<Property> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) Fail("'required' must be an array at ", Where(path));
      for (const OrderedJson& r : s["required"]) {
        if (!r.is_string()) Fail("'required' must hold strings at ", Where(path));
        required.insert(r.get<std::string>());
      }
    }
    bool has_properties = false;
    if (s.contains("properties")) {
      const OrderedJson& p = s["properties"];
      if (!p.is_object()) Fail("'properties' must be an object at ", Where(path));
      has_properties = !p.empty();
      for (const auto& [name, sub] : p.items()) {
        const Grammar::Node value = Schema(sub, path + "/properties/" + Escape(name), depth + 1);
        props.push_back({g_->Seq({g_->Literal(JsonQuote(name)), Sep(":"), value}), required.contains(name)});
        required.erase(name);
      }
    }
    if (!required.empty())
      Fail("'required' names '", Abbreviate(*required.begin()), "', which 'properties' does not define, at ", Where(path));
    // Members beyond the properties: their keys are any string.
    std::optional<Grammar::Node> extra_value;
    if (s.contains("additionalProperties")) {
      const OrderedJson& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) extra_value = Schema(a, path + "/additionalProperties", depth + 1);
    } else if (!has_properties) {
      extra_value = g_->Ref(JsonValueRule(g_));
    }
    return Members(props, extra_value);
  }

  // `{ ... }` with the properties in order (each optional one may be left out) and then any extra
  // members. The first member written decides where the separators go: for each property that
  // may come first, the rest follows with commas, so the expression grows with the square of the
  // number of properties, not exponentially.
  template <typename Props>
  Grammar::Node Members(const Props& props, std::optional<Grammar::Node> extra_value) {
    const std::int32_t n = static_cast<std::int32_t>(props.size());
    std::optional<Grammar::Node> extra;
    if (extra_value) extra = g_->Seq({JsonString(g_), Sep(":"), *extra_value});
    auto tail = [&](std::int32_t from) {
      std::vector<Grammar::Node> parts;
      for (std::int32_t k = from; k < n; ++k) {
        const Grammar::Node item = g_->Seq({Sep(","), props[k].member});
        parts.push_back(props[k].required ? item : g_->Optional(item));
      }
      if (extra) parts.push_back(g_->Star(g_->Seq({Sep(","), *extra})));
      return g_->Seq(std::move(parts));
    };
    std::vector<Grammar::Node> firsts;
    bool empty_allowed = true;
    for (std::int32_t j = 0; j < n; ++j) {
      firsts.push_back(g_->Seq({props[j].member, tail(j + 1)}));
      if (props[j].required) {
        empty_allowed = false;
        break;
      }
    }
    if (empty_allowed && extra) firsts.push_back(g_->Seq({*extra, g_->Star(g_->Seq({Sep(","), *extra}))}));
    std::vector<Grammar::Node> parts = {g_->Literal("{"), JsonWhitespace(g_)};
    if (!firsts.empty()) {
      const Grammar::Node body = g_->Seq({g_->Alt(std::move(firsts)), JsonWhitespace(g_)});
      parts.push_back(empty_allowed ? g_->Optional(body) : body);
    }
    parts.push_back(g_->Literal("}"));
    return g_->Seq(std::move(parts));
  }

  Grammar::Node Array(const OrderedJson& s, const std::string& path, int depth) {
    std::vector<Grammar::Node> prefix;
    if (s.contains("prefixItems")) {
      const OrderedJson& p = s["prefixItems"];
      if (!p.is_array()) Fail("'prefixItems' must be an array at ", Where(path));
      for (std::size_t i = 0; i < p.size(); ++i) prefix.push_back(Schema(p[i], StrCat(path, "/prefixItems/", i), depth + 1));
    }
    std::optional<Grammar::Node> items;
    if (!s.contains("items")) {
      items = g_->Ref(JsonValueRule(g_));
    } else if (!(s["items"].is_boolean() && !s["items"].get<bool>())) {
      items = Schema(s["items"], path + "/items", depth + 1);
    }
    const std::int64_t min = Count(s, "minItems", path).value_or(0);
    std::optional<std::int64_t> max = Count(s, "maxItems", path);
    if (!items) max = max ? std::min<std::int64_t>(*max, prefix.size()) : static_cast<std::int64_t>(prefix.size());
    if (max && min > *max) Fail("the array can hold no valid number of items at ", Where(path));
    auto element = [&](std::int64_t k) { return k < static_cast<std::int64_t>(prefix.size()) ? prefix[k] : *items; };
    // The elements after the k-th, given that k are written.
    std::function<Grammar::Node(std::int64_t)> rest = [&](std::int64_t k) -> Grammar::Node {
      if (max && k >= *max) return g_->Empty();
      if (k >= static_cast<std::int64_t>(prefix.size())) {
        const std::int32_t lo = static_cast<std::int32_t>(std::max<std::int64_t>(0, min - k));
        const std::int32_t hi = max ? static_cast<std::int32_t>(*max - k) : Grammar::kUnbounded;
        return g_->Repeat(g_->Seq({Sep(","), *items}), lo, hi);
      }
      const Grammar::Node next = g_->Seq({Sep(","), element(k), rest(k + 1)});
      return k >= min ? g_->Optional(next) : next;
    };
    std::vector<Grammar::Node> parts = {g_->Literal("["), JsonWhitespace(g_)};
    if (!max || *max > 0) {
      const Grammar::Node elements = g_->Seq({element(0), rest(1), JsonWhitespace(g_)});
      parts.push_back(min == 0 ? g_->Optional(elements) : elements);
    }
    parts.push_back(g_->Literal("]"));
    return g_->Seq(std::move(parts));
  }

  const OrderedJson& root_;
  Grammar* g_;
  std::map<std::string, std::int32_t> refs_;
};

}  // namespace

Grammar::Node JsonSchemaExpression(const OrderedJson& schema, Grammar* g) {
  return SchemaCompiler(schema, g).Schema(schema, "");
}

Grammar JsonSchemaGrammar(const OrderedJson& schema) {
  Grammar g;
  const std::int32_t root = g.AddRule("root");
  g.Define(root, JsonSchemaExpression(schema, &g));
  g.set_root(root);
  return g;
}

}  // namespace fission::grammar
