// Python methods of str, list and dict values, and the global functions templates call.
#include <algorithm>
#include <ctime>

#include "base/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_util.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer::jinja {
namespace {

std::int64_t IntArg(Args& args, std::size_t i, const char* name, std::int64_t fallback) {
  Value v = Arg(args, i, name, Value());
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_int()) Fail(name, ": expected an integer, got ", v.TypeName());
  return v.as_int();
}

// startswith/endswith accept a string or a tuple (list) of strings.
bool AffixMatch(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) Fail(prefix ? "startswith" : "endswith", ": expected a string, got ", a.TypeName());
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.as_list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

bool AllChars(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size();) {
    if (!pred(NextCodePoint(s, &i))) return false;
  }
  return true;
}

Value StringMethod(const Value& self, const std::string& name) {
  std::string s = self.as_string();
  auto bind = [&](Function fn) { return Value::MakeFunction("str." + name, std::move(fn)); };
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return bind([s, prefix](Args& a) { return Value(AffixMatch(s, Arg(a, 0, "prefix"), prefix)); });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool left = name != "rstrip", right = name != "lstrip";
    return bind([s, left, right](Args& a) { return Value(Strip(s, Arg(a, 0, "chars", Value::None()), left, right)); });
  }
  if (name == "split") {
    return bind([s](Args& a) {
      return Value(Split(s, Arg(a, 0, "sep", Value::None()), IntArg(a, 1, "maxsplit", -1)));
    });
  }
  if (name == "rsplit") {
    return bind([s](Args& a) {
      std::int64_t maxsplit = IntArg(a, 1, "maxsplit", -1);
      Value sep = Arg(a, 0, "sep", Value::None());
      ValueList all = Split(s, sep, -1);
      if (maxsplit < 0 || static_cast<std::int64_t>(all.size()) <= maxsplit + 1 || sep.is_none()) return Value(all);
      std::string d = sep.as_string();
      std::size_t keep = all.size() - maxsplit;
      std::string head;
      for (std::size_t i = 0; i < keep; ++i) head += (i ? d : "") + all[i].as_string();
      ValueList out{Value(head)};
      out.insert(out.end(), all.begin() + keep, all.end());
      return Value(out);
    });
  }
  if (name == "format") {
    // str.format with {}, {0} and {name} fields; format specs are not supported.
    return bind([s](Args& a) {
      std::string out;
      std::size_t auto_index = 0;
      for (std::size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if ((c == '{' || c == '}') && i + 1 < s.size() && s[i + 1] == c) {
          out.push_back(c);
          ++i;
          continue;
        }
        if (c == '}') Fail("str.format: single '}' encountered");
        if (c != '{') {
          out.push_back(c);
          continue;
        }
        std::size_t close = s.find('}', i);
        if (close == std::string::npos) Fail("str.format: single '{' encountered");
        std::string field = s.substr(i + 1, close - i - 1);
        if (field.find_first_of(":!") != std::string::npos) Fail("str.format: format specs are not supported");
        Value v;
        if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
          std::size_t index = field.empty() ? auto_index++ : std::stoul(field.substr(0, 9));
          if (index >= a.positional.size()) Fail("str.format: replacement index ", index, " out of range");
          v = a.positional[index];
        } else {
          bool found = false;
          for (auto& [k, kv] : a.keyword) {
            if (k == field) v = kv, found = true;
          }
          if (!found) Fail("str.format: missing keyword '", field, "'");
        }
        out += v.Str();
        i = close;
      }
      return Value(out);
    });
  }
  if (name == "upper") return bind([s](Args&) { return Value(Upper(s)); });
  if (name == "lower") return bind([s](Args&) { return Value(ToLower(s)); });
  if (name == "title") return bind([s](Args&) { return Value(Title(s)); });
  if (name == "capitalize") return bind([s](Args&) { return Value(Capitalize(s)); });
  if (name == "replace") {
    return bind([s](Args& a) {
      return Value(Replace(s, Arg(a, 0, "old").Str(), Arg(a, 1, "new").Str(), IntArg(a, 2, "count", -1)));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    return bind([s, name](Args& a) {
      Value sub = Arg(a, 0, "sub");
      if (!sub.is_string()) Fail("str.", name, ": expected a string");
      const std::string& x = sub.as_string();
      if (name == "count") {
        if (x.empty()) return Value(PyLen(Value(s)) + 1);
        std::int64_t n = 0;
        for (std::size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
        return Value(n);
      }
      std::size_t p = name == "rfind" ? s.rfind(x) : s.find(x);
      if (p == std::string::npos) {
        if (name == "index") Fail("substring not found");
        return Value(std::int64_t{-1});
      }
      return Value(PyLen(Value(s.substr(0, p))));
    });
  }
  if (name == "join") {
    return bind([s](Args& a) {
      std::string out;
      bool first = true;
      for (const Value& v : Iterate(Arg(a, 0, "iterable"))) {
        if (!v.is_string()) Fail("str.join: expected str instance, ", v.TypeName(), " found");
        if (!first) out += s;
        first = false;
        out += v.as_string();
      }
      return Value(out);
    });
  }
  if (name == "splitlines") {
    return bind([s](Args&) {
      ValueList out;
      std::size_t prev = 0;
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
          out.emplace_back(s.substr(prev, i - prev));
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
          prev = i + 1;
        }
      }
      if (prev < s.size()) out.emplace_back(s.substr(prev));
      return Value(out);
    });
  }
  if (name == "isdigit") return bind([s](Args&) { return Value(AllChars(s, [](char32_t c) { return c >= '0' && c <= '9'; })); });
  if (name == "isspace") return bind([s](Args&) { return Value(AllChars(s, IsPySpace)); });
  if (name == "isalpha") {
    return bind([s](Args&) {
      return Value(AllChars(s, [](char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }));
    });
  }
  if (name == "isalnum") {
    return bind([s](Args&) {
      return Value(AllChars(s, [](char32_t c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
      }));
    });
  }
  if (name == "islower") return bind([s](Args&) { return Value(ToLower(s) == s && Upper(s) != s); });
  if (name == "isupper") return bind([s](Args&) { return Value(Upper(s) == s && ToLower(s) != s); });
  return Value::Undefined(name);
}

