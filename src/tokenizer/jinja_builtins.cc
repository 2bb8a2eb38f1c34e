#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "base/error.h"
#include "tokenizer/jinja_util.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer::jinja {
namespace {

// int() of a float; values outside the 64-bit range are an error (Python would give a big int).
std::int64_t DoubleToInt(double d) {
  if (!(d > -9.2e18 && d < 9.2e18)) Fail("int: ", FormatFloat(d), " is out of range");
  return static_cast<std::int64_t>(d);
}

// Widths that size strings (indent, center, tojson indent) are bounded.
std::int64_t ToWidth(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) Fail(what, ": expected an integer, got ", v.TypeName());
  if (v.as_int() > 100000) Fail(what, ": width too large");
  return v.as_int();
}

std::int64_t ToIndex(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) Fail(what, ": indices must be integers, not ", v.TypeName());
  return v.as_int();
}

Value AttributePath(const Value& item, const std::string& path) {
  Value v = item;
  std::size_t prev = 0;
  while (true) {
    std::size_t dot = path.find('.', prev);
    std::string part = path.substr(prev, dot == std::string::npos ? std::string::npos : dot - prev);
    // Jinja reads an all-digit part as an index ("items.0").
    std::int64_t index = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    bool numeric = !part.empty() && ec == std::errc() && end == part.data() + part.size() && part[0] != '-';
    v = numeric ? GetItem(v, Value(index)) : GetItem(v, Value(part));
    if (dot == std::string::npos) return v;
    prev = dot + 1;
  }
}

// select/reject/selectattr/rejectattr: args after the attribute name are test name and arguments.
ValueList SelectImpl(const Value& input, Args& args, bool by_attr, bool keep_if) {
  std::size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty()) Fail("selectattr: missing attribute name");
    attr = args.positional[0].Str();
    next = 1;
  }
  std::string test;
  Args test_args;
  if (args.positional.size() > next) {
    test = args.positional[next].Str();
    test_args.positional.assign(args.positional.begin() + next + 1, args.positional.end());
  }
  ValueList out;
  for (const Value& item : Iterate(input)) {
    Value subject = by_attr ? AttributePath(item, attr) : item;
    bool ok;
    if (test.empty()) {
      ok = subject.Truthy();
    } else {
      Args a = test_args;
      ok = Builtins::Test(test, subject, a);
    }
    if (ok == keep_if) out.push_back(item);
  }
  return out;
}


// Escapes what Python's json.dumps escapes with ensure_ascii=True beyond the default: DEL and every
// non-ASCII code point (as \\uXXXX, astral ones as surrogate pairs).
std::string AsciiOnly(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  auto escape = [&](unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "\\u%04x", v);
    out += buf;
  };
  for (std::size_t i = 0; i < json.size();) {
    unsigned char c = static_cast<unsigned char>(json[i]);
    if (c < 0x7F) {
      out.push_back(json[i++]);
      continue;
    }
    char32_t cp = NextCodePoint(json, &i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      escape(0xD800 + (cp >> 10));
      escape(0xDC00 + (cp & 0x3FF));
    } else {
      escape(cp);
    }
  }
  return out;
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value ToJsonFilter(const Value& input, Args& args) {
  bool ensure_ascii = Arg(args, 0, "ensure_ascii", Value(false)).Truthy();
  Value indent = Arg(args, 1, "indent", Value::None());
  Value separators = Arg(args, 2, "separators", Value::None());
  bool sort_keys = Arg(args, 3, "sort_keys", Value(false)).Truthy();
  int n = indent.is_none() || indent.is_undefined()
              ? -1
              : static_cast<int>(std::max<std::int64_t>(-1, ToWidth(indent, "tojson indent")));
  std::string item_sep = n >= 0 ? "," : ", ", key_sep = ": ";
  if (separators.is_list() && separators.as_list().size() == 2) {
    item_sep = separators.as_list()[0].Str();
    key_sep = separators.as_list()[1].Str();
  }
  std::string json = input.ToJson(n, item_sep, key_sep, sort_keys);
  return Value(ensure_ascii ? AsciiOnly(json) : json);
}

Value SortList(const Value& input, Args& args) {
  bool reverse = Arg(args, 0, "reverse", Value(false)).Truthy();
  bool case_sensitive = Arg(args, 1, "case_sensitive", Value(false)).Truthy();
  Value attribute = Arg(args, 2, "attribute", Value::None());
  ValueList items = Iterate(input);
  auto key = [&](const Value& v) {
    Value k = attribute.is_string() ? AttributePath(v, attribute.as_string()) : v;
    if (!case_sensitive && k.is_string()) return Value(ToLower(k.as_string()));
    return k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int c = Compare(key(a), key(b), "<");
    return reverse ? c > 0 : c < 0;
  });
  return Value(std::move(items));
}

}  // namespace

