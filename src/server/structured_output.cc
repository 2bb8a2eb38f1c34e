#include "server/structured_output.h"

#include "base/json.h"
#include "grammar/ebnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/json_text.h"
#include "grammar/regex_parser.h"
#include "server/api_error.h"
#include "server/tool_call_grammar.h"

namespace fission::server {
namespace {

std::shared_ptr<const grammar::Vocabulary> ModelVocabulary(const tokenizer::Tokenizer& tokenizer, std::int64_t size) {
  std::vector<std::string> bytes(static_cast<std::size_t>(size));
  const std::int64_t known = std::min(size, tokenizer.vocab_size());
  for (std::int64_t id = 0; id < known; ++id) bytes[id] = tokenizer.TokenBytes(static_cast<std::int32_t>(id));
  return std::make_shared<const grammar::Vocabulary>(std::move(bytes));
}

class GrammarTokenMatcher final : public engine::TokenMatcher {
 public:
  explicit GrammarTokenMatcher(std::shared_ptr<const grammar::CompiledGrammar> g) : matcher_(std::move(g)) {}
  void FillNextTokenMask(std::span<std::uint32_t> mask) override { matcher_.FillNextTokenMask(mask); }
  bool Accept(std::int32_t token) override { return matcher_.AcceptToken(token); }
  bool IsComplete() const override { return matcher_.IsComplete(); }
  bool IsTerminated() const override { return matcher_.IsTerminated(); }

 private:
  grammar::GrammarMatcher matcher_;
};

class GrammarConstraint final : public engine::TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const grammar::CompiledGrammar> g, std::string kind)
      : grammar_(std::move(g)), kind_(std::move(kind)) {}
  std::unique_ptr<engine::TokenMatcher> NewMatcher() const override {
    return std::make_unique<GrammarTokenMatcher>(grammar_);
  }
  std::string Describe() const override { return kind_; }

 private:
  std::shared_ptr<const grammar::CompiledGrammar> grammar_;
  std::string kind_;
};

// The grammar of a spec's own constraint (without a reasoning prefix).
grammar::Grammar BuildGrammar(const ConstraintSpec& spec) {
  if (spec.kind == "regex") return grammar::RegexGrammar(spec.text);
  if (spec.kind == "ebnf") return grammar::ParseEbnf(spec.text);
  if (spec.kind == "json_object") return grammar::JsonObjectGrammar();
  const OrderedJson json = ParseOrderedJson(spec.text, spec.field);
  if (spec.kind == "json_schema") return grammar::JsonSchemaGrammar(json);
  if (spec.kind == "tool_calls") return ToolCallGrammar(json);
  Fail("unknown constraint kind '", spec.kind, "'");
}

// `inner` after free text ending in `end`.
grammar::Grammar AfterReasoning(grammar::Grammar inner, const std::string& end) {
  const std::int32_t old_root = inner.root();
  const std::int32_t root = inner.AddRule("after_reasoning");
  inner.Define(root, inner.Seq({inner.TextUntil(end), inner.Ref(old_root)}));
  inner.set_root(root);
  return inner;
}

}  // namespace

bool IsGrammarBackendName(const std::string& name) {
  return name == "xgrammar" || name == "outlines" || name == "llguidance" || name == "none";
}

StructuredOutputs::StructuredOutputs(const tokenizer::Tokenizer& tokenizer, std::int64_t vocab_size,
                                     std::size_t cache_capacity)
    : cache_(ModelVocabulary(tokenizer, vocab_size), cache_capacity) {}

std::shared_ptr<const engine::TokenConstraint> StructuredOutputs::Constraint(const ConstraintSpec& spec) {
  try {
    auto compiled = cache_.Get(spec.kind + "|" + spec.reasoning_end, spec.text, [&spec] {
      grammar::Grammar g = BuildGrammar(spec);
      return spec.reasoning_end.empty() ? std::move(g) : AfterReasoning(std::move(g), spec.reasoning_end);
    });
    return std::make_shared<const GrammarConstraint>(std::move(compiled), spec.kind);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, StrCat("'", spec.field, "': ", Abbreviate(e.what(), 1024)), spec.field);
  }
}

}  // namespace fission::server
