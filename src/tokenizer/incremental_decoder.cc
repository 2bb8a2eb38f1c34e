#include "tokenizer/incremental_decoder.h"

namespace fission::tokenizer {
namespace {

bool EndsWithReplacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

// Ids kept before the read offset so the window still starts on a complete token sequence.
constexpr std::size_t kContextIds = 6;

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
  // Hold back while the new text ends in an incomplete character (decoded as U+FFFD) or does not
  // extend what was already emitted.
  if (new_text.size() <= prefix_text.size() || EndsWithReplacement(new_text) ||
      new_text.compare(0, prefix_text.size(), prefix_text) != 0) {
    return "";
  }
  std::string delta = new_text.substr(prefix_text.size());
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
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