std::int64_t PyLen(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString: {
      std::int64_t n = 0;
      for (unsigned char c : v.as_string()) n += (c & 0xC0) != 0x80;
      return n;
    }
    case Value::Kind::kList:
      return static_cast<std::int64_t>(v.as_list().size());
    case Value::Kind::kDict:
      return static_cast<std::int64_t>(v.as_dict().items.size());
    case Value::Kind::kUndefined:
      return 0;
    default:
      Fail("object of type '", v.TypeName(), "' has no len()");
  }
}

ValueList Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& [k, _] : v.as_dict().items) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      for (auto& cp : CodePoints(v.as_string())) chars.emplace_back(cp);
      return chars;
    }
    case Value::Kind::kUndefined:
      return {};
    default:
      Fail("'", v.TypeName(), "' object is not iterable");
  }
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) Fail("'in <string>' requires string as left operand, not ", item.TypeName());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list()) {
        if (Equal(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.as_dict().Find(item.as_string()) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      Fail("argument of type '", container.TypeName(), "' is not iterable");
  }
}

int Compare(const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) {
    double x = a.as_double(), y = b.as_double();
    if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int();
    return x < y ? -1 : x > y;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0;
  }
  if (a.is_list() && b.is_list()) {
    const ValueList &x = a.as_list(), &y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equal(x[i], y[i])) return Compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  Fail("'", op, "' not supported between instances of '", a.TypeName(), "' and '", b.TypeName(), "'");
}

Value GetItem(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      Fail("'", object.name().empty() ? "value" : object.name(), "' is undefined");
    case Value::Kind::kDict:
      if (key.is_string()) {
        if (const Value* v = object.as_dict().Find(key.as_string())) return *v;
        if (!object.as_dict().is_namespace) {
          Value method = Builtins::Method(object, key.as_string());
          if (!method.is_undefined()) return method;
        }
      }
      return Value::Undefined(key.Str());
    case Value::Kind::kList: {
      if (key.is_string()) return Builtins::Method(object, key.as_string());
      if (!key.is_int() && !key.is_bool()) return Value::Undefined();
      std::int64_t n = static_cast<std::int64_t>(object.as_list().size()), i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined();
      return object.as_list()[i];
    }
    case Value::Kind::kString: {
      if (key.is_string()) return Builtins::Method(object, key.as_string());
      if (!key.is_int() && !key.is_bool()) return Value::Undefined();
      std::vector<std::string> cps = CodePoints(object.as_string());
      std::int64_t n = static_cast<std::int64_t>(cps.size()), i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined();
      return Value(cps[i]);
    }
    default:
      return Value::Undefined(key.Str());
  }
}

Value GetAttr(const Value& object, const std::string& name) {
  if (object.is_undefined()) Fail("'", object.name().empty() ? "value" : object.name(), "' is undefined");
  if (object.is_dict()) {
    if (!object.as_dict().is_namespace) {
      Value method = Builtins::Method(object, name);
      if (!method.is_undefined()) return method;
    }
    if (const Value* v = object.as_dict().Find(name)) return *v;
    return Value::Undefined(name);
  }
  if (object.is_string() || object.is_list()) {
    Value method = Builtins::Method(object, name);
    if (!method.is_undefined()) return method;
  }
  return Value::Undefined(name);
}

