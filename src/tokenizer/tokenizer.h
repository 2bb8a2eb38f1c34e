// The public face of the tokenizer layer: load a Hugging Face tokenizer directory
// (tokenizer.json + tokenizer_config.json), encode text to ids, decode ids to text. A loaded
// Tokenizer is immutable apart from an internal cache: Encode and Decode may run on many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_config.h"

namespace fission::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Loads `dir`/tokenizer.json and `dir`/tokenizer_config.json; an Error names the component or
  // field that is malformed or unsupported.
  static std::unique_ptr<Tokenizer> Load(const std::string& dir);

  // Same ids as transformers' `tokenizer(text, add_special_tokens=...)` (the tokenizer.json
  // pipeline; add_special_tokens honours add_bos_token/add_eos_token). Encode a rendered chat
  // prompt with add_special_tokens=false: the template already wrote its special tokens.
  virtual std::vector<std::int32_t> Encode(std::string_view text, bool add_special_tokens = true) const = 0;
  // Same text as transformers' `decode(ids, skip_special_tokens=...)`.
  virtual std::string Decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = false) const = 0;
  virtual std::int64_t vocab_size() const = 0;
  // transformers' `tokenizer.vocab_size`: the model's vocabulary without the added tokens beyond it.
  virtual std::int64_t base_vocab_size() const { return vocab_size(); }
  virtual std::optional<std::int32_t> TokenToId(std::string_view token) const = 0;
  virtual std::optional<std::int32_t> bos_token_id() const = 0;
  virtual std::optional<std::int32_t> eos_token_id() const = 0;
  // The token text of `id` (added tokens included), or nullopt for an unknown id.
  virtual std::optional<std::string> IdToToken(std::int32_t id) const = 0;
  // Whether `id` is a special added token (dropped by skip_special_tokens).
  virtual bool IsSpecial(std::int32_t id) const = 0;
  // The raw bytes token `id` adds to a decoded text when it follows other tokens (no UTF-8 repair,
  // so a token holding part of a character gives those bytes); empty for special tokens and
  // unknown ids. Constrained decoding matches grammars against these.
  virtual std::string TokenBytes(std::int32_t id) const { return IsSpecial(id) ? "" : IdToToken(id).value_or(""); }
  // tokenizer_config.json's settings: special-token strings, chat template, ...
  virtual const TokenizerConfig& config() const = 0;
};

}  // namespace fission::tokenizer
