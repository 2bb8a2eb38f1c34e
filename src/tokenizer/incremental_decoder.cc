#include "tokenizer/incremental_decoder.h"

namespace fission::tokenizer {
namespace {

bool EndsWithReplacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

// Ids kept before the read offset so the window still starts on a complete token sequence.
constexpr std::size_t kContextIds = 6;
// Held-back ids after which a committable cut inside them is looked for (a character is at most
// four bytes, so a valid one is never held this long by itself).
constexpr std::size_t kHeldIdsBeforeSplit = 5;

}  // namespace

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens,
                                       const std::vector<std::int32_t>& context)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {
  std::size_t keep = std::min(context.size(), kContextIds);
  ids_.assign(context.end() - keep, context.end());
  prefix_offset_ = 0;
  read_offset_ = ids_.size();
}

std::string IncrementalDecoder::DecodeRange(std::size_t begin, std::size_t end) const {
  std::vector<std::int32_t> window(ids_.begin() + begin, ids_.begin() + end);
  return tokenizer_.Decode(window, skip_special_tokens_);
}

std::string IncrementalDecoder::Step(std::int32_t id) {
  ids_.push_back(id);
  std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  bool extends = new_text.size() > prefix_text.size() && new_text.compare(0, prefix_text.size(), prefix_text) == 0;
  if (extends && !EndsWithReplacement(new_text)) return Commit(prefix_text, new_text, ids_.size());
  if (!extends || ids_.size() - read_offset_ < kHeldIdsBeforeSplit) return "";
  // Held back for a while: the tail may be invalid bytes that never complete. Commit up to the
  // last cut k whose text the later ids already extend with more characters: the sequence that
  // ends the text at k was closed by what followed, so nothing can change it any more.
  for (std::size_t k = ids_.size() - 1; k > read_offset_; --k) {
    std::string cut_text = DecodeRange(prefix_offset_, k);
    if (cut_text.size() > prefix_text.size() && cut_text.size() < new_text.size() &&
        new_text.compare(0, cut_text.size(), cut_text) == 0 && cut_text.compare(0, prefix_text.size(), prefix_text) == 0) {
      return Commit(prefix_text, cut_text, k);
    }
  }
  return "";
}

std::string IncrementalDecoder::Commit(const std::string& prefix_text, const std::string& text, std::size_t end) {
  std::string delta = text.substr(prefix_text.size());
  prefix_offset_ = read_offset_;
  read_offset_ = end;
  return delta;
}

std::string IncrementalDecoder::Finish() {
  if (read_offset_ == ids_.size()) return "";
  std::string prefix_text = DecodeRange(prefix_offset_, read_offset_);
  std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  std::string delta = new_text.compare(0, prefix_text.size(), prefix_text) == 0 ? new_text.substr(prefix_text.size())
                                                                                 : new_text;
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return delta;
}

}  // namespace fission::tokenizer
