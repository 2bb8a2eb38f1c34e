// The tokenizer.json pipeline: added tokens, normalizer, pre-tokenizer, BPE model,
// post-processor and decoder, plus the tokenizer_config.json settings transformers applies.
#pragma once

#include <memory>
#include <string>

#include "base/json.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoders.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace fission::tokenizer {

class HfTokenizer : public Tokenizer {
 public:
  // `tokenizer_json` is the parsed tokenizer.json; `source` names it in errors.
  HfTokenizer(const Json& tokenizer_json, TokenizerConfig config, const std::string& source);

  std::vector<std::int32_t> Encode(std::string_view text, bool add_special_tokens = true) const override;
  std::string Decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = false) const override;
  std::int64_t vocab_size() const override;
  std::int64_t base_vocab_size() const override;
  std::optional<std::int32_t> TokenToId(std::string_view token) const override;
  std::optional<std::string> IdToToken(std::int32_t id) const override;
  bool IsSpecial(std::int32_t id) const override;
  std::string TokenBytes(std::int32_t id) const override;
  std::optional<std::int32_t> bos_token_id() const override { return bos_id_; }
  std::optional<std::int32_t> eos_token_id() const override { return eos_id_; }
  const TokenizerConfig& config() const override { return config_; }

 private:
  TokenizerConfig config_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<AddedVocabulary> added_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  std::optional<std::int32_t> bos_id_, eos_id_;
};

}  // namespace fission::tokenizer
