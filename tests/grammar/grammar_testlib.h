// Helpers of the grammar tests: compiling a grammar over a vocabulary, matching whole texts, and
// the brute-force mask every computed mask is compared with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/vocabulary.h"

namespace fission::grammar::testing {

// A vocabulary of every single byte (ids 0..255) plus `extra` tokens after them.
std::shared_ptr<const Vocabulary> ByteVocabulary(const std::vector<std::string>& extra = {});

std::shared_ptr<const CompiledGrammar> Compile(const Grammar& g, std::shared_ptr<const Vocabulary> vocab = nullptr);

// Whether `text` is a complete sentence of the grammar (and whether it is a valid prefix).
bool Matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text);
bool IsPrefix(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text);

// The tokens t for which `prefix` + bytes(t) is a valid prefix, computed by replaying each one on
// a fresh matcher.
std::vector<std::int32_t> BruteForceAllowed(const std::shared_ptr<const CompiledGrammar>& g, const std::string& prefix);
// The ids whose bit is set.
std::vector<std::int32_t> MaskIds(const std::vector<std::uint32_t>& mask, std::int32_t size);
std::vector<std::int32_t> ComputedAllowed(GrammarMatcher& m);

}  // namespace fission::grammar::testing