Value Unsafe(const Value& self, const std::string& name) {
  std::string type = self.TypeName();
  return Value::MakeFunction(name, [type, name](Args&) -> Value {
    Fail("access to attribute '", name, "' of '", type, "' object is unsafe");
  });
}

bool IsMutator(const std::string& name) {
  static const char* kNames[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
                                 "update", "setdefault", "popitem"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

}  // namespace

Value Builtins::Method(const Value& self, const std::string& name) {
  if (self.is_string()) return StringMethod(self, name);
  if (self.is_list()) {
    if (IsMutator(name)) return Unsafe(self, name);
    if (name == "index" || name == "count") {
      Value list = self;
      return Value::MakeFunction("list." + name, [list, name](Args& a) {
        Value x = Arg(a, 0, "value");
        std::int64_t n = 0, i = 0;
        for (const Value& v : list.as_list()) {
          if (Equal(v, x)) {
            if (name == "index") return Value(i);
            ++n;
          }
          ++i;
        }
        if (name == "index") Fail("list.index(x): x not in list");
        return Value(n);
      });
    }
    return Value::Undefined(name);
  }
  if (self.is_dict() && !self.as_dict().is_namespace) {
    if (IsMutator(name)) return Unsafe(self, name);
    Value dict = self;
    if (name == "items" || name == "keys" || name == "values") {
      return Value::MakeFunction("dict." + name, [dict, name](Args&) {
        ValueList out;
        for (const auto& [k, v] : dict.as_dict().items) {
          if (name == "items") {
            out.push_back(Value::Tuple(ValueList{Value(k), v}));
          } else {
            out.push_back(name == "keys" ? Value(k) : v);
          }
        }
        return Value(out);
      });
    }
    if (name == "get") {
      return Value::MakeFunction("dict.get", [dict](Args& a) {
        Value key = Arg(a, 0, "key");
        if (key.is_string()) {
          if (const Value* v = dict.as_dict().Find(key.as_string())) return *v;
        }
        return Arg(a, 1, "default", Value::None());
      });
    }
  }
  return Value::Undefined(name);
}

Value Builtins::Global(const std::string& name) {
  if (name == "range") {
    return Value::MakeFunction("range", [](Args& a) {
      std::int64_t start = 0, stop, step = 1;
      auto num = [](const Value& v) {
        if (!v.is_int()) Fail("range: expected integers, got ", v.TypeName());
        return v.as_int();
      };
      if (a.positional.size() == 1) {
        stop = num(a.positional[0]);
      } else if (a.positional.size() == 2 || a.positional.size() == 3) {
        start = num(a.positional[0]);
        stop = num(a.positional[1]);
        if (a.positional.size() == 3) step = num(a.positional[2]);
      } else {
        Fail("range: expected 1 to 3 arguments");
      }
      if (step == 0) Fail("range: step must not be zero");
      ValueList out;
      for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
        out.emplace_back(i);
        if (out.size() > 1'000'000) Fail("range: too many items");
        if (__builtin_add_overflow(i, step, &i)) break;
      }
      return Value(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    bool is_namespace = name == "namespace";
    return Value::MakeFunction(name, [is_namespace](Args& a) {
      auto d = std::make_shared<Dict>();
      d->is_namespace = is_namespace;
      for (const Value& p : a.positional) {
        if (!p.is_dict()) Fail(is_namespace ? "namespace" : "dict", ": positional argument must be a mapping");
        for (const auto& [k, v] : p.as_dict().items) d->Set(k, v);
      }
      for (const auto& [k, v] : a.keyword) d->Set(k, v);
      return Value(std::move(d));
    });
  }
  if (name == "raise_exception") {
    return Value::MakeFunction(name, [](Args& a) -> Value {
      Fail("raise_exception: ", a.positional.empty() ? std::string("error") : a.positional[0].Str());
    });
  }
  if (name == "strftime_now") {
    return Value::MakeFunction(name, [](Args& a) {
      std::string fmt = Arg(a, 0, "format").Str();
      std::time_t now = std::time(nullptr);
      std::tm tm{};
      localtime_r(&now, &tm);
      char buf[256];
      std::size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
      return Value(std::string(buf, n));
    });
  }
  return Value::Undefined(name);
}

}  // namespace fission::tokenizer::jinja
