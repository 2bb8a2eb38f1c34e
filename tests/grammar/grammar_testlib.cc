#include "grammar/grammar_testlib.h"

namespace fission::grammar::testing {

std::shared_ptr<const Vocabulary> ByteVocabulary(const std::vector<std::string>& extra) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  return std::make_shared<const Vocabulary>(std::move(tokens));
}

std::shared_ptr<const CompiledGrammar> Compile(const Grammar& g, std::shared_ptr<const Vocabulary> vocab) {
  if (!vocab) vocab = ByteVocabulary();
  return std::make_shared<const CompiledGrammar>(g, std::move(vocab));
}

bool Matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text) && m.IsComplete();
}

bool IsPrefix(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text);
}

std::vector<std::int32_t> BruteForceAllowed(const std::shared_ptr<const CompiledGrammar>& g, const std::string& prefix) {
  std::vector<std::int32_t> out;
  const Vocabulary& v = g->vocabulary();
  for (std::int32_t id = 0; id < v.size(); ++id)
    if (!v.bytes(id).empty() && IsPrefix(g, prefix + v.bytes(id))) out.push_back(id);
  return out;
}

std::vector<std::int32_t> MaskIds(const std::vector<std::uint32_t>& mask, std::int32_t size) {
  std::vector<std::int32_t> out;
  for (std::int32_t id = 0; id < size; ++id)
    if ((mask[id >> 5] >> (id & 31)) & 1) out.push_back(id);
  return out;
}

std::vector<std::int32_t> ComputedAllowed(GrammarMatcher& m) {
  std::vector<std::uint32_t> mask(MaskWords(m.grammar().vocabulary().size()));
  m.FillNextTokenMask(mask);
  return MaskIds(mask, m.grammar().vocabulary().size());
}

}  // namespace fission::grammar::testing
