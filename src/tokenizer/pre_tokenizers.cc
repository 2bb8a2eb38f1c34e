#include "tokenizer/pre_tokenizers.h"

#include <algorithm>
#include <array>
#include <utility>

#include "tokenizer/component_json.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer {
namespace {

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior ParseBehavior(const std::string& s, const std::string& where) {
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  Fail(where, ": unsupported split behavior \"", s, "\"");
}

struct Piece {
  std::size_t begin, end;
  bool is_match;
};

// Cuts `split` at the match ranges according to `behavior` and appends the pieces to `out`.
void SplitByMatches(const Split& split, const Ranges& matches, Behavior behavior, bool invert, Splits* out) {
  const std::string& s = split.text;
  std::vector<Piece> pieces;
  std::size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b > prev) pieces.push_back({prev, b, false});
    pieces.push_back({b, e, true});
    prev = e;
  }
  if (prev < s.size()) pieces.push_back({prev, s.size(), false});
  if (invert) {
    for (auto& p : pieces) p.is_match = !p.is_match;
  }
  std::vector<Piece> merged;
  switch (behavior) {
    case Behavior::kIsolated:
      merged = std::move(pieces);
      break;
    case Behavior::kRemoved:
      for (const auto& p : pieces) {
        if (!p.is_match) merged.push_back(p);
      }
      break;
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const auto& p : pieces) {
        if (p.is_match && previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& p : pieces) {
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().end = p.end;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous_match = false;
      for (std::size_t i = pieces.size(); i-- > 0;) {
        const Piece& p = pieces[i];
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().begin = p.begin;
        } else {
          merged.push_back(p);
        }
        previous_match = p.is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
  }
  for (const auto& p : merged) {
    if (p.end > p.begin) out->push_back({s.substr(p.begin, p.end - p.begin), split.at_start && p.begin == 0});
  }
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(const PatternSpec& pattern, Behavior behavior, bool invert, const std::string& where)
      : literal_(pattern.text), behavior_(behavior), invert_(invert) {
    if (pattern.is_regex) regex_ = std::make_unique<Regex>(pattern.text, where);
  }
  void PreTokenize(Splits* splits) const override {
    Splits out;
    out.reserve(splits->size() * 4);
    Ranges matches;
    for (const Split& split : *splits) {
      matches.clear();
      if (regex_) {
        regex_->FindAll(split.text, &matches);
      } else if (!literal_.empty()) {
        for (std::size_t p = split.text.find(literal_); p != std::string::npos;
             p = split.text.find(literal_, p + literal_.size())) {
          matches.emplace_back(p, p + literal_.size());
        }
      }
      SplitByMatches(split, matches, behavior_, invert_, &out);
    }
    *splits = std::move(out);
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  Behavior behavior_;
  bool invert_;
};

struct ByteTable {
  std::array<std::string, 256> chars;
  std::array<int, 512> bytes;  // indexed by code point (all table characters are below U+0200)
  ByteTable() {
    bytes.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      char32_t c = printable ? b : next++;
      AppendUtf8(&chars[b], c);
      bytes[c] = b;
    }
  }
};

const ByteTable& Bytes() {
  static const ByteTable table;
  return table;
}

