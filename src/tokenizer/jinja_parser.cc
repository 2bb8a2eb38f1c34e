#include "tokenizer/jinja_parser.h"

#include <cstdlib>

#include "base/error.h"

namespace fission::tokenizer::jinja {
namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : tokens_(tokens), name_(name) {}

  Body ParseTemplate() {
    std::string end;
    Body body = ParseBody({}, &end);
    return body;
  }

 private:
  const Token& Peek(std::size_t ahead = 0) const {
    std::size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& Next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  [[noreturn]] void Error(const Token& t, const std::string& message) const {
    Fail(name_, ":", t.line, ":", t.column, ": ", message);
  }
  bool IsOp(const char* op, std::size_t ahead = 0) const {
    const Token& t = Peek(ahead);
    return t.kind == TokenKind::kOperator && t.value == op;
  }
  bool IsName(const char* name, std::size_t ahead = 0) const {
    const Token& t = Peek(ahead);
    return t.kind == TokenKind::kName && t.value == name;
  }
  void ExpectOp(const char* op) {
    if (!IsOp(op)) Error(Peek(), StrCat("expected '", op, "', got '", Describe(Peek()), "'"));
    Next();
  }
  std::string ExpectName() {
    if (Peek().kind != TokenKind::kName) Error(Peek(), StrCat("expected a name, got '", Describe(Peek()), "'"));
    return Next().value;
  }
  void ExpectBlockEnd() {
    if (Peek().kind != TokenKind::kBlockEnd) Error(Peek(), StrCat("expected '%}', got '", Describe(Peek()), "'"));
    Next();
  }
  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEof: return "end of template";
      case TokenKind::kText: return "text";
      case TokenKind::kString: return "string";
      default: return t.value;
    }
  }

  // Parses statements until one of `enders` ({% name %}) and returns which one in *end.
  Body ParseBody(const std::vector<std::string>& enders, std::string* end) {
    Body body;
    while (true) {
      const Token& t = Peek();
      if (t.kind == TokenKind::kEof) {
        if (!enders.empty()) Error(t, StrCat("unexpected end of template, expected '{% ", enders[0], " %}'"));
        return body;
      }
      if (t.kind == TokenKind::kText) {
        auto s = Make(Stmt::Kind::kText, t);
        s->text = t.value;
        body.push_back(std::move(s));
        Next();
      } else if (t.kind == TokenKind::kVarBegin) {
        Next();
        auto s = Make(Stmt::Kind::kOutput, t);
        s->expr = ParseExpression();
        if (Peek().kind != TokenKind::kVarEnd) Error(Peek(), StrCat("expected '}}', got '", Describe(Peek()), "'"));
        Next();
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::kBlockBegin) {
        const Token& keyword = Peek(1);
        if (keyword.kind != TokenKind::kName) Error(keyword, "expected a statement name after '{%'");
        for (const std::string& e : enders) {
          if (keyword.value == e) {
            Next();
            Next();
            *end = e;
            return body;
          }
        }
        Next();
        body.push_back(ParseStatement());
      } else {
        Error(t, StrCat("unexpected '", Describe(t), "'"));
      }
    }
  }

  StmtPtr Make(Stmt::Kind kind, const Token& t) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = t.line;
    s->column = t.column;
    return s;
  }

  // Bounds the recursion of deeply nested input.
  struct DepthGuard {
    Parser* parser;
    DepthGuard(Parser* p, const Token& t) : parser(p) {
      if (++parser->depth_ > kMaxNesting) parser->Error(t, "nesting too deep");
    }
    ~DepthGuard() { --parser->depth_; }
  };
  static constexpr int kMaxNesting = 200;

  StmtPtr ParseStatement() {
    DepthGuard guard(this, Peek());
    const Token& kw = Next();
    const std::string& k = kw.value;
    if (k == "if") return ParseIf(kw);
    if (k == "for") return ParseFor(kw);
    if (k == "set") return ParseSet(kw);
    if (k == "macro") return ParseMacro(kw);
    if (k == "filter") return ParseFilterBlock(kw);
    if (k == "break" || k == "continue") {
      ExpectBlockEnd();
      return Make(k == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, kw);
    }
    if (k == "generation") {
      ExpectBlockEnd();
      auto s = Make(Stmt::Kind::kScope, kw);
      std::string end;
      s->body = ParseBody({"endgeneration"}, &end);
      ExpectBlockEnd();
      return s;
    }
    Error(kw, StrCat("unknown or unsupported statement '", k, "'"));
  }

  StmtPtr ParseIf(const Token& kw) {
    auto s = Make(Stmt::Kind::kIf, kw);
    s->conditions.push_back(ParseExpression());
    ExpectBlockEnd();
    while (true) {
      std::string end;
      Body body = ParseBody({"elif", "else", "endif"}, &end);
      s->bodies.push_back(std::move(body));
      if (end == "elif") {
        s->conditions.push_back(ParseExpression());
        ExpectBlockEnd();
        continue;
      }
      ExpectBlockEnd();
      if (end == "else") {
        s->else_body = ParseBody({"endif"}, &end);
        ExpectBlockEnd();
      }
      return s;
    }
  }

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> targets;
    bool paren = IsOp("(");
    if (paren) Next();
    targets.push_back(ExpectName());
    while (IsOp(",")) {
      Next();
      targets.push_back(ExpectName());
    }
    if (paren) ExpectOp(")");
    return targets;
  }

  StmtPtr ParseFor(const Token& kw) {
    auto s = Make(Stmt::Kind::kFor, kw);
    s->targets = ParseTargets();
    if (!IsName("in")) Error(Peek(), "expected 'in' in for loop");
    Next();
    s->expr = ParseExpression(/*allow_condition=*/false);
    if (IsName("if")) {
      Next();
      s->condition = ParseExpression();
    }
    if (IsName("recursive")) Error(Peek(), "recursive loops are not supported");
    ExpectBlockEnd();
    std::string end;
    s->body = ParseBody({"else", "endfor"}, &end);
    ExpectBlockEnd();
    if (end == "else") {
      s->else_body = ParseBody({"endfor"}, &end);
      ExpectBlockEnd();
    }
    return s;
  }

  StmtPtr ParseSet(const Token& kw) {
    std::string first = ExpectName();
    if (IsOp(".")) {
      Next();
      auto s = Make(Stmt::Kind::kSet, kw);
      s->targets = {first};
      s->attr = ExpectName();
      ExpectOp("=");
      s->expr = ParseExpression();
      ExpectBlockEnd();
      return s;
    }
    std::vector<std::string> targets{first};
    while (IsOp(",")) {
      Next();
      targets.push_back(ExpectName());
    }
    if (IsOp("=")) {
      Next();
      auto s = Make(Stmt::Kind::kSet, kw);
      s->targets = std::move(targets);
      s->expr = ParseTupleOrExpression();
      ExpectBlockEnd();
      return s;
    }
    if (targets.size() != 1) Error(Peek(), "expected '=' after set targets");
    auto s = Make(Stmt::Kind::kSetBlock, kw);
    s->targets = std::move(targets);
    if (IsOp("|")) s->expr = ParseFilterChain(Placeholder(Peek()));
    ExpectBlockEnd();
    std::string end;
    s->body = ParseBody({"endset"}, &end);
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseMacro(const Token& kw) {
    auto s = Make(Stmt::Kind::kMacro, kw);
    s->targets = {ExpectName()};
    ExpectOp("(");
    while (!IsOp(")")) {
      std::string param = ExpectName();
      ExprPtr fallback;
      if (IsOp("=")) {
        Next();
        fallback = ParseExpression();
      }
      s->params.emplace_back(param, std::move(fallback));
      if (!IsOp(")")) ExpectOp(",");
    }
    Next();
    ExpectBlockEnd();
    std::string end;
    s->body = ParseBody({"endmacro"}, &end);
    if (Peek().kind == TokenKind::kName) Next();  // {% endmacro name %}
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseFilterBlock(const Token& kw) {
    auto s = Make(Stmt::Kind::kFilterBlock, kw);
    // Parse "f(args) | g" as filters applied to a placeholder name.
    ExprPtr base = Placeholder(kw);
    s->expr = ParseFilterBody(std::move(base));
    while (IsOp("|")) {
      Next();
      s->expr = ParseFilterBody(std::move(s->expr));
    }
    ExpectBlockEnd();
    std::string end;
    s->body = ParseBody({"endfilter"}, &end);
    ExpectBlockEnd();
    return s;
  }

  ExprPtr Placeholder(const Token& t) {
    auto e = MakeExpr(Expr::Kind::kName, t);
    e->name = " block";
    return e;
  }

  ExprPtr MakeExpr(Expr::Kind kind, const Token& t) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = t.line;
    e->column = t.column;
    return e;
  }

  // An expression, or a bare tuple "a, b" (as in set x = a, b).
  ExprPtr ParseTupleOrExpression() {
    const Token& t = Peek();
    ExprPtr first = ParseExpression();
    if (!IsOp(",")) return first;
    auto tuple = MakeExpr(Expr::Kind::kTuple, t);
    tuple->items.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Peek().kind == TokenKind::kBlockEnd) break;
      tuple->items.push_back(ParseExpression());
    }
    return tuple;
  }

  ExprPtr ParseExpression(bool allow_condition = true) {
    DepthGuard guard(this, Peek());
    ExprPtr e = ParseOr();
    while (allow_condition && IsName("if")) {
      const Token& t = Next();
      auto cond = MakeExpr(Expr::Kind::kCondition, t);
      cond->items.push_back(ParseOr());
      cond->items.push_back(std::move(e));
      if (IsName("else")) {
        Next();
        cond->items.push_back(ParseExpression());
      } else {
        cond->items.push_back(nullptr);
      }
      e = std::move(cond);
    }
    return e;
  }

  ExprPtr Binary(const Token& t, const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = MakeExpr(Expr::Kind::kBinary, t);
    e->name = op;
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr e = ParseAnd();
    while (IsName("or")) {
      const Token& t = Next();
      e = Binary(t, "or", std::move(e), ParseAnd());
    }
    return e;
  }
  ExprPtr ParseAnd() {
    ExprPtr e = ParseNot();
    while (IsName("and")) {
      const Token& t = Next();
      e = Binary(t, "and", std::move(e), ParseNot());
    }
    return e;
  }
  ExprPtr ParseNot() {
    DepthGuard guard(this, Peek());
    if (IsName("not")) {
      const Token& t = Next();
      auto e = MakeExpr(Expr::Kind::kUnary, t);
      e->name = "not";
      e->items.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }
  ExprPtr ParseCompare() {
    ExprPtr e = ParseMath1();
    while (true) {
      const Token& t = Peek();
      std::string op;
      if (t.kind == TokenKind::kOperator &&
          (t.value == "==" || t.value == "!=" || t.value == "<" || t.value == ">" || t.value == "<=" ||
           t.value == ">=")) {
        op = t.value;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && IsName("in", 1)) {
        op = "not in";
        Next();
        Next();
      } else {
        return e;
      }
      e = Binary(t, op, std::move(e), ParseMath1());
    }
  }
  ExprPtr ParseMath1() {
    ExprPtr e = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token& t = Next();
      e = Binary(t, t.value, std::move(e), ParseConcat());
    }
    return e;
  }
  ExprPtr ParseConcat() {
    ExprPtr e = ParseMath2();
    while (IsOp("~")) {
      const Token& t = Next();
      e = Binary(t, "~", std::move(e), ParseMath2());
    }
    return e;
  }
  ExprPtr ParseMath2() {
    ExprPtr e = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& t = Next();
      e = Binary(t, t.value, std::move(e), ParsePow());
    }
    return e;
  }
  ExprPtr ParsePow() {
    ExprPtr e = ParseUnary(true);
    while (IsOp("**")) {
      const Token& t = Next();
      e = Binary(t, "**", std::move(e), ParseUnary(true));
    }
    return e;
  }
  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(this, Peek());
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      const Token& t = Next();
      e = MakeExpr(Expr::Kind::kUnary, t);
      e->name = t.value;
      e->items.push_back(ParseUnary(false));
    } else {
      e = ParsePostfix(ParsePrimary());
    }
    if (with_filter) e = ParseFilterChain(std::move(e));
    return e;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Peek();
    if (t.kind == TokenKind::kName) {
      Next();
      auto e = MakeExpr(Expr::Kind::kLiteral, t);
      if (t.value == "true" || t.value == "True") {
        e->value = Value(true);
      } else if (t.value == "false" || t.value == "False") {
        e->value = Value(false);
      } else if (t.value == "none" || t.value == "None") {
        e->value = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.value;
      }
      return e;
    }
    if (t.kind == TokenKind::kString) {
      std::string s;
      while (Peek().kind == TokenKind::kString) s += Next().value;  // adjacent literals concatenate
      auto e = MakeExpr(Expr::Kind::kLiteral, t);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat) {
      Next();
      auto e = MakeExpr(Expr::Kind::kLiteral, t);
      if (t.kind == TokenKind::kInt) {
        errno = 0;
        long long v = std::strtoll(t.value.c_str(), nullptr, 10);
        if (errno == ERANGE) Error(t, "integer literal out of range");
        e->value = Value(static_cast<std::int64_t>(v));
      } else {
        e->value = Value(std::strtod(t.value.c_str(), nullptr));
      }
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (IsOp(")")) {
        Next();
        return MakeExpr(Expr::Kind::kTuple, t);
      }
      ExprPtr first = ParseExpression();
      if (IsOp(")")) {
        Next();
        return first;
      }
      auto tuple = MakeExpr(Expr::Kind::kTuple, t);
      tuple->items.push_back(std::move(first));
      while (IsOp(",")) {
        Next();
        if (IsOp(")")) break;
        tuple->items.push_back(ParseExpression());
      }
      ExpectOp(")");
      return tuple;
    }
    if (IsOp("[")) {
      Next();
      auto list = MakeExpr(Expr::Kind::kList, t);
      while (!IsOp("]")) {
        list->items.push_back(ParseExpression());
        if (!IsOp("]")) ExpectOp(",");
      }
      Next();
      return list;
    }
    if (IsOp("{")) {
      Next();
      auto dict = MakeExpr(Expr::Kind::kDict, t);
      while (!IsOp("}")) {
        dict->items.push_back(ParseExpression());
        ExpectOp(":");
        dict->items.push_back(ParseExpression());
        if (!IsOp("}")) ExpectOp(",");
      }
      Next();
      return dict;
    }
    Error(t, StrCat("unexpected '", Describe(t), "' in expression"));
  }

  void ParseCallArgs(Expr* call) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (Peek().kind == TokenKind::kName && IsOp("=", 1)) {
        std::string key = Next().value;
        Next();
        call->kwargs.emplace_back(key, ParseExpression());
      } else {
        if (!call->kwargs.empty()) Error(Peek(), "positional argument follows keyword argument");
        call->items.push_back(ParseExpression());
      }
      if (!IsOp(")")) ExpectOp(",");
    }
    Next();
  }

  ExprPtr ParsePostfix(ExprPtr e) {
    while (true) {
      const Token& t = Peek();
      if (IsOp(".")) {
        Next();
        auto attr = MakeExpr(Expr::Kind::kAttr, t);
        const Token& name = Peek();
        if (name.kind == TokenKind::kName) {
          attr->name = Next().value;
        } else if (name.kind == TokenKind::kInt) {
          // a.0 is a[0]
          attr->kind = Expr::Kind::kSubscript;
          auto index = MakeExpr(Expr::Kind::kLiteral, name);
          index->value = Value(static_cast<std::int64_t>(std::strtoll(Next().value.c_str(), nullptr, 10)));
          attr->items.push_back(std::move(e));
          attr->items.push_back(std::move(index));
          e = std::move(attr);
          continue;
        } else {
          Error(name, "expected an attribute name after '.'");
        }
        attr->items.push_back(std::move(e));
        e = std::move(attr);
      } else if (IsOp("[")) {
        Next();
        e = ParseSubscript(std::move(e), t);
      } else if (IsOp("(")) {
        auto call = MakeExpr(Expr::Kind::kCall, t);
        call->line = e->line;  // errors point at the callee
        call->column = e->column;
        call->items.push_back(std::move(e));
        ParseCallArgs(call.get());
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr object, const Token& t) {
    ExprPtr parts[3];
    int colons = 0;
    bool is_slice = false;
    while (!IsOp("]")) {
      if (IsOp(":")) {
        Next();
        is_slice = true;
        if (++colons > 2) Error(Peek(), "too many ':' in slice");
        continue;
      }
      if (parts[colons]) Error(Peek(), "expected ':' or ']' in subscript");
      parts[colons] = ParseExpression();
    }
    Next();
    if (!is_slice) {
      if (!parts[0]) Error(t, "empty subscript");
      auto e = MakeExpr(Expr::Kind::kSubscript, t);
      e->items.push_back(std::move(object));
      e->items.push_back(std::move(parts[0]));
      return e;
    }
    auto e = MakeExpr(Expr::Kind::kSlice, t);
    e->items.push_back(std::move(object));
    for (auto& p : parts) e->items.push_back(std::move(p));
    return e;
  }

  // name or name(args) after '|'.
  ExprPtr ParseFilterBody(ExprPtr e) {
    const Token& t = Peek();
    auto filter = MakeExpr(Expr::Kind::kFilter, t);
    filter->name = ExpectName();
    while (IsOp(".")) {  // dotted filter names
      Next();
      filter->name += "." + ExpectName();
    }
    filter->items.push_back(std::move(e));
    if (IsOp("(")) ParseCallArgs(filter.get());
    return filter;
  }

  ExprPtr ParseFilterChain(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        Next();
        e = ParseFilterBody(std::move(e));
      } else if (IsName("is")) {
        const Token& t = Next();
        auto test = MakeExpr(Expr::Kind::kTest, t);
        if (IsName("not")) {
          Next();
          test->negated = true;
        }
        test->name = ExpectName();
        test->items.push_back(std::move(e));
        const Token& n = Peek();
        if (IsOp("(")) {
          ParseCallArgs(test.get());
        } else if ((n.kind == TokenKind::kName || n.kind == TokenKind::kString || n.kind == TokenKind::kInt ||
                    n.kind == TokenKind::kFloat || IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and") && !IsName("if") && !IsName("in") &&
                   !IsName("not") && !IsName("is")) {
          test->items.push_back(ParsePostfix(ParsePrimary()));
        }
        e = std::move(test);
      } else if (IsOp("(")) {
        auto call = MakeExpr(Expr::Kind::kCall, Peek());
        call->items.push_back(std::move(e));
        ParseCallArgs(call.get());
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& tokens_;
  std::string name_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body Parse(const std::vector<Token>& tokens, const std::string& source_name) {
  return Parser(tokens, source_name).ParseTemplate();
}

}  // namespace fission::tokenizer::jinja
