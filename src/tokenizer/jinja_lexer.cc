#include "tokenizer/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer::jinja {
namespace {

constexpr std::size_t kMaxTagTokens = 4000;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.rstrip() for the ASCII whitespace templates contain.
std::string RStrip(const std::string& s) {
  std::size_t end = s.size();
  while (end > 0 && IsSpace(s[end - 1])) --end;
  return s.substr(0, end);
}

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& name, const LexerOptions& options)
      : name_(name), options_(options) {
    // Jinja normalizes newlines and drops one trailing newline (keep_trailing_newline=False).
    src_.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_.push_back(source[i]);
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      std::size_t tag = FindTagStart(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      if (tag == src_.size()) {
        Emit(TokenKind::kText, text, pos_);
        pos_ = tag;
        break;
      }
      char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign == '-') {
        text = RStrip(text);
      } else if (sign != '+' && kind != '{' && options_.lstrip_blocks) {
        std::size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          bool all_space = l_pos < text.size();
          for (std::size_t i = l_pos; i < text.size() && all_space; ++i) all_space = text[i] == ' ' || text[i] == '\t' || text[i] == '\f' || text[i] == '\v';
          if (all_space) text.resize(l_pos);
        }
      }
      Emit(TokenKind::kText, text, pos_);
      std::size_t body = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        line_starting = LexComment(tag, body);
      } else if (kind == '%' && IsRawBlock(body)) {
        line_starting = LexRaw(tag, body);
      } else {
        line_starting = LexTag(kind, tag, body);
      }
    }
    auto [line, column] = Position(src_.size());
    tokens_.push_back({TokenKind::kEof, "", line, column});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void Error(std::size_t at, const std::string& message) {
    auto [line, column] = Position(at);
    Fail(name_, ":", line, ":", column, ": ", message);
  }

  std::pair<int, int> Position(std::size_t at) {
    // Positions are requested in increasing order, so advance a cursor.
    if (at < cursor_) cursor_ = 0, line_ = 1, column_ = 1;
    while (cursor_ < at && cursor_ < src_.size()) {
      if (src_[cursor_] == '\n') {
        ++line_;
        column_ = 1;
      } else if ((static_cast<unsigned char>(src_[cursor_]) & 0xC0) != 0x80) {
        ++column_;
      }
      ++cursor_;
    }
    return {line_, column_};
  }

  void Emit(TokenKind kind, std::string value, std::size_t at) {
    if (kind == TokenKind::kText && value.empty()) return;
    auto [line, column] = Position(at);
    tokens_.push_back({kind, std::move(value), line, column});
  }

  std::size_t FindTagStart(std::size_t from) const {
    for (std::size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  // After a tag end: `-` strips all following whitespace; trim_blocks drops one newline after
  // block and comment tags. Returns whether the consumed text ends a line.
  bool AfterTagEnd(std::size_t end, bool strip, bool keep, bool block_like) {
    pos_ = end;
    if (strip) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
    } else if (block_like && !keep && options_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    return pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  bool LexComment(std::size_t tag, std::size_t body) {
    std::size_t end = src_.find("#}", body);
    if (end == std::string::npos) Error(tag, "unterminated comment");
    bool strip = end > body && src_[end - 1] == '-';
    bool keep = end > body && src_[end - 1] == '+';
    return AfterTagEnd(end + 2, strip, keep, true);
  }

  std::size_t SkipSpaces(std::size_t i) const {
    while (i < src_.size() && IsSpace(src_[i])) ++i;
    return i;
  }

  bool IsRawBlock(std::size_t body) const {
    std::size_t i = SkipSpaces(body);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i = SkipSpaces(i + 3);
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    return src_.compare(i, 2, "%}") == 0;
  }

  bool LexRaw(std::size_t tag, std::size_t body) {
    std::size_t i = SkipSpaces(SkipSpaces(body) + 3);
    bool strip_after = src_[i] == '-';
    if (src_[i] == '-' || src_[i] == '+') ++i;
    std::size_t content = i + 2;
    if (strip_after) content = SkipSpaces(content);
    // Find {% endraw %} with optional whitespace control.
    for (std::size_t p = src_.find("{%", content); p != std::string::npos; p = src_.find("{%", p + 2)) {
      std::size_t k = p + 2;
      bool strip_before = k < src_.size() && src_[k] == '-';
      if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) ++k;
      k = SkipSpaces(k);
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k = SkipSpaces(k + 6);
      bool strip = k < src_.size() && src_[k] == '-';
      bool keep = k < src_.size() && src_[k] == '+';
      if (strip || keep) ++k;
      if (src_.compare(k, 2, "%}") != 0) continue;
      std::string text = src_.substr(content, p - content);
      if (strip_before) text = RStrip(text);
      Emit(TokenKind::kText, text, content);
      return AfterTagEnd(k + 2, strip, keep, true);
    }
    Error(tag, "missing {% endraw %}");
  }

  // Lexes the expression tokens of a {{ }} or {% %} tag.
  bool LexTag(char kind, std::size_t tag, std::size_t body) {
    Emit(kind == '{' ? TokenKind::kVarBegin : TokenKind::kBlockBegin, kind == '{' ? "{{" : "{%", tag);
    const char* close = kind == '{' ? "}}" : "%}";
    int depth = 0;  // open brackets: a closing delimiter inside them is an operator
    std::size_t i = body;
    std::size_t first_token = tokens_.size();
    while (true) {
      // Expressions are evaluated recursively: bound their size.
      if (tokens_.size() - first_token > kMaxTagTokens) Error(tag, "tag too long");
      i = SkipSpaces(i);
      if (i >= src_.size()) Error(tag, kind == '{' ? "unterminated '{{'" : "unterminated '{%'");
      if (depth == 0) {
        bool sign = (src_[i] == '-' || src_[i] == '+') && src_.compare(i + 1, 2, close) == 0;
        if (sign || src_.compare(i, 2, close) == 0) {
          Emit(kind == '{' ? TokenKind::kVarEnd : TokenKind::kBlockEnd, close, i);
          std::size_t end = i + 2 + (sign ? 1 : 0);
          return AfterTagEnd(end, sign && src_[i] == '-', sign && src_[i] == '+', kind == '%');
        }
      }
      char c = src_[i];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t j = i;
        while (j < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) ++j;
        Emit(TokenKind::kName, src_.substr(i, j - i), i);
        i = j;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        i = LexNumber(i);
      } else if (c == '\'' || c == '"') {
        i = LexString(i);
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "<",
                                     ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};
        const char* op = nullptr;
        for (const char* candidate : kOps) {
          if (src_.compare(i, std::strlen(candidate), candidate) == 0) {
            op = candidate;
            break;
          }
        }
        if (op == nullptr) Error(i, StrCat("unexpected character '", std::string(1, c), "'"));
        if (*op == '(' || *op == '[' || *op == '{') ++depth;
        if ((*op == ')' || *op == ']' || *op == '}') && depth > 0) --depth;
        Emit(TokenKind::kOperator, op, i);
        i += std::strlen(op);
      }
    }
  }

  std::size_t LexNumber(std::size_t i) {
    std::size_t j = i;
    auto digits = [&] {
      while (j < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) ++j;
    };
    digits();
    bool is_float = false;
    if (j + 1 < src_.size() && src_[j] == '.' && std::isdigit(static_cast<unsigned char>(src_[j + 1]))) {
      ++j;
      digits();
      is_float = true;
    }
    if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      std::size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) {
        j = k;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (std::size_t k = i; k < j; ++k) {
      if (src_[k] != '_') text.push_back(src_[k]);
    }
    Emit(is_float ? TokenKind::kFloat : TokenKind::kInt, text, i);
    return j;
  }

  std::size_t LexString(std::size_t i) {
    char quote = src_[i];
    std::string value;
    std::size_t j = i + 1;
    while (true) {
      if (j >= src_.size()) Error(i, "unterminated string literal");
      char c = src_[j];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        ++j;
        continue;
      }
      if (j + 1 >= src_.size()) Error(i, "unterminated string literal");
      char e = src_[j + 1];
      j += 2;
      switch (e) {
        case 'n': value.push_back('\n'); break;
        case 't': value.push_back('\t'); break;
        case 'r': value.push_back('\r'); break;
        case '0': value.push_back('\0'); break;
        case 'a': value.push_back('\a'); break;
        case 'b': value.push_back('\b'); break;
        case 'f': value.push_back('\f'); break;
        case 'v': value.push_back('\v'); break;
        case '\\': value.push_back('\\'); break;
        case '\'': value.push_back('\''); break;
        case '"': value.push_back('"'); break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (j + n > src_.size()) Error(j, "truncated escape sequence");
          char32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            char h = src_[j + k];
            int d = std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) Error(j, "invalid escape sequence");
            cp = cp * 16 + d;
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) Error(j, "invalid code point in escape");
          AppendUtf8(&value, cp);
          j += n;
          break;
        }
        default:
          // Python keeps unknown escapes as written.
          value.push_back('\\');
          value.push_back(e);
      }
    }
    Emit(TokenKind::kString, value, i);
    return j + 1;
  }

  std::string src_;
  std::string name_;
  LexerOptions options_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  std::size_t cursor_ = 0;
  int line_ = 1, column_ = 1;
};

}  // namespace

std::vector<Token> Tokenize(const std::string& source, const std::string& source_name, const LexerOptions& options) {
  return Lexer(source, source_name, options).Run();
}

}  // namespace fission::tokenizer::jinja
