#include "tokenizer/jinja_evaluator.h"

#include <cmath>

#include "base/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_util.h"

namespace fission::tokenizer::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

// Output beyond this many bytes means a runaway template.
constexpr std::size_t kMaxOutput = 64 << 20;
constexpr int kMaxDepth = 256;
// Statements executed per render: a bound on runaway loops.
constexpr std::int64_t kMaxSteps = 2'000'000;

// Marks an error message that already carries a location.
struct LocatedError : Error {
  using Error::Error;
};

class Evaluator {
 public:
  Evaluator(const std::unordered_map<std::string, Value>& context, const std::string& name) : name_(name) {
    frames_.emplace_back(context.begin(), context.end());
  }

  std::string Run(const Body& body) {
    std::string out;
    try {
      Exec(body, &out);
    } catch (const LocatedError& e) {
      throw Error(e.what());
    }
    return out;
  }

 private:
  template <typename Node>
  [[noreturn]] void Raise(const Node& node, const std::string& message) const {
    throw LocatedError(StrCat(name_, ":", node.line, ":", node.column, ": ", message));
  }

  // Runs `fn`, adding the node's location to errors that have none.
  template <typename Node, typename Fn>
  auto Located(const Node& node, Fn&& fn) -> decltype(fn()) {
    try {
      return fn();
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& e) {
      Raise(node, e.what());
    }
  }