Value SliceValue(const Value& object, const Value& start, const Value& stop, const Value& step_v) {
  std::int64_t step = step_v.is_undefined() || step_v.is_none() ? 1 : ToIndex(step_v, "slice");
  if (step == 0) Fail("slice step cannot be zero");
  ValueList items;
  bool is_string = object.is_string();
  if (is_string) {
    for (auto& cp : CodePoints(object.as_string())) items.emplace_back(cp);
  } else if (object.is_list()) {
    items = object.as_list();
  } else {
    Fail("'", object.TypeName(), "' object is not subscriptable");
  }
  std::int64_t n = static_cast<std::int64_t>(items.size());
  auto bound = [&](const Value& v, std::int64_t fallback, bool is_stop) {
    if (v.is_undefined() || v.is_none()) return fallback;
    std::int64_t i = ToIndex(v, "slice");
    if (i < 0) i += n;
    if (step > 0) return std::clamp<std::int64_t>(i, 0, n);
    return std::clamp<std::int64_t>(i, -1, n - 1);
  };
  std::int64_t b = bound(start, step > 0 ? 0 : n - 1, false);
  std::int64_t e = bound(stop, step > 0 ? n : -1, true);
  ValueList out;
  for (std::int64_t i = b; step > 0 ? i < e : i > e;) {
    out.push_back(items[i]);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  if (!is_string) return Value(std::move(out));
  std::string s;
  for (const Value& v : out) s += v.as_string();
  return Value(std::move(s));
}


namespace {

ValueList MapImpl(const Value& input, Args& args) {
  Value attribute = Arg(args, 99, "attribute", Value());
  ValueList out;
  if (attribute.is_string()) {
    Value fallback = Arg(args, 99, "default", Value());
    for (const Value& item : Iterate(input)) {
      Value v = AttributePath(item, attribute.as_string());
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return out;
  }
  if (args.positional.empty()) Fail("map: expected a filter name or attribute=");
  std::string filter = args.positional[0].Str();
  Args rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : Iterate(input)) {
    Args a = rest;
    out.push_back(Builtins::Filter(filter, item, a));
  }
  return out;
}

Value MinMax(const Value& input, Args& args, bool want_max) {
  ValueList items = Iterate(input);
  if (items.empty()) return Value::Undefined("min/max of an empty sequence");
  Value attribute = Arg(args, 1, "attribute", Value::None());
  bool case_sensitive = Arg(args, 0, "case_sensitive", Value(false)).Truthy();
  auto key = [&](const Value& v) {
    Value k = attribute.is_string() ? AttributePath(v, attribute.as_string()) : v;
    return !case_sensitive && k.is_string() ? Value(ToLower(k.as_string())) : k;
  };
  Value best = items[0];
  for (std::size_t i = 1; i < items.size(); ++i) {
    int c = Compare(key(items[i]), key(best), "<");
    if (want_max ? c > 0 : c < 0) best = items[i];
  }
  return best;
}

Value ItemsOf(const Value& input) {
  if (input.is_undefined()) return Value(ValueList{});
  if (!input.is_dict()) Fail("items: expected a mapping, got ", input.TypeName());
  ValueList out;
  for (const auto& [k, v] : input.as_dict().items) out.push_back(Value::Tuple(ValueList{Value(k), v}));
  return Value(std::move(out));
}

// Python's %-formatting for %s, %d, %i, %r and %%.
std::string Format(const std::string& fmt, const ValueList& values) {
  std::string out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      out.push_back(fmt[i]);
      continue;
    }
    char spec = fmt[++i];
    if (spec == '%') {
      out.push_back('%');
      continue;
    }
    if (next >= values.size()) Fail("format: not enough arguments for format string");
    const Value& v = values[next++];
    if (spec == 's') {
      out += v.Str();
    } else if (spec == 'r') {
      out += v.Repr();
    } else if (spec == 'd' || spec == 'i') {
      if (!v.is_number()) Fail("format: %d format: a number is required, not ", v.TypeName());
      out += std::to_string(v.is_float() ? DoubleToInt(v.as_double()) : v.as_int());
    } else {
      Fail("format: unsupported format character '", std::string(1, spec), "'");
    }
  }
  return out;
}

}  // namespace

