#include "engine/detokenizer.h"

#include <string_view>

namespace fission::engine {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool EndsWithReplacement(const std::string& text) {
  return text.size() >= kReplacement.size() &&
         text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}
}  // namespace

std::unique_ptr<TextStream> Detokenizer::NewStream() const { return std::make_unique<WindowTextStream>(this); }

std::string WindowTextStream::DecodeRange(std::size_t begin, std::size_t end) const {
  if (begin >= end) return "";
  return detokenizer_->Decode(std::vector<std::int32_t>(ids_.begin() + begin, ids_.begin() + end));
}

std::string WindowTextStream::Append(std::int32_t token) {
  ids_.push_back(token);
  const std::string settled = DecodeRange(prefix_, read_);
  const std::string window = DecodeRange(prefix_, ids_.size());
  if (window.size() <= settled.size() || EndsWithReplacement(window) ||
      window.compare(0, settled.size(), settled) != 0)
    return "";
  prefix_ = read_;
  read_ = ids_.size();
  return window.substr(settled.size());
}

std::string WindowTextStream::Flush() {
  const std::string settled = DecodeRange(prefix_, read_);
  const std::string window = DecodeRange(prefix_, ids_.size());
  prefix_ = read_ = ids_.size();
  if (window.size() <= settled.size() || window.compare(0, settled.size(), settled) != 0) return "";
  return window.substr(settled.size());
}

}  // namespace fission::engine
