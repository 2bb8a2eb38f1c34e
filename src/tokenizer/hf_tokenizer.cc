#include "tokenizer/hf_tokenizer.h"

#include <filesystem>

#include "tokenizer/component_json.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer {
namespace {

// transformers' clean_up_tokenization: drop the space before punctuation and contractions.
std::string CleanUpTokenizationSpaces(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) {
    std::string out;
    std::string_view f(from);
    std::size_t prev = 0;
    for (std::size_t p = text.find(f); p != std::string::npos; p = text.find(f, prev)) {
      out.append(text, prev, p - prev);
      out += to;
      prev = p + f.size();
    }
    out.append(text, prev, std::string::npos);
    text = std::move(out);
  }
  return text;
}

}  // namespace

HfTokenizer::HfTokenizer(const Json& j, TokenizerConfig config, const std::string& source)
    : config_(std::move(config)) {
  if (!j.is_object()) Fail(source, ": expected a JSON object");
  auto field = [&](const char* key) -> const Json& {
    static const Json kNull;
    auto it = j.find(key);
    return it == j.end() ? kNull : *it;
  };
  // "truncation" and "padding" are ignored: transformers turns both off for plain encoding.
  normalizer_ = MakeNormalizer(field("normalizer"), source + ": normalizer");
  added_ = std::make_unique<AddedVocabulary>(field("added_tokens"), normalizer_.get(), source + ": added_tokens");
  pre_tokenizer_ = MakePreTokenizer(field("pre_tokenizer"), source + ": pre_tokenizer");
  if (field("model").is_null()) Fail(source, ": model: missing");
  model_ = std::make_unique<BpeModel>(field("model"), source + ": model");
  decoder_ = MakeDecoder(field("decoder"), source + ": decoder");

  if (config_.bos_token) bos_id_ = TokenToId(*config_.bos_token);
  if (config_.eos_token) eos_id_ = TokenToId(*config_.eos_token);
  bool add_bos = config_.add_bos_token.value_or(false), add_eos = config_.add_eos_token.value_or(false);
  if (add_bos || add_eos) {
    // transformers rebuilds the post-processor from these flags for the tokenizer classes that
    // declare them.
    std::vector<std::int32_t> prefix, suffix;
    if (add_bos) {
      if (!bos_id_) Fail(source, ": tokenizer_config.json sets add_bos_token but bos_token is missing or unknown");
      prefix.push_back(*bos_id_);
    }
    if (add_eos) {
      if (!eos_id_) Fail(source, ": tokenizer_config.json sets add_eos_token but eos_token is missing or unknown");
      suffix.push_back(*eos_id_);
    }
    post_processor_ = MakeBosEosProcessor(std::move(prefix), std::move(suffix));
  } else {
    post_processor_ = MakePostProcessor(field("post_processor"), source + ": post_processor");
  }
}

std::vector<std::int32_t> HfTokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!IsValidUtf8(text)) {
    repaired = Utf8Lossy(text);
    text = repaired;
  }
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  Splits splits;
  for (Segment& segment : added_->Split(text)) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
      continue;
    }
    splits.clear();
    splits.push_back({std::move(segment.text), segment.at_start});
    if (pre_tokenizer_) pre_tokenizer_->PreTokenize(&splits);
    for (const Split& split : splits) model_->Tokenize(split.text, &ids);
  }
  if (add_special_tokens && post_processor_) post_processor_->Process(&ids);
  return ids;
}

std::string HfTokenizer::TokenBytes(std::int32_t id) const {
  std::vector<std::string> tokens;
  if (const AddedToken* added = added_->FindById(id)) {
    if (added->special) return "";
    tokens.push_back(added->content);
  } else if (const std::string* token = model_->IdToToken(id)) {
    tokens.push_back(*token);
  } else {
    return "";
  }
  if (decoder_) decoder_->DecodeBytes(&tokens);
  std::string bytes;
  for (const std::string& t : tokens) bytes += t;
  return bytes;
}

std::string HfTokenizer::Decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (const AddedToken* added = added_->FindById(id)) {
      if (skip_special_tokens && added->special) continue;
      tokens.push_back(added->content);
    } else if (const std::string* token = model_->IdToToken(id)) {
      tokens.push_back(*token);
    }
    // Unknown ids are ignored, as the reference does.
  }
  std::string text;
  if (decoder_) {
    decoder_->DecodeChain(&tokens);
    for (const std::string& t : tokens) text += t;
  } else {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i) text += ' ';
      text += tokens[i];
    }
  }
  if (config_.clean_up_tokenization_spaces) text = CleanUpTokenizationSpaces(std::move(text));
  return text;
}

std::int64_t HfTokenizer::vocab_size() const {
  std::int64_t n = model_->size();
  for (const AddedToken& t : added_->tokens()) n = std::max<std::int64_t>(n, std::int64_t{t.id} + 1);
  return n;
}

std::int64_t HfTokenizer::base_vocab_size() const { return model_->size(); }

std::optional<std::int32_t> HfTokenizer::TokenToId(std::string_view token) const {
  if (const AddedToken* added = added_->FindByContent(token)) return added->id;
  return model_->TokenToId(token);
}

std::optional<std::string> HfTokenizer::IdToToken(std::int32_t id) const {
  if (const AddedToken* added = added_->FindById(id)) return added->content;
  if (const std::string* token = model_->IdToToken(id)) return *token;
  return std::nullopt;
}

bool HfTokenizer::IsSpecial(std::int32_t id) const {
  const AddedToken* added = added_->FindById(id);
  return added != nullptr && added->special;
}

std::unique_ptr<Tokenizer> Tokenizer::Load(const std::string& dir) {
  std::string path = (std::filesystem::path(dir) / "tokenizer.json").string();
  if (!std::filesystem::exists(path)) Fail(path, ": not found (the model directory needs a tokenizer.json)");
  return std::make_unique<HfTokenizer>(ReadJsonOrFail(path), TokenizerConfig::Load(dir), path);
}


}  // namespace fission::tokenizer