Value Builtins::Filter(const std::string& name, const Value& input, Args& args) {
  const std::string& f = name;
  if (f == "length" || f == "count") return Value(PyLen(input));
  if (f == "string") return Value(input.Str());
  if (f == "tojson") return ToJsonFilter(input, args);
  if (f == "trim") return Value(Strip(input.Str(), Arg(args, 0, "chars", Value::None()), true, true));
  if (f == "lower") return Value(ToLower(input.Str()));
  if (f == "upper") return Value(Upper(input.Str()));
  if (f == "capitalize") return Value(Capitalize(input.Str()));
  if (f == "title") return Value(Title(input.Str()));
  if (f == "safe") return input;
  if (f == "e" || f == "escape" || f == "forceescape") return Value(HtmlEscape(input.Str()));
  if (f == "replace") {
    Value count = Arg(args, 2, "count", Value::None());
    return Value(Replace(input.Str(), Arg(args, 0, "old").Str(), Arg(args, 1, "new").Str(),
                         count.is_none() || count.is_undefined() ? -1 : ToIndex(count, "replace")));
  }
  if (f == "split") {
    Value maxsplit = Arg(args, 1, "maxsplit", Value(std::int64_t{-1}));
    return Value(Split(input.Str(), Arg(args, 0, "sep", Value::None()), ToIndex(maxsplit, "split")));
  }
  if (f == "join") {
    std::string sep = Arg(args, 0, "d", Value("")).Str();
    Value attribute = Arg(args, 1, "attribute", Value::None());
    std::string out;
    bool first = true;
    for (const Value& item : Iterate(input)) {
      if (!first) out += sep;
      first = false;
      out += (attribute.is_string() ? AttributePath(item, attribute.as_string()) : item).Str();
    }
    return Value(out);
  }
  if (f == "first" || f == "last") {
    ValueList items = Iterate(input);
    if (items.empty()) return Value::Undefined(f + " of an empty sequence");
    return f == "first" ? items.front() : items.back();
  }
  if (f == "default" || f == "d") {
    bool boolean = Arg(args, 1, "boolean", Value(false)).Truthy();
    if (input.is_undefined() || (boolean && !input.Truthy())) return Arg(args, 0, "default_value", Value(""));
    return input;
  }
  if (f == "items") return ItemsOf(input);
  if (f == "dictsort") {
    Value items = ItemsOf(input);
    Args none;
    return SortList(items, none);
  }
  if (f == "list") return Value(Iterate(input));
  if (f == "reverse") {
    if (input.is_string()) {
      std::vector<std::string> cps = CodePoints(input.as_string());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value(out);
    }
    ValueList items = Iterate(input);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (f == "unique") {
    ValueList out;
    for (const Value& item : Iterate(input)) {
      bool seen = false;
      for (const Value& o : out) seen = seen || Equal(o, item);
      if (!seen) out.push_back(item);
    }
    return Value(std::move(out));
  }
  if (f == "sort") return SortList(input, args);
  if (f == "map") return Value(MapImpl(input, args));
  if (f == "select") return Value(SelectImpl(input, args, false, true));
  if (f == "reject") return Value(SelectImpl(input, args, false, false));
  if (f == "selectattr") return Value(SelectImpl(input, args, true, true));
  if (f == "rejectattr") return Value(SelectImpl(input, args, true, false));
  if (f == "attr") return GetAttr(input, Arg(args, 0, "name").Str());
  if (f == "min") return MinMax(input, args, false);
  if (f == "max") return MinMax(input, args, true);
  if (f == "sum") {
    Value attribute = Arg(args, 0, "attribute", Value::None());
    Value total = Arg(args, 1, "start", Value(std::int64_t{0}));
    for (const Value& item : Iterate(input)) {
      Value v = attribute.is_string() ? AttributePath(item, attribute.as_string()) : item;
      if (!v.is_number() || !total.is_number()) Fail("sum: unsupported operand type ", v.TypeName());
      std::int64_t sum = 0;
      if (v.is_float() || total.is_float()) {
        total = Value(total.as_double() + v.as_double());
      } else if (__builtin_add_overflow(total.as_int(), v.as_int(), &sum)) {
        Fail("sum: integer overflow");
      } else {
        total = Value(sum);
      }
    }
    return total;
  }
  if (f == "abs") {
    if (input.is_float()) return Value(std::fabs(input.as_double()));
    if (input.is_number()) {
      if (input.as_int() == INT64_MIN) Fail("abs: integer overflow");
      return Value(static_cast<std::int64_t>(std::llabs(input.as_int())));
    }
    Fail("abs: bad operand type ", input.TypeName());
  }
  if (f == "int") {
    Value fallback = Arg(args, 0, "default", Value(std::int64_t{0}));
    if (input.is_float()) return Value(DoubleToInt(input.as_double()));
    if (input.is_number()) return Value(input.as_int());
    if (input.is_string()) {
      try {
        std::size_t used = 0;
        std::string s = Strip(input.as_string(), Value::None(), true, true);
        long long v = std::stoll(s, &used, 10);
        if (used == s.size()) return Value(static_cast<std::int64_t>(v));
        double d = std::stod(s, &used);
        if (used == s.size()) return Value(DoubleToInt(d));
      } catch (const std::exception&) {
      }
    }
    return fallback;
  }
  if (f == "float") {
    Value fallback = Arg(args, 0, "default", Value(0.0));
    if (input.is_number()) return Value(input.as_double());
    if (input.is_string()) {
      try {
        std::size_t used = 0;
        std::string s = Strip(input.as_string(), Value::None(), true, true);
        double d = std::stod(s, &used);
        if (used == s.size()) return Value(d);
      } catch (const std::exception&) {
      }
    }
    return fallback;
  }
  if (f == "round") {
    std::int64_t precision = ToIndex(Arg(args, 0, "precision", Value(std::int64_t{0})), "round");
    std::string method = Arg(args, 1, "method", Value("common")).Str();
    if (!input.is_number()) Fail("round: expected a number, got ", input.TypeName());
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = input.as_double() * scale;
    double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);  // half to even, as Python
    return Value(r / scale);
  }
  if (f == "indent") {
    Value width = Arg(args, 0, "width", Value(std::int64_t{4}));
    if (!width.is_string()) ToWidth(width, "indent");
    return Value(Indent(input.Str(), width,
                        Arg(args, 1, "first", Value(false)).Truthy(), Arg(args, 2, "blank", Value(false)).Truthy()));
  }
  if (f == "center") {
    std::int64_t width = ToWidth(Arg(args, 0, "width", Value(std::int64_t{80})), "center");
    std::string s = input.Str();
    std::int64_t n = PyLen(Value(s));
    if (n >= width) return Value(s);
    std::int64_t total = width - n, left = total / 2 + (total & width & 1);
    return Value(std::string(left, ' ') + s + std::string(total - left, ' '));
  }
  if (f == "wordcount") return Value(static_cast<std::int64_t>(Split(input.Str(), Value::None(), -1).size()));
  if (f == "format") return Value(Format(input.Str(), args.positional));
  if (f == "batch") {
    std::int64_t size = ToIndex(Arg(args, 0, "linecount"), "batch");
    if (size <= 0) Fail("batch: size must be positive");
    ValueList out, row;
    for (const Value& item : Iterate(input)) {
      row.push_back(item);
      if (static_cast<std::int64_t>(row.size()) == size) out.emplace_back(std::move(row)), row.clear();
    }
    if (!row.empty()) out.emplace_back(std::move(row));
    return Value(std::move(out));
  }
  Fail("no filter named '", f, "'");
}

