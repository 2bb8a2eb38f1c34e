#include "tokenizer/added_vocabulary.h"

#include "tokenizer/component_json.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer {
namespace {

// The code point that ends just before byte `pos`.
char32_t PreviousCodePoint(std::string_view s, std::size_t pos) {
  std::size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return NextCodePoint(s, &start);
}

}  // namespace

void AddedVocabulary::Trie::Insert(std::string_view pattern, std::int32_t token_index) {
  std::int32_t node = 0;
  for (unsigned char b : pattern) {
    auto it = children[node].find(b);
    if (it == children[node].end()) {
      std::int32_t next = static_cast<std::int32_t>(children.size());
      children[node].emplace(b, next);
      children.emplace_back();
      token.push_back(-1);
      node = next;
    } else {
      node = it->second;
    }
  }
  if (token[node] < 0) token[node] = token_index;  // the first definition of a pattern wins
  first_byte[static_cast<unsigned char>(pattern[0])] = true;
  empty = false;
}

std::pair<std::int32_t, std::size_t> AddedVocabulary::Trie::LongestAt(std::string_view text, std::size_t pos) const {
  std::pair<std::int32_t, std::size_t> best{-1, pos};
  std::int32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    auto it = children[node].find(static_cast<unsigned char>(text[i]));
    if (it == children[node].end()) break;
    node = it->second;
    if (token[node] >= 0) best = {token[node], i + 1};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(const Json& added_tokens, const Normalizer* normalizer, const std::string& where)
    : normalizer_(normalizer) {
  if (added_tokens.is_null()) return;
  if (!added_tokens.is_array()) Fail(where, ": expected an array");
  for (std::size_t i = 0; i < added_tokens.size(); ++i) {
    const Json& t = added_tokens[i];
    std::string at = StrCat(where, "[", i, "]");
    if (!t.is_object()) Fail(at, ": expected an object");
    AddedToken token;
    token.content = GetString(t, "content", at);
    std::int64_t id = IntField(t, "id", at);
    if (id < 0 || id > INT32_MAX) Fail(at, ".id: out of range");
    token.id = static_cast<std::int32_t>(id);
    token.special = OptBool(t, "special", at, false);
    token.normalized = OptBool(t, "normalized", at, !token.special);
    token.lstrip = OptBool(t, "lstrip", at, false);
    token.rstrip = OptBool(t, "rstrip", at, false);
    token.single_word = OptBool(t, "single_word", at, false);
    if (token.content.empty()) Fail(at, ".content: empty added token");
    if (!IsValidUtf8(token.content)) Fail(at, ".content: not valid UTF-8");
    std::size_t index = tokens_.size();
    by_id_.emplace(token.id, index);
    by_content_.emplace(token.content, index);
    tokens_.push_back(std::move(token));
  }
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    if (t.normalized && normalizer_ != nullptr) {
      std::string pattern = t.content;
      normalizer_->Normalize(&pattern);
      if (!pattern.empty()) normalized_trie_.Insert(pattern, static_cast<std::int32_t>(i));
    } else if (t.normalized) {
      normalized_trie_.Insert(t.content, static_cast<std::int32_t>(i));
    } else {
      raw_trie_.Insert(t.content, static_cast<std::int32_t>(i));
    }
  }
}

const AddedToken* AddedVocabulary::FindById(std::int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::FindByContent(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::SplitWith(const Trie& trie, std::string_view text, bool at_start, bool normalize,
                                std::vector<Segment>* out) const {
  auto emit_text = [&](std::size_t b, std::size_t e) {
    if (e <= b) return;
    Segment seg{std::string(text.substr(b, e - b)), -1, at_start && b == 0};
    if (normalize) {
      if (normalizer_ != nullptr) normalizer_->Normalize(&seg.text);
      if (seg.text.empty()) return;
      SplitWith(normalized_trie_, seg.text, seg.at_start, false, out);
      return;
    }
    out->push_back(std::move(seg));
  };
  std::size_t emitted = 0;  // end of the last segment emitted
  std::size_t pos = 0;
  while (pos < text.size() && !trie.empty) {
    if (!trie.first_byte[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [index, end] = trie.LongestAt(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    std::size_t start = pos;
    if (token.single_word) {
      bool start_ok = start == 0 || !IsWordChar(PreviousCodePoint(text, start));
      std::size_t after = end;
      bool end_ok = end == text.size() || !IsWordChar(NextCodePoint(text, &after));
      if (!start_ok || !end_ok) {
        pos = end;  // matches do not overlap: the scan resumes after the rejected one
        continue;
      }
    }
    if (token.lstrip) {
      while (start > emitted && IsWhitespace(PreviousCodePoint(text, start))) {
        --start;
        while (start > emitted && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      }
    }
    if (token.rstrip) {
      while (end < text.size()) {
        std::size_t next = end;
        if (!IsWhitespace(NextCodePoint(text, &next))) break;
        end = next;
      }
    }
    emit_text(emitted, start);
    out->push_back({std::string(text.substr(start, end - start)), token.id, at_start && start == 0});
    emitted = end;
    pos = end;
  }
  emit_text(emitted, text.size());
}

std::vector<Segment> AddedVocabulary::Split(std::string_view text) const {
  std::vector<Segment> out;
  SplitWith(raw_trie_, text, true, true, &out);
  return out;
}

}  // namespace fission::tokenizer
