// Syntax tree of the chat-template Jinja subset.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace fission::tokenizer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // items
    kTuple,      // items
    kDict,       // items: key, value, key, value, ...
    kAttr,       // items[0].name
    kSubscript,  // items[0][items[1]]
    kSlice,      // items[0][a:b:c]; items[1..3] may be null
    kCall,       // items[0](items[1..], kwargs)
    kFilter,     // items[0] | name(items[1..], kwargs)
    kTest,       // items[0] is [not] name(items[1..])
    kUnary,      // op items[0]: "-", "+", "not"
    kBinary,     // items[0] op items[1]
    kCondition,  // items[1] if items[0] else items[2] (items[2] may be null)
  };
  Kind kind;
  int line = 0, column = 0;
  std::string name;  // name, attribute, filter, test or operator
  Value value;       // literal
  bool negated = false;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // conditions[i] -> bodies[i]; else_body
    kFor,       // targets in expr [if cond]; body; else_body
    kSet,       // targets (or target.attr) = expr
    kSetBlock,  // {% set target %}body{% endset %}, optional filter in expr
    kMacro,     // name(params with defaults) body
    kFilterBlock,  // {% filter f %}body{% endfilter %}: expr is the filter applied to a placeholder
    kBreak,
    kContinue,
    kScope,     // a body rendered in place ({% generation %})
  };
  Kind kind;
  int line = 0, column = 0;
  std::string text;
  std::vector<std::string> targets;
  std::string attr;  // set ns.attr = ...
  ExprPtr expr;
  ExprPtr condition;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters (default may be null)
};

}  // namespace fission::tokenizer::jinja