bool Builtins::HasTest(const std::string& name) {
  static const char* kTests[] = {"defined", "undefined", "none", "boolean", "false", "true", "integer", "float",
                                 "number", "string", "mapping", "iterable", "sequence", "callable", "sameas",
                                 "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt",
                                 "greaterthan", ">", "ge", ">=", "in", "odd", "even", "divisibleby", "lower",
                                 "upper", "filter", "test", "escaped"};
  for (const char* t : kTests) {
    if (name == t) return true;
  }
  return false;
}

bool Builtins::Test(const std::string& name, const Value& v, Args& args) {
  const std::string& t = name;
  if (t == "defined") return !v.is_undefined();
  if (t == "undefined") return v.is_undefined();
  if (t == "none") return v.is_none();
  if (t == "boolean") return v.is_bool();
  if (t == "false") return v.is_bool() && !v.as_bool();
  if (t == "true") return v.is_bool() && v.as_bool();
  if (t == "integer") return v.is_int();
  if (t == "float") return v.is_float();
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "mapping") return v.is_dict();
  if (t == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (t == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (t == "callable") return v.is_function();
  if (t == "escaped") return false;
  Value other = Arg(args, 0, "other", Value());
  if (t == "sameas") {
    if (v.is_none() || v.is_bool() || v.is_undefined()) return v.kind() == other.kind() && Equal(v, other);
    if (v.is_list()) return other.is_list() && &v.as_list() == &other.as_list();
    if (v.is_dict()) return other.is_dict() && &v.as_dict() == &other.as_dict();
    return Equal(v, other) && v.kind() == other.kind();
  }
  if (t == "eq" || t == "equalto" || t == "==") return Equal(v, other);
  if (t == "ne" || t == "!=") return !Equal(v, other);
  if (t == "lt" || t == "lessthan" || t == "<") return Compare(v, other, "<") < 0;
  if (t == "le" || t == "<=") return Compare(v, other, "<=") <= 0;
  if (t == "gt" || t == "greaterthan" || t == ">") return Compare(v, other, ">") > 0;
  if (t == "ge" || t == ">=") return Compare(v, other, ">=") >= 0;
  if (t == "in") return Contains(Arg(args, 0, "seq", Value()), v);
  if (t == "odd" || t == "even") {
    if (!v.is_int()) Fail("test '", t, "' expects an integer, got ", v.TypeName());
    bool odd = (v.as_int() % 2) != 0;
    return t == "odd" ? odd : !odd;
  }
  if (t == "divisibleby") {
    Value n = Arg(args, 0, "num", Value());
    if (!v.is_int() || !n.is_int() || n.as_int() == 0) Fail("test 'divisibleby' expects non-zero integers");
    return v.as_int() % n.as_int() == 0;
  }
  if (t == "lower") return v.is_string() && ToLower(v.as_string()) == v.as_string();
  if (t == "upper") return v.is_string() && Upper(v.as_string()) == v.as_string();
  if (t == "filter" || t == "test") return v.is_string();
  Fail("no test named '", t, "'");
}

}  // namespace fission::tokenizer::jinja