// Maps every byte to its printable stand-in; optionally adds a leading space and splits first
// with the GPT-2 pattern.
class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex, const std::string& where)
      : add_prefix_space_(add_prefix_space) {
    if (use_regex) {
      regex_ = std::make_unique<Regex>(
          R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", where);
    }
  }
  void PreTokenize(Splits* splits) const override {
    if (add_prefix_space_) {
      for (Split& s : *splits) {
        if (s.text.empty() || s.text[0] != ' ') s.text = " " + s.text;
      }
    }
    if (regex_) {
      Splits out;
      Ranges matches;
      for (const Split& split : *splits) {
        matches.clear();
        regex_->FindAll(split.text, &matches);
        SplitByMatches(split, matches, Behavior::kIsolated, false, &out);
      }
      *splits = std::move(out);
    }
    const ByteTable& table = Bytes();
    for (Split& s : *splits) {
      std::string mapped;
      mapped.reserve(s.text.size() * 2);
      for (unsigned char b : s.text) mapped += table.chars[b];
      s.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

// Splits digits off: each digit alone, or runs of digits together.
class DigitsPreTokenizer : public PreTokenizer {
 public:
  DigitsPreTokenizer(bool individual, const std::string& where)
      : regex_(R"(\p{N})", where), individual_(individual) {}
  void PreTokenize(Splits* splits) const override {
    Splits out;
    Ranges matches;
    for (const Split& split : *splits) {
      matches.clear();
      regex_.FindAll(split.text, &matches);
      SplitByMatches(split, matches, individual_ ? Behavior::kIsolated : Behavior::kContiguous, false, &out);
    }
    *splits = std::move(out);
  }

 private:
  Regex regex_;
  bool individual_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

// SentencePiece-style: spaces become the replacement character, which may be prepended and
// starts each word.
class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void PreTokenize(Splits* splits) const override {
    Splits out;
    Ranges matches;
    for (Split& split : *splits) {
      std::string text;
      text.reserve(split.text.size() + replacement_.size());
      for (char c : split.text) {
        if (c == ' ') {
          text += replacement_;
        } else {
          text.push_back(c);
        }
      }
      bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && split.at_start))) {
        text.insert(0, replacement_);
      }
      Split replaced{std::move(text), split.at_start};
      if (!split_) {
        if (!replaced.text.empty()) out.push_back(std::move(replaced));
        continue;
      }
      matches.clear();
      for (std::size_t p = replaced.text.find(replacement_); p != std::string::npos;
           p = replaced.text.find(replacement_, p + replacement_.size())) {
        matches.emplace_back(p, p + replacement_.size());
      }
      SplitByMatches(replaced, matches, Behavior::kMergedWithNext, false, &out);
    }
    *splits = std::move(out);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void PreTokenize(Splits* splits) const override {
    for (const auto& part : parts_) part->PreTokenize(splits);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

const std::string& ByteLevelChar(unsigned char byte) { return Bytes().chars[byte]; }

int ByteLevelByte(char32_t c) { return c < 512 ? Bytes().bytes[c] : -1; }

std::unique_ptr<PreTokenizer> MakePreTokenizer(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  std::string type = ComponentType(j, where);
  std::string at = StrCat(where, " (", type, ")");
  if (type == "Sequence") {
    const Json& list = RequireArray(j, "pretokenizers", at);
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto part = MakePreTokenizer(list[i], StrCat(where, ".pretokenizers[", i, "]"));
      if (part) parts.push_back(std::move(part));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  if (type == "Split") {
    return std::make_unique<SplitPreTokenizer>(ReadPattern(RequireField(j, "pattern", at), at + ".pattern"),
                                               ParseBehavior(GetString(j, "behavior", at), at),
                                               OptBool(j, "invert", at, false), at);
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(OptBool(j, "add_prefix_space", at, true),
                                                   OptBool(j, "use_regex", at, true), at);
  }
  if (type == "Digits") return std::make_unique<DigitsPreTokenizer>(OptBool(j, "individual_digits", at, false), at);
  if (type == "Metaspace") {
    std::string replacement = OptString(j, "replacement", at, "\xE2\x96\x81");
    SingleChar(replacement, at, "replacement");
    PrependScheme scheme = PrependScheme::kAlways;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      std::string s = GetString(j, "prepend_scheme", at);
      if (s == "always") {
        scheme = PrependScheme::kAlways;
      } else if (s == "first") {
        scheme = PrependScheme::kFirst;
      } else if (s == "never") {
        scheme = PrependScheme::kNever;
      } else {
        Fail(at, ": unsupported prepend_scheme \"", s, "\"");
      }
    } else if (!OptBool(j, "add_prefix_space", at, true)) {
      scheme = PrependScheme::kNever;
    }
    return std::make_unique<MetaspacePreTokenizer>(replacement, scheme, OptBool(j, "split", at, true));
  }
  Fail(where, ": unsupported pre-tokenizer type \"", type, "\"");
}

}  // namespace fission::tokenizer
