#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <mutex>
#include <queue>

#include "tokenizer/component_json.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer {

BpeModel::BpeModel(const Json& j, const std::string& where) {
  std::string type = ComponentType(j, where);
  if (type != "BPE") Fail(where, ": unsupported model type \"", type, "\" (only BPE)");
  std::string at = where + " (BPE)";
  if (j.contains("dropout") && !j["dropout"].is_null() && (!j["dropout"].is_number() || j["dropout"].get<double>() != 0.0)) {
    Fail(at, ": dropout is not supported for inference");
  }
  const Json& vocab = RequireField(j, "vocab", at);
  if (!vocab.is_object()) Fail(at, ".vocab: expected an object of token -> id");
  std::int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<std::int64_t>() < 0 ||
        it.value().get<std::int64_t>() > INT32_MAX) {
      Fail(at, ".vocab[\"", it.key(), "\"]: id must be a non-negative integer");
    }
    max_id = std::max<std::int64_t>(max_id, it.value().get<std::int64_t>());
  }
  id_to_token_.resize(max_id + 1);
  has_id_.assign(max_id + 1, false);
  vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    auto id = static_cast<std::int32_t>(it.value().get<std::int64_t>());
    vocab_.emplace(it.key(), id);
    id_to_token_[id] = it.key();
    has_id_[id] = true;
  }
  continuing_subword_prefix_ = OptString(j, "continuing_subword_prefix", at, "");
  end_of_word_suffix_ = OptString(j, "end_of_word_suffix", at, "");
  byte_fallback_ = OptBool(j, "byte_fallback", at, false);
  ignore_merges_ = OptBool(j, "ignore_merges", at, false);
  fuse_unk_ = OptBool(j, "fuse_unk", at, false);
  std::string unk = OptString(j, "unk_token", at, "");
  if (!unk.empty()) {
    auto id = TokenToId(unk);
    if (!id) Fail(at, ".unk_token: \"", unk, "\" is not in the vocabulary");
    unk_id_ = *id;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto id = TokenToId(name);
    byte_ids_[b] = id ? *id : -1;
  }

  const Json& merges = RequireArray(j, "merges", at);
  merges_.reserve(merges.size() * 2);
  std::size_t prefix_len = continuing_subword_prefix_.size();
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const Json& m = merges[rank];
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        Fail(at, ".merges[", rank, "]: expected \"left right\", got \"", s, "\"");
      }
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      Fail(at, ".merges[", rank, "]: expected a string or a pair of strings");
    }
    auto ia = TokenToId(a), ib = TokenToId(b);
    if (!ia || !ib) Fail(at, ".merges[", rank, "]: \"", !ia ? a : b, "\" is not in the vocabulary");
    std::string merged = a + (b.compare(0, prefix_len, continuing_subword_prefix_) == 0 ? b.substr(prefix_len) : b);
    auto inew = TokenToId(merged);
    if (!inew) Fail(at, ".merges[", rank, "]: merged token \"", merged, "\" is not in the vocabulary");
    merges_.emplace((std::uint64_t(std::uint32_t(*ia)) << 32) | std::uint32_t(*ib),
                    Merge{static_cast<std::int32_t>(rank), *inew});
  }
}

std::optional<std::int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::Tokenize(std::string_view word, std::vector<std::int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::size_t start = ids->size();
  MergeWord(word, ids);
  if (cacheable) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::vector<std::int32_t>(ids->begin() + start, ids->end()));
  }
}

void BpeModel::MergeWord(std::string_view word, std::vector<std::int32_t>* ids) const {
  // Symbols form a doubly linked list over the initial characters.
  struct Symbol {
    std::int32_t id;
    std::int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](std::int32_t id) {
    std::int32_t n = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  std::int32_t pending_unk = -1;  // an unknown-token run not yet added (-1: none)
  std::string piece;
  for (std::size_t i = 0; i < word.size();) {
    std::size_t begin = i;
    std::size_t len = Utf8SequenceLength(static_cast<unsigned char>(word[i]));
    i = std::min(word.size(), begin + len);
    bool is_first = begin == 0, is_last = i == word.size();
    std::string_view ch = word.substr(begin, i - begin);
    const std::string_view* lookup = &ch;
    std::string_view affixed;
    if ((!is_first && !continuing_subword_prefix_.empty()) || (is_last && !end_of_word_suffix_.empty())) {
      piece.clear();
      if (!is_first) piece += continuing_subword_prefix_;
      piece += ch;
      if (is_last) piece += end_of_word_suffix_;
      affixed = piece;
      lookup = &affixed;
    }
    if (auto it = vocab_.find(*lookup); it != vocab_.end()) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : *lookup) all = all && byte_ids_[b] >= 0;
      if (all) {
        if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
        for (unsigned char b : *lookup) add(byte_ids_[b]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
    // Without an unknown token the character is dropped, as the reference does.
  }
  if (pending_unk >= 0) add(pending_unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  // Repeatedly merge the lowest-ranked adjacent pair, leftmost first among equal ranks.
  struct Candidate {
    std::int32_t rank, pos, new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  for (std::size_t p = 0; p + 1 < symbols.size(); ++p) {
    if (const Merge* m = FindMerge(symbols[p].id, symbols[p + 1].id)) {
      queue.push({m->rank, static_cast<std::int32_t>(p), m->new_id});
    }
  }
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const Merge* m = FindMerge(left.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* pm = FindMerge(symbols[left.prev].id, left.id)) queue.push({pm->rank, left.prev, pm->new_id});
    }
    if (left.next >= 0) {
      if (const Merge* nm = FindMerge(left.id, symbols[left.next].id)) queue.push({nm->rank, top.pos, nm->new_id});
    }
  }
  for (const Symbol& s : symbols) {
    if (s.alive) ids->push_back(s.id);
  }
}

}  // namespace fission::tokenizer
