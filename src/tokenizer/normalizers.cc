#include "tokenizer/normalizers.h"

#include <vector>

#include "tokenizer/component_json.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer {

char32_t SingleChar(const std::string& s, const std::string& where, const char* field) {
  std::size_t pos = 0;
  if (s.empty() || !IsValidUtf8(s)) Fail(where, ": field \"", field, "\" must be one character");
  char32_t c = NextCodePoint(s, &pos);
  if (pos != s.size()) Fail(where, ": field \"", field, "\" must be one character, got \"", s, "\"");
  return c;
}

namespace {

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void Normalize(std::string* text) const override { *text = tokenizer::Normalize(*text, form_); }

 private:
  NormalForm form_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  void Normalize(std::string* text) const override { *text = ToLower(*text); }
};

// Replaces every occurrence of a literal or a regex with `content`.
class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(const PatternSpec& pattern, std::string content, const std::string& where)
      : literal_(pattern.text), content_(std::move(content)) {
    if (pattern.is_regex) regex_ = std::make_unique<Regex>(pattern.text, where);
  }
  void Normalize(std::string* text) const override {
    std::vector<std::pair<std::size_t, std::size_t>> matches;
    if (regex_) {
      regex_->FindAll(*text, &matches);
    } else if (!literal_.empty()) {
      for (std::size_t p = text->find(literal_); p != std::string::npos; p = text->find(literal_, p + literal_.size())) {
        matches.emplace_back(p, p + literal_.size());
      }
    }
    if (matches.empty()) return;
    std::string out;
    out.reserve(text->size());
    std::size_t prev = 0;
    for (auto [b, e] : matches) {
      out.append(*text, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(*text, prev, std::string::npos);
    *text = std::move(out);
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

// Prepends a string to non-empty text.
class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

// Removes whitespace on the left and/or right.
class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string* text) const override {
    std::size_t begin = 0, end = text->size();
    if (left_) {
      while (begin < end) {
        std::size_t next = begin;
        if (!IsWhitespace(NextCodePoint(*text, &next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        std::size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>((*text)[start]) & 0xC0) == 0x80) --start;
        std::size_t next = start;
        if (!IsWhitespace(NextCodePoint(*text, &next))) break;
        end = start;
      }
    }
    *text = text->substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void Normalize(std::string* text) const override {
    for (const auto& part : parts_) part->Normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> MakeNormalizer(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  std::string type = ComponentType(j, where);
  std::string at = StrCat(where, " (", type, ")");
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkd);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(ReadPattern(RequireField(j, "pattern", at), at + ".pattern"),
                                               OptString(j, "content", at, ""), at);
  }
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(GetString(j, "prepend", at));
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(OptBool(j, "strip_left", at, true), OptBool(j, "strip_right", at, true));
  }
  if (type == "Sequence") {
    const Json& list = RequireArray(j, "normalizers", at);
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto part = MakeNormalizer(list[i], StrCat(where, ".normalizers[", i, "]"));
      if (part) parts.push_back(std::move(part));
    }
    return std::make_unique<SequenceNormalizer>(std::move(parts));
  }
  Fail(where, ": unsupported normalizer type \"", type, "\"");
}

}  // namespace fission::tokenizer
