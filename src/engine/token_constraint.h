// Structured outputs as the engine sees them: a constraint on the tokens a sequence may produce.
// What it is (a regex, a JSON schema, a tool-call format) and how its masks are computed is the
// layer above's business (the server compiles grammars, src/grammar/); the engine asks a
// sequence's matcher for the allowed tokens before each sample, tells it each token sampled, and
// ends the sequence when nothing may follow.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace fission::engine {

// One sequence's position in its constraint. Used by the engine thread only.
class TokenMatcher {
 public:
  virtual ~TokenMatcher() = default;
  // Writes the tokens that may come next as a bitmask (bit t % 32 of word t / 32) over the model's
  // vocabulary. End-of-sequence tokens are the engine's: it allows them when IsComplete().
  virtual void FillNextTokenMask(std::span<std::uint32_t> mask) = 0;
  // Consumes a sampled token; false (and no change) when the token does not continue the output.
  virtual bool Accept(std::int32_t token) = 0;
  // The output so far is complete: it may end here.
  virtual bool IsComplete() const = 0;
  // Complete, and nothing may follow: the sequence ends.
  virtual bool IsTerminated() const = 0;
};

// What a request carries; shared by its sequences, each of which gets its own matcher.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual std::unique_ptr<TokenMatcher> NewMatcher() const = 0;
  // For messages: "regex", "json_schema", ...
  virtual std::string Describe() const = 0;
};

}  // namespace fission::engine
