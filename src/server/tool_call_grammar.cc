#include "server/tool_call_grammar.h"

#include "base/error.h"
#include "grammar/json_schema.h"
#include "grammar/json_text.h"

namespace fission::server {
namespace {

using grammar::Grammar;

struct CallMarkup {
  std::string block_open, block_close;  // around all the calls
  std::string call_open;                // before the function name
  std::string between_name_and_args;
  std::string call_close;
  std::string separator;  // between calls
  bool json_name = false;  // the name as a JSON string (qwen)
};

CallMarkup MarkupOf(const std::string& parser) {
  if (parser == "qwen") return {"", "", "<tool_call>\n{\"name\": ", ", \"arguments\": ", "}\n</tool_call>", "\n", true};
  if (parser == "deepseekv3")
    return {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
            "\n```json\n", "\n```<｜tool▁call▁end｜>", "\n"};
  if (parser == "deepseekv31")
    return {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
            "<｜tool▁call▁end｜>", ""};
  Fail("tool_choice 'required' and named functions are enforced for the qwen, deepseekv3 and deepseekv31 tool-call "
       "parsers; --tool-call-parser ", parser, " writes arguments as tagged values, which are not constrained yet");
}

// One call of `tool`: its markup around the name and the arguments of its schema.
Grammar::Node Call(const CallMarkup& m, const OrderedJson& tool, Grammar* g) {
  const std::string name = tool["name"].get<std::string>();
  const OrderedJson& parameters = tool["parameters"];
  Grammar::Node args;
  try {
    // No schema, or an empty one, takes any object (the parsers need an object).
    args = parameters.is_object() && !parameters.empty() ? grammar::JsonSchemaExpression(parameters, g)
                                                         : g->Ref(grammar::JsonObjectRule(g));
  } catch (const Error& e) {
    Fail("the parameters of tool '", Abbreviate(name), "': ", e.what());
  }
  return g->Seq({g->Literal(m.call_open), g->Literal(m.json_name ? grammar::JsonQuote(name) : name),
                 g->Literal(m.between_name_and_args), args, g->Literal(m.call_close)});
}

}  // namespace

bool ToolCallGrammarSupports(const std::string& parser) {
  return parser == "qwen" || parser == "deepseekv3" || parser == "deepseekv31";
}

Grammar ToolCallGrammar(const OrderedJson& d) {
  const CallMarkup m = MarkupOf(d["parser"].get<std::string>());
  Grammar g;
  const std::int32_t root = g.AddRule("root");
  std::vector<Grammar::Node> calls;
  for (const OrderedJson& tool : d["tools"])
    if (d["name"].is_null() || tool["name"] == d["name"]) calls.push_back(Call(m, tool, &g));
  if (calls.empty()) Fail("no tool to call");
  // Any of the calls, once or (parallel) repeatedly.
  const std::int32_t call = g.AddRule("call");
  g.Define(call, g.Alt(std::move(calls)));
  Grammar::Node body = g.Ref(call);
  if (d["parallel"].get<bool>()) body = g.Seq({body, g.Star(g.Seq({g.Literal(m.separator), g.Ref(call)}))});
  g.Define(root, g.Seq({g.Literal(m.block_open), body, g.Literal(m.block_close)}));
  g.set_root(root);
  return g;
}

}  // namespace fission::server
