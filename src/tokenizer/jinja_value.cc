#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"

namespace fission::tokenizer::jinja {

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Dict::Find(std::string_view key) {
  for (auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(const std::string& key, Value value) {
  if (Value* v = Find(key)) {
    *v = std::move(value);
  } else {
    items.emplace_back(key, std::move(value));
  }
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(static_cast<std::int64_t>(j.get<std::uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList list;
      list.reserve(j.size());
      for (const auto& e : j) list.push_back(FromJson(e));
      return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto dict = std::make_shared<Dict>();
      dict->items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) dict->items.emplace_back(it.key(), FromJson(it.value()));
      return Value(std::move(dict));
    }
    default:
      return None();
  }
}

void Value::WrongType(const char* expected) const { Fail("expected ", expected, ", got ", TypeName()); }

const std::string& Value::name() const {
  static const std::string kEmpty;
  return str_ ? *str_ : kEmpty;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0.0;
    case Kind::kString:
      return !str_->empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return dict_->is_namespace || !dict_->items.empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string FormatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci looks like "-1.2345e+05": split sign, digits and exponent.
  bool negative = sci[0] == '-';
  std::size_t epos = sci.find('e');
  std::string mantissa = sci.substr(negative ? 1 : 0, epos - (negative ? 1 : 0));
  int exponent = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(-exponent - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out += digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

namespace {

std::string ReprString(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == quote) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

void JsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

}  // namespace

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return *str_;
    default:
      return Repr();
  }
}

namespace {
// Bounds recursion over values nested by a template (a list holding itself, many levels deep).
constexpr int kMaxValueDepth = 256;
thread_local int value_depth = 0;
struct ValueDepthGuard {
  ValueDepthGuard() {
    if (++value_depth > kMaxValueDepth) {
      value_depth = 0;
      Fail("value nested too deeply");
    }
  }
  ~ValueDepthGuard() { if (value_depth > 0) --value_depth; }
};
}  // namespace

std::string Value::Repr() const {
  ValueDepthGuard guard;
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return int_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return FormatFloat(float_);
    case Kind::kString:
      return ReprString(*str_);
    case Kind::kList: {
      bool tuple = int_ == 1;
      std::string out = tuple ? "(" : "[";
      for (std::size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (tuple && list_->size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Kind::kDict: {
      if (dict_->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (std::size_t i = 0; i < dict_->items.size(); ++i) {
        if (i) out += ", ";
        out += ReprString(dict_->items[i].first) + ": " + dict_->items[i].second.Repr();
      }
      return out + "}";
    }
    case Kind::kFunction:
      return "<function " + *str_ + ">";
  }
  return "";
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kDict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

std::string Value::ToJson(int indent, const std::string& item_sep, const std::string& key_sep, bool sort_keys) const {
  std::string out;
  ToJsonImpl(&out, indent, 0, item_sep, key_sep, sort_keys);
  return out;
}

void Value::ToJsonImpl(std::string* out, int indent, int depth, const std::string& item_sep,
                       const std::string& key_sep, bool sort_keys) const {
  ValueDepthGuard guard;
  auto newline = [&](int level) {
    out->push_back('\n');
    out->append(static_cast<std::size_t>(indent) * level, ' ');
  };
  switch (kind_) {
    case Kind::kNone:
      *out += "null";
      return;
    case Kind::kBool:
      *out += int_ ? "true" : "false";
      return;
    case Kind::kInt:
      *out += std::to_string(int_);
      return;
    case Kind::kFloat:
      if (std::isnan(float_)) {
        *out += "NaN";
      } else if (std::isinf(float_)) {
        *out += float_ > 0 ? "Infinity" : "-Infinity";
      } else {
        *out += FormatFloat(float_);
      }
      return;
    case Kind::kString:
      JsonString(*str_, out);
      return;
    case Kind::kList: {
      if (list_->empty()) {
        *out += "[]";
        return;
      }
      out->push_back('[');
      for (std::size_t i = 0; i < list_->size(); ++i) {
        if (i) *out += item_sep;
        if (indent >= 0) newline(depth + 1);
        (*list_)[i].ToJsonImpl(out, indent, depth + 1, item_sep, key_sep, sort_keys);
      }
      if (indent >= 0) newline(depth);
      out->push_back(']');
      return;
    }
    case Kind::kDict: {
      if (dict_->items.empty()) {
        *out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : dict_->items) items.push_back(&item);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      out->push_back('{');
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) *out += item_sep;
        if (indent >= 0) newline(depth + 1);
        JsonString(items[i]->first, out);
        *out += key_sep;
        items[i]->second.ToJsonImpl(out, indent, depth + 1, item_sep, key_sep, sort_keys);
      }
      if (indent >= 0) newline(depth);
      out->push_back('}');
      return;
    }
    case Kind::kUndefined:
      Fail("tojson: Object of type Undefined is not JSON serializable");
    case Kind::kFunction:
      Fail("tojson: Object of type function is not JSON serializable");
  }
}

bool Equal(const Value& a, const Value& b) {
  ValueDepthGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const ValueList &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!Equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (&x == &y) return true;
      if (x.is_namespace || y.is_namespace || x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.Find(k);
        if (other == nullptr || !Equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kFunction:
      return &a.as_function() == &b.as_function();
    default:
      return false;
  }
}

}  // namespace fission::tokenizer::jinja