  Value Lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    Value global = Builtins::Global(name);
    if (!global.is_undefined()) return global;
    return Value::Undefined(name);
  }

  void Assign(const std::string& name, Value v) { frames_.back()[name] = std::move(v); }

  void AssignTargets(const Stmt& s, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      Assign(targets[0], v);
      return;
    }
    ValueList items = Located(s, [&] { return Iterate(v); });
    if (items.size() != targets.size()) {
      Raise(s, StrCat("cannot unpack ", items.size(), " values into ", targets.size(), " targets"));
    }
    for (std::size_t i = 0; i < targets.size(); ++i) Assign(targets[i], items[i]);
  }

  Flow Exec(const Body& body, std::string* out) {
    for (const StmtPtr& s : body) {
      Flow f = ExecStmt(*s, out);
      if (f != Flow::kNormal) return f;
      if (out->size() > kMaxOutput) Raise(*s, "template output exceeds the size limit");
    }
    return Flow::kNormal;
  }

  Flow ExecStmt(const Stmt& s, std::string* out) {
    if (++steps_ > kMaxSteps) Raise(s, "template exceeds the evaluation budget");
    switch (s.kind) {
      case Stmt::Kind::kText:
        *out += s.text;
        return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        Value v = Eval(*s.expr);
        *out += Located(s, [&] { return v.Str(); });
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (std::size_t i = 0; i < s.conditions.size(); ++i) {
          if (Eval(*s.conditions[i]).Truthy()) return Exec(s.bodies[i], out);
        }
        return Exec(s.else_body, out);
      case Stmt::Kind::kFor:
        return ExecFor(s, out);
      case Stmt::Kind::kSet: {
        Value v = Eval(*s.expr);
        if (!s.attr.empty()) {
          Value target = Lookup(s.targets[0]);
          if (!target.is_dict() || !target.as_dict().is_namespace) {
            Raise(s, StrCat("cannot assign attribute '", s.attr, "' on '", s.targets[0], "': not a namespace"));
          }
          target.as_dict().Set(s.attr, std::move(v));
        } else {
          AssignTargets(s, s.targets, v);
        }
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        Exec(s.body, &captured);
        Value v(std::move(captured));
        if (s.expr) v = ApplyFilterChain(*s.expr, v);
        Assign(s.targets[0], std::move(v));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        DefineMacro(s);
        return Flow::kNormal;
      case Stmt::Kind::kFilterBlock: {
        std::string captured;
        Exec(s.body, &captured);
        *out += ApplyFilterChain(*s.expr, Value(std::move(captured))).Str();
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak:
        if (loop_depth_ == 0) Raise(s, "'break' outside a loop");
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        if (loop_depth_ == 0) Raise(s, "'continue' outside a loop");
        return Flow::kContinue;
      case Stmt::Kind::kScope:
        return Exec(s.body, out);
    }
    return Flow::kNormal;
  }

  // Evaluates a filter chain built on the " block" placeholder with `input` in its place.
  Value ApplyFilterChain(const Expr& chain, const Value& input) {
    frames_.emplace_back();
    frames_.back()[" block"] = input;
    Value v = Eval(chain);
    frames_.pop_back();
    return v;
  }

  Flow ExecFor(const Stmt& s, std::string* out) {
    Value iterable = Eval(*s.expr);
    ValueList items = Located(s, [&] { return Iterate(iterable); });
    if (s.condition) {
      // The loop filter runs before loop.* is computed.
      ValueList kept;
      frames_.emplace_back();
      for (const Value& item : items) {
        AssignTargets(s, s.targets, item);
        if (Eval(*s.condition).Truthy()) kept.push_back(item);
      }
      frames_.pop_back();
      items = std::move(kept);
    }
    if (items.empty()) return Exec(s.else_body, out);
    if (++depth_ > kMaxDepth) Raise(s, "nesting too deep");
    frames_.emplace_back();
    ++loop_depth_;
    std::int64_t n = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < n; ++i) {
      if (++steps_ > kMaxSteps) Raise(s, "template exceeds the evaluation budget");
      auto loop = std::make_shared<Dict>();
      loop->items = {{"index", Value(i + 1)},
                     {"index0", Value(i)},
                     {"revindex", Value(n - i)},
                     {"revindex0", Value(n - i - 1)},
                     {"first", Value(i == 0)},
                     {"last", Value(i == n - 1)},
                     {"length", Value(n)},
                     {"depth", Value(std::int64_t{1})},
                     {"depth0", Value(std::int64_t{0})},
                     {"previtem", i > 0 ? items[i - 1] : Value::Undefined("previtem")},
                     {"nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("nextitem")}};
      loop->items.emplace_back("cycle", Value::MakeFunction("loop.cycle", [i](Args& a) {
        if (a.positional.empty()) Fail("loop.cycle: no items");
        return a.positional[i % a.positional.size()];
      }));
      Assign("loop", Value(std::move(loop)));
      AssignTargets(s, s.targets, items[i]);
      Flow f = Exec(s.body, out);
      if (f == Flow::kBreak) break;
    }
    --loop_depth_;
    frames_.pop_back();
    --depth_;
    return Flow::kNormal;
  }

  void DefineMacro(const Stmt& s) {
    const Stmt* macro = &s;
    Assign(s.targets[0], Value::MakeFunction(s.targets[0], [this, macro](Args& args) {
      if (++depth_ > kMaxDepth) Raise(*macro, "macro recursion too deep");
      std::unordered_map<std::string, Value> frame;
      std::size_t i = 0;
      for (const auto& [param, fallback] : macro->params) {
        Value v;
        bool found = false;
        for (auto& [k, kv] : args.keyword) {
          if (k == param) v = kv, found = true;
        }
        if (!found && i < args.positional.size()) v = args.positional[i], found = true;
        if (!found && fallback) v = Eval(*fallback);
        if (!found && !fallback) v = Value::Undefined(param);
        frame[param] = v;
        ++i;
      }
      ValueList varargs;
      for (; i < args.positional.size(); ++i) varargs.push_back(args.positional[i]);
      frame["varargs"] = Value(std::move(varargs));
      frames_.push_back(std::move(frame));
      std::size_t saved_loops = loop_depth_;
      loop_depth_ = 0;
      std::string out;
      Exec(macro->body, &out);
      loop_depth_ = saved_loops;
      frames_.pop_back();
      --depth_;
      return Value(std::move(out));
    }));
  }

  void EvalArgs(const Expr& e, std::size_t first, Args* args) {
    for (std::size_t i = first; i < e.items.size(); ++i) args->positional.push_back(Eval(*e.items[i]));
    for (const auto& [k, v] : e.kwargs) args->keyword.emplace_back(k, Eval(*v));
  }

  Value Eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.value;
      case Expr::Kind::kName:
        return Lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        ValueList items;
        for (const auto& item : e.items) items.push_back(Eval(*item));
        return e.kind == Expr::Kind::kTuple ? Value::Tuple(std::move(items)) : Value(std::move(items));
      }
      case Expr::Kind::kDict: {
        auto dict = std::make_shared<Dict>();
        for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
          Value key = Eval(*e.items[i]);
          if (!key.is_string()) Raise(e, "dict keys must be strings");
          dict->Set(key.as_string(), Eval(*e.items[i + 1]));
        }
        return Value(std::move(dict));
      }
      case Expr::Kind::kAttr: {
        Value object = Eval(*e.items[0]);
        return Located(e, [&] { return GetAttr(object, e.name); });
      }
      case Expr::Kind::kSubscript: {
        Value object = Eval(*e.items[0]);
        Value key = Eval(*e.items[1]);
        return Located(e, [&] { return GetItem(object, key); });
      }
      case Expr::Kind::kSlice: {
        Value object = Eval(*e.items[0]);
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (e.items[i + 1]) parts[i] = Eval(*e.items[i + 1]);
        }
        return Located(e, [&] { return SliceValue(object, parts[0], parts[1], parts[2]); });
      }
      case Expr::Kind::kCall: {
        Value callee = Eval(*e.items[0]);
        Args args;
        EvalArgs(e, 1, &args);
        if (!callee.is_function()) {
          std::string what = callee.is_undefined() ? StrCat("'", callee.name(), "' is undefined")
                                                   : StrCat("'", callee.TypeName(), "' object is not callable");
          Raise(e, what);
        }
        return Located(e, [&] { return callee.as_function()(args); });
      }
      case Expr::Kind::kFilter: {
        Value input = Eval(*e.items[0]);
        Args args;
        EvalArgs(e, 1, &args);
        return Located(e, [&] { return Builtins::Filter(e.name, input, args); });
      }
      case Expr::Kind::kTest: {
        Value input = Eval(*e.items[0]);
        Args args;
        EvalArgs(e, 1, &args);
        if (!Builtins::HasTest(e.name)) Raise(e, StrCat("no test named '", e.name, "'"));
        bool r = Located(e, [&] { return Builtins::Test(e.name, input, args); });
        return Value(e.negated ? !r : r);
      }
      case Expr::Kind::kUnary: {
        Value v = Eval(*e.items[0]);
        if (e.name == "not") return Value(!v.Truthy());
        if (v.is_float()) return Value(e.name == "-" ? -v.as_double() : v.as_double());
        if (v.is_number()) {
          if (e.name == "-" && v.as_int() == INT64_MIN) Raise(e, "integer overflow in unary -");
          return Value(e.name == "-" ? -v.as_int() : v.as_int());
        }
        Raise(e, StrCat("bad operand type for unary ", e.name, ": '", v.TypeName(), "'"));
      }
      case Expr::Kind::kBinary:
        return EvalBinary(e);
      case Expr::Kind::kCondition: {
        if (Eval(*e.items[0]).Truthy()) return Eval(*e.items[1]);
        if (e.items[2]) return Eval(*e.items[2]);
        return Value::Undefined();
      }
    }
    return Value();
  }

  Value EvalBinary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = Eval(*e.items[0]);
      return a.Truthy() ? Eval(*e.items[1]) : a;
    }
    if (op == "or") {
      Value a = Eval(*e.items[0]);
      return a.Truthy() ? a : Eval(*e.items[1]);
    }
    Value a = Eval(*e.items[0]);
    Value b = Eval(*e.items[1]);
    if (op == "==") return Value(Equal(a, b));
    if (op == "!=") return Value(!Equal(a, b));
    if (op == "~") return Value(a.Str() + b.Str());
    if (op == "in" || op == "not in") {
      bool r = Located(e, [&] { return Contains(b, a); });
      return Value(op == "in" ? r : !r);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      if (a.is_undefined() || b.is_undefined()) Raise(e, "comparison with an undefined value");
      int c = Located(e, [&] { return Compare(a, b, op.c_str()); });
      return Value(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    auto type_error = [&]() {
      if (a.is_undefined()) Raise(e, StrCat("'", a.name(), "' is undefined"));
      if (b.is_undefined()) Raise(e, StrCat("'", b.name(), "' is undefined"));
      Raise(e, StrCat("unsupported operand type(s) for ", op, ": '", a.TypeName(), "' and '", b.TypeName(), "'"));
    };
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
      if (a.is_list() && b.is_list()) {
        ValueList items = a.as_list();
        items.insert(items.end(), b.as_list().begin(), b.as_list().end());
        return Value(std::move(items));
      }
    }
    if (op == "*") {
      const Value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
      const Value* count = seq == &a ? &b : &a;
      if (seq != nullptr && (count->is_int() || count->is_bool())) {
        std::int64_t n = std::max<std::int64_t>(0, count->as_int()), total = 0;
        if (__builtin_mul_overflow(n, std::max<std::int64_t>(1, PyLen(*seq)), &total) ||
            total > static_cast<std::int64_t>(kMaxOutput)) {
          Raise(e, "repetition result too large");
        }
        if (seq->is_string()) {
          std::string out;
          for (std::int64_t i = 0; i < n; ++i) out += seq->as_string();
          return Value(out);
        }
        ValueList out;
        for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->as_list().begin(), seq->as_list().end());
        return Value(std::move(out));
      }
    }
    if (op == "%" && a.is_string()) {
      Args args;
      args.positional = b.is_list() ? b.as_list() : ValueList{b};
      return Located(e, [&] { return Builtins::Filter("format", a, args); });
    }
    if (!a.is_number() || !b.is_number()) type_error();
    bool floats = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_double() == 0) Raise(e, "division by zero");
      return Value(a.as_double() / b.as_double());
    }
    if (!floats) {
      // Python integers are unbounded; ours are 64-bit and overflow is an error.
      std::int64_t x = a.as_int(), y = b.as_int(), r = 0;
      auto overflow = [&]() -> Value { Raise(e, StrCat("integer overflow in ", op)); };
      if (op == "+") return __builtin_add_overflow(x, y, &r) ? overflow() : Value(r);
      if (op == "-") return __builtin_sub_overflow(x, y, &r) ? overflow() : Value(r);
      if (op == "*") return __builtin_mul_overflow(x, y, &r) ? overflow() : Value(r);
      if (op == "//" || op == "%") {
        if (y == 0) Raise(e, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return op == "%" ? Value(std::int64_t{0}) : overflow();
        std::int64_t q = x / y;
        r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;
        return Value(op == "//" ? q : r);
      }
      if (op == "**") {
        if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
        std::int64_t result = 1;
        for (std::int64_t i = 0; i < y; ++i) {
          if (__builtin_mul_overflow(result, x, &result)) return overflow();
          if (result == 0 || result == 1) break;  // further factors change nothing (x is 0 or 1)
          if (result == -1 && x == -1) {
            result = (y % 2) ? -1 : 1;
            break;
          }
        }
        return Value(result);
      }
    } else {
      double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (op == "//" || op == "%") {
        if (y == 0) Raise(e, "float division or modulo by zero");
        double q = std::floor(x / y);
        return Value(op == "//" ? q : x - q * y);
      }
      if (op == "**") return Value(std::pow(x, y));
    }
    Raise(e, StrCat("unsupported operator ", op));
  }

  std::string name_;
  std::vector<std::unordered_map<std::string, Value>> frames_;
  int depth_ = 0;
  std::size_t loop_depth_ = 0;
  std::int64_t steps_ = 0;
};

}  // namespace

std::string Render(const Body& body, const std::unordered_map<std::string, Value>& context,
                   const std::string& source_name) {
  return Evaluator(context, source_name).Run(body);
}

}  // namespace fission::tokenizer::jinja
