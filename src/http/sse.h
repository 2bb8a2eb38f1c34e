// Server-sent events on the client side: splitting a byte stream into lines and picking out the
// "data:" fields, as OpenAI-compatible streaming responses use them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fission::http {

class LineSplitter {
 public:
  // Appends `data` and calls on_line(std::string_view) for each completed line, without its
  // "\n" or "\r\n" ending.
  template <typename F>
  void Feed(std::string_view data, F&& on_line) {
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      if (nl == std::string_view::npos) {
        partial_.append(data);
        return;
      }
      std::string_view piece = data.substr(0, nl);
      data.remove_prefix(nl + 1);
      if (!partial_.empty()) {
        partial_.append(piece);
        std::string line = std::move(partial_);
        partial_.clear();
        on_line(StripCr(line));
      } else {
        on_line(StripCr(piece));
      }
    }
  }
  // Bytes after the last line ending.
  const std::string& partial() const { return partial_; }

 private:
  static std::string_view StripCr(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  }
  std::string partial_;
};

// The value of an SSE "data:" line (one optional space after the colon is dropped); nullopt for
// any other line.
std::optional<std::string_view> SseData(std::string_view line);

}  // namespace fission::http
