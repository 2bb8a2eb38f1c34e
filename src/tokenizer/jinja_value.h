// Values of the chat-template interpreter: the Python objects a Jinja template sees (None, bool,
// int, float, str, list, dict, callables) plus Jinja's undefined. Lists and dicts are shared
// references, as in Python; dicts keep insertion order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace fission::tokenizer::jinja {

class Value;
using ValueList = std::vector<Value>;

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // namespace() objects accept attribute assignment
  const Value* Find(std::string_view key) const;
  Value* Find(std::string_view key);
  void Set(const std::string& key, Value value);
};

// Positional and keyword arguments of a call.
struct Args {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<Value(Args&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined
  static Value Undefined(std::string name = "") {
    Value v;
    v.str_ = std::make_shared<std::string>(std::move(name));
    return v;
  }
  static Value None() { return Value(Kind::kNone); }
  Value(bool b) : kind_(Kind::kBool), int_(b) {}
  Value(int i) : kind_(Kind::kInt), int_(i) {}
  Value(std::int64_t i) : kind_(Kind::kInt), int_(i) {}
  Value(double d) : kind_(Kind::kFloat), float_(d) {}
  Value(std::string s) : kind_(Kind::kString), str_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(ValueList list) : kind_(Kind::kList), list_(std::make_shared<ValueList>(std::move(list))) {}
  Value(std::shared_ptr<Dict> dict) : kind_(Kind::kDict), dict_(std::move(dict)) {}
  static Value MakeFunction(std::string name, Function fn) {
    Value v(Kind::kFunction);
    v.str_ = std::make_shared<std::string>(std::move(name));
    v.fn_ = std::make_shared<Function>(std::move(fn));
    return v;
  }
  static Value MakeDict() { return Value(std::make_shared<Dict>()); }
  // A tuple: a list that prints as (a, b).
  static Value Tuple(ValueList items) {
    Value v(std::move(items));
    v.int_ = 1;
    return v;
  }
  bool is_tuple() const { return kind_ == Kind::kList && int_ == 1; }
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return int_ != 0; }
  std::int64_t as_int() const { return int_; }
  double as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  // Typed access; a value of another type throws fission::Error (a template passed the wrong type).
  const std::string& as_string() const {
    if (kind_ != Kind::kString) WrongType("str");
    return *str_;
  }
  ValueList& as_list() const {
    if (kind_ != Kind::kList) WrongType("list");
    return *list_;
  }
  Dict& as_dict() const {
    if (kind_ != Kind::kDict) WrongType("dict");
    return *dict_;
  }
  Function& as_function() const {
    if (kind_ != Kind::kFunction) WrongType("function");
    return *fn_;
  }
  // The variable name an undefined value stands for (for error messages), or the function name.
  const std::string& name() const;

  bool Truthy() const;
  // Python str() (what {{ }} prints); undefined prints as "".
  std::string Str() const;
  // Python repr().
  std::string Repr() const;
  // json.dumps(value, ensure_ascii=False, indent, separators, sort_keys) as transformers' tojson.
  std::string ToJson(int indent = -1, const std::string& item_sep = ", ", const std::string& key_sep = ": ",
                     bool sort_keys = false) const;
  const char* TypeName() const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}
  [[noreturn]] void WrongType(const char* expected) const;
  void ToJsonImpl(std::string* out, int indent, int depth, const std::string& item_sep, const std::string& key_sep,
                  bool sort_keys) const;

  Kind kind_ = Kind::kUndefined;
  std::int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<std::string> str_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// Python ==.
bool Equal(const Value& a, const Value& b);
// Python repr of a float ("1.0", "1e-05", "1.5e+16").
std::string FormatFloat(double d);

}  // namespace fission::tokenizer::jinja
