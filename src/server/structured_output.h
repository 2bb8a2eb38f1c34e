// Structured outputs on the server side: what a request asks its output to follow (a regex, an
// EBNF grammar, a JSON schema, any JSON object, or forced tool calls) becomes a compiled grammar
// (src/grammar/, cached by kind and text) and an engine::TokenConstraint the engine enforces
// while decoding. docs/server.md has the fields, the schema subset and the decisions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/token_constraint.h"
#include "server/constraint_spec.h"
#include "grammar/grammar_cache.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {

// The SGLang --grammar-backend names; each means this implementation, and "none" turns
// structured outputs off.
bool IsGrammarBackendName(const std::string& name);

class StructuredOutputs {
 public:
  // The vocabulary is the model's (`vocab_size` ids; the tokenizer's bytes for those it knows).
  StructuredOutputs(const tokenizer::Tokenizer& tokenizer, std::int64_t vocab_size, std::size_t cache_capacity = 256);

  // The constraint of `spec`, compiled or found in the cache. A problem with it is an
  // ApiError(400) naming the field.
  std::shared_ptr<const engine::TokenConstraint> Constraint(const ConstraintSpec& spec);
  grammar::GrammarCache& cache() { return cache_; }

 private:
  grammar::GrammarCache cache_;
};

}  // namespace fission::server
