#include "tokenizer/decoders.h"

#include "tokenizer/component_json.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer {
namespace {

const char kReplacementChar[] = "\xEF\xBF\xBD";

// Maps byte-level characters back to bytes; a token with any other character keeps its own
// UTF-8 bytes. The bytes of all tokens form one string, invalid sequences replaced.
class ByteLevelDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string bytes;
    for (const std::string& token : *tokens) {
      std::size_t mark = bytes.size();
      bool mapped = true;
      for (std::size_t i = 0; i < token.size();) {
        int b = ByteLevelByte(NextCodePoint(token, &i));
        if (b < 0) {
          mapped = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!mapped) {
        bytes.resize(mark);
        bytes += token;
      }
    }
    tokens->assign(1, Utf8Lossy(bytes));
  }
  void DecodeBytes(std::vector<std::string>* tokens) const override {
    for (std::string& token : *tokens) {
      std::string bytes;
      bool mapped = true;
      for (std::size_t i = 0; i < token.size() && mapped;) {
        const int b = ByteLevelByte(NextCodePoint(token, &i));
        if (b < 0) mapped = false;
        bytes.push_back(static_cast<char>(b));
      }
      if (mapped) token = std::move(bytes);
    }
  }
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(const PatternSpec& pattern, std::string content, const std::string& where)
      : literal_(pattern.text), content_(std::move(content)) {
    if (pattern.is_regex) regex_ = std::make_unique<Regex>(pattern.text, where);
  }
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::pair<std::size_t, std::size_t>> matches;
    for (std::string& token : *tokens) {
      matches.clear();
      if (regex_) {
        regex_->FindAll(token, &matches);
      } else if (!literal_.empty()) {
        for (std::size_t p = token.find(literal_); p != std::string::npos; p = token.find(literal_, p + literal_.size())) {
          matches.emplace_back(p, p + literal_.size());
        }
      }
      if (matches.empty()) continue;
      std::string out;
      std::size_t prev = 0;
      for (auto [b, e] : matches) {
        out.append(token, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(token, prev, std::string::npos);
      token = std::move(out);
    }
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> regex_;
  std::string content_;
};

// Runs of <0xXX> tokens become the text of their bytes, or one U+FFFD per byte when invalid.
class ByteFallbackDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (IsValidUtf8(pending)) {
        out.push_back(pending);
      } else {
        for (std::size_t i = 0; i < pending.size(); ++i) out.push_back(kReplacementChar);
      }
      pending.clear();
    };
    for (std::string& token : *tokens) {
      int byte = ParseByte(token);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    *tokens = std::move(out);
  }
  void DecodeBytes(std::vector<std::string>* tokens) const override {
    for (std::string& token : *tokens)
      if (const int byte = ParseByte(token); byte >= 0) token = std::string(1, static_cast<char>(byte));
  }

 private:
  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }
  static int ParseByte(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int hi = Hex(t[3]), lo = Hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
};

class FuseDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>* tokens) const override {
    std::string all;
    for (const std::string& t : *tokens) all += t;
    tokens->assign(1, std::move(all));
  }
  void DecodeBytes(std::vector<std::string>*) const override {}  // tokens stay apart
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, std::size_t start, std::size_t stop) : content_(content), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::string& token : *tokens) {
      std::vector<std::size_t> bounds;  // byte offset of each character, plus the end
      for (std::size_t i = 0; i < token.size();) {
        bounds.push_back(i);
        NextCodePoint(token, &i);
      }
      std::size_t n = bounds.size();
      bounds.push_back(token.size());
      auto char_at = [&](std::size_t k) {
        std::size_t p = bounds[k];
        return NextCodePoint(token, &p);
      };
      std::size_t begin = 0;
      while (begin < std::min(start_, n) && char_at(begin) == content_) ++begin;
      std::size_t end = n;
      while (n - end < stop_ && end > begin && char_at(end - 1) == content_) --end;
      token = token.substr(bounds[begin], bounds[end] - bounds[begin]);
    }
  }
  void DecodeBytes(std::vector<std::string>*) const override {}  // it strips the text's ends only

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

// The replacement character becomes a space; the first token loses its replacement characters
// when a prefix was prepended at encoding.
class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first) : replacement_(replacement), strip_first_(strip_first) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (std::size_t k = 0; k < tokens->size(); ++k) {
      std::string& token = (*tokens)[k];
      std::string out;
      out.reserve(token.size());
      for (std::size_t i = 0; i < token.size();) {
        std::size_t begin = i;
        char32_t c = NextCodePoint(token, &i);
        if (c == replacement_) {
          if (!(k == 0 && strip_first_)) out.push_back(' ');
        } else {
          out.append(token, begin, i - begin);
        }
      }
      token = std::move(out);
    }
  }
  void DecodeBytes(std::vector<std::string>* tokens) const override {
    MetaspaceDecoder(replacement_, false).DecodeChain(tokens);  // never the first token
  }

 private:
  char32_t replacement_;
  bool strip_first_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void DecodeChain(std::vector<std::string>* tokens) const override {
    for (const auto& p : parts_) p->DecodeChain(tokens);
  }
  void DecodeBytes(std::vector<std::string>* tokens) const override {
    for (const auto& p : parts_) p->DecodeBytes(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> MakeDecoder(const Json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  std::string type = ComponentType(j, where);
  std::string at = StrCat(where, " (", type, ")");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(ReadPattern(RequireField(j, "pattern", at), at + ".pattern"),
                                            OptString(j, "content", at, ""), at);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    char32_t c = SingleChar(GetString(j, "content", at), at, "content");
    std::int64_t start = IntField(j, "start", at, 0), stop = IntField(j, "stop", at, 0);
    if (start < 0 || stop < 0) Fail(at, ": start and stop must not be negative");
    return std::make_unique<StripDecoder>(c, start, stop);
  }
  if (type == "Metaspace") {
    char32_t c = SingleChar(OptString(j, "replacement", at, "\xE2\x96\x81"), at, "replacement");
    bool strip_first = true;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      strip_first = GetString(j, "prepend_scheme", at) != "never";
    } else {
      strip_first = OptBool(j, "add_prefix_space", at, true);
    }
    return std::make_unique<MetaspaceDecoder>(c, strip_first);
  }
  if (type == "Sequence") {
    const Json& list = RequireArray(j, "decoders", at);
    std::vector<std::unique_ptr<Decoder>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto p = MakeDecoder(list[i], StrCat(where, ".decoders[", i, "]"));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  Fail(where, ": unsupported decoder type \"", type, "\"");
}

}  // namespace fission::tokenizer
