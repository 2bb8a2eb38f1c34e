#include "server/tool_call_grammar.h"

#include <algorithm>
#include <optional>

#include "base/error.h"
#include "grammar/json_schema.h"
#include "grammar/json_text.h"
#include "server/tool_call_parser.h"

namespace fission::server {
namespace {

using grammar::Grammar;

// The arguments of a call: the tool's `parameters` schema as its parser reads it back.
Grammar::Node JsonArguments(const OrderedJson& parameters, Grammar* g) {
  // No schema, or an empty one, takes any object (the parsers need an object).
  return parameters.is_object() && !parameters.empty() ? grammar::JsonSchemaExpression(parameters, g)
                                                       : g->Ref(grammar::JsonObjectRule(g));
}

// ---- Formats whose arguments are one JSON object (qwen, deepseekv3, deepseekv31).

struct JsonCallMarkup {
  std::string call_open;  // before the function name
  std::string between_name_and_args;
  std::string call_close;
  bool json_name = false;  // the name as a JSON string (qwen)
};

// ---- Formats that write each argument as a tagged value (glm45, glm47, deepseekv32, deepseekv4):
// strings as they are, every other value as JSON. Each present argument is followed by
// `after_pair`, so optional arguments need no separator logic.

struct TaggedCallMarkup {
  std::string call_open, after_name;  // around the function name
  std::string between_key_and_value;  // GLM only
  std::string after_pair;
  std::string call_close;
  bool dsml = false;  // DSML parameter tags (string="true|false"), else GLM's arg_key/arg_value
};

struct Format {
  std::string block_open, block_close;  // around all the calls
  std::string separator;                // between calls
  std::optional<JsonCallMarkup> json;
  std::optional<TaggedCallMarkup> tagged;
};

constexpr std::string_view kArgValueEnd = "</arg_value>";
constexpr std::string_view kDsmlParamEnd = "</｜DSML｜parameter>";

Format Dsml(const std::string& block) {
  return {StrCat("<｜DSML｜", block, ">\n"), StrCat("\n</｜DSML｜", block, ">"), "\n", std::nullopt,
          TaggedCallMarkup{"<｜DSML｜invoke name=\"", "\">\n", "", "\n", "</｜DSML｜invoke>", true}};
}

Format FormatOf(const std::string& parser) {
  if (parser == "qwen") return {"", "", "\n", JsonCallMarkup{"<tool_call>\n{\"name\": ", ", \"arguments\": ", "}\n</tool_call>", true}, {}};
  if (parser == "deepseekv3")
    return {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "\n",
            JsonCallMarkup{"<｜tool▁call▁begin｜>function<｜tool▁sep｜>", "\n```json\n", "\n```<｜tool▁call▁end｜>"}, {}};
  if (parser == "deepseekv31")
    return {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "",
            JsonCallMarkup{"<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"}, {}};
  if (parser == "glm45") return {"", "", "\n", {}, TaggedCallMarkup{"<tool_call>", "\n", "\n", "\n", "</tool_call>"}};
  if (parser == "glm47") return {"", "", "", {}, TaggedCallMarkup{"<tool_call>", "", "", "", "</tool_call>"}};
  if (parser == "deepseekv32") return Dsml("function_calls");
  if (parser == "deepseekv4") return Dsml("tool_calls");
  Fail("tool_choice 'required' and named functions are not enforced for --tool-call-parser ", parser);
}

// One tagged argument: its key, then its value as the parser reads it back.
Grammar::Node TaggedPair(const TaggedCallMarkup& m, const std::string& key, const OrderedJson* schema, Grammar* g) {
  const bool raw_string = schema == nullptr || IsStringOnlySchema(Json::parse(schema->dump()));
  Grammar::Node value;
  if (!raw_string) {
    value = g->Seq({grammar::JsonSchemaExpression(*schema, g), g->Literal(m.dsml ? kDsmlParamEnd : kArgValueEnd)});
  } else if (schema != nullptr && (schema->contains("enum") || schema->contains("const"))) {
    // A fixed set of strings: exactly one of them, unquoted.
    std::vector<Grammar::Node> options;
    const OrderedJson values = schema->contains("const") ? OrderedJson::array({(*schema)["const"]}) : (*schema)["enum"];
    for (const OrderedJson& v : values)
      if (v.is_string()) options.push_back(g->Literal(v.get<std::string>()));
    FISSION_CHECK(!options.empty(), "parameter '", Abbreviate(key), "': a string enum without strings");
    value = g->Seq({g->Alt(std::move(options)), g->Literal(m.dsml ? kDsmlParamEnd : kArgValueEnd)});
  } else {
    // Free text up to the closing tag (other string keywords are not constrained in these formats).
    value = g->TextUntil(m.dsml ? kDsmlParamEnd : kArgValueEnd);
  }
  if (m.dsml)
    return g->Seq({g->Literal(StrCat("<｜DSML｜parameter name=\"", key, "\" string=\"", raw_string ? "true" : "false",
                                     "\">")),
                   value});
  return g->Seq({g->Literal(StrCat("<arg_key>", key, "</arg_key>", m.between_key_and_value, "<arg_value>")), value});
}

// Any keys (identifiers) with string values: a tool without declared properties.
Grammar::Node AnyTaggedPair(const TaggedCallMarkup& m, Grammar* g) {
  grammar::ByteSet identifier = grammar::ByteSet::Range('a', 'z');
  identifier.AddRange('A', 'Z');
  identifier.AddRange('0', '9');
  identifier.Add('_');
  const Grammar::Node key = g->Plus(g->Bytes(identifier));
  if (m.dsml)
    return g->Seq({g->Literal("<｜DSML｜parameter name=\""), key, g->Literal("\" string=\"true\">"),
                   g->TextUntil(kDsmlParamEnd)});
  return g->Seq({g->Literal("<arg_key>"), key, g->Literal(StrCat("</arg_key>", m.between_key_and_value, "<arg_value>")),
                 g->TextUntil(kArgValueEnd)});
}

// The arguments of a tagged call: the declared properties in their order, the required ones
// always, the others optionally.
Grammar::Node TaggedArguments(const TaggedCallMarkup& m, const OrderedJson& parameters, Grammar* g) {
  const Grammar::Node after = g->Literal(m.after_pair);
  if (!parameters.is_object() || !parameters.contains("properties") || !parameters["properties"].is_object() ||
      parameters["properties"].empty())
    return g->Star(g->Seq({AnyTaggedPair(m, g), after}));
  std::vector<std::string> required;
  if (parameters.contains("required") && parameters["required"].is_array())
    for (const OrderedJson& r : parameters["required"])
      if (r.is_string()) required.push_back(r.get<std::string>());
  std::vector<Grammar::Node> pairs;
  for (auto it = parameters["properties"].begin(); it != parameters["properties"].end(); ++it) {
    const Grammar::Node pair = g->Seq({TaggedPair(m, it.key(), &it.value(), g), after});
    const bool needed = std::find(required.begin(), required.end(), it.key()) != required.end();
    pairs.push_back(needed ? pair : g->Optional(pair));
  }
  return g->Seq(std::move(pairs));
}

// One call of `tool`: its markup around the name and the arguments of its schema.
Grammar::Node Call(const Format& f, const OrderedJson& tool, Grammar* g) {
  const std::string name = tool["name"].get<std::string>();
  const OrderedJson& parameters = tool["parameters"];
  try {
    if (f.tagged) {
      const TaggedCallMarkup& m = *f.tagged;
      return g->Seq({g->Literal(StrCat(m.call_open, name, m.after_name)), TaggedArguments(m, parameters, g),
                     g->Literal(m.call_close)});
    }
    const JsonCallMarkup& m = *f.json;
    return g->Seq({g->Literal(m.call_open), g->Literal(m.json_name ? grammar::JsonQuote(name) : name),
                   g->Literal(m.between_name_and_args), JsonArguments(parameters, g), g->Literal(m.call_close)});
  } catch (const Error& e) {
    Fail("the parameters of tool '", Abbreviate(name), "': ", e.what());
  }
}

}  // namespace

bool ToolCallGrammarSupports(const std::string& parser) {
  for (const char* p : {"qwen", "deepseekv3", "deepseekv31", "glm45", "glm47", "deepseekv32", "deepseekv4"})
    if (parser == p) return true;
  return false;
}

Grammar ToolCallGrammar(const OrderedJson& d) {
  const Format f = FormatOf(d["parser"].get<std::string>());
  Grammar g;
  const std::int32_t root = g.AddRule("root");
  std::vector<Grammar::Node> calls;
  for (const OrderedJson& tool : d["tools"])
    if (d["name"].is_null() || tool["name"] == d["name"]) calls.push_back(Call(f, tool, &g));
  if (calls.empty()) Fail("no tool to call");
  // Any of the calls, once or (parallel) repeatedly.
  const std::int32_t call = g.AddRule("call");
  g.Define(call, g.Alt(std::move(calls)));
  Grammar::Node body = g.Ref(call);
  if (d["parallel"].get<bool>()) body = g.Seq({body, g.Star(g.Seq({g.Literal(f.separator), g.Ref(call)}))});
  g.Define(root, g.Seq({g.Literal(f.block_open), body, g.Literal(f.block_close)}));
  g.set_root(root);
  return g;
}

}  // namespace fission::server
