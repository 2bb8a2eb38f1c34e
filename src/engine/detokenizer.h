// What the engine needs from a tokenizer: ids to text. Stop strings are matched on this text, and
// streamed text is cut from it. The tokenizer layer (or a test) provides the implementation; the
// engine calls it only from its own thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fission::engine {

// The text of one sequence's generated ids, produced token by token.
class TextStream {
 public:
  virtual ~TextStream() = default;
  // Adds a generated token; returns the text it settles (empty while, for example, a character
  // spread over several tokens is incomplete). The pieces concatenate to the text of all ids.
  virtual std::string Append(std::int32_t token) = 0;
  // At the end: the text still held back.
  virtual std::string Flush() = 0;
};

class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  // The text of `ids` decoded together (leading-space rules and multi-token characters come out
  // as the tokenizer defines them; an incomplete character at the end decodes to U+FFFD).
  virtual std::string Decode(const std::vector<std::int32_t>& ids) const = 0;
  // A stream for one sequence. The default decodes only a short window of recent ids per token
  // (WindowTextStream); a tokenizer with its own incremental decoder may return that instead.
  virtual std::unique_ptr<TextStream> NewStream() const;
};

// Incremental decoding with two offsets into the ids: text is settled by decoding the window
// [prefix, end) and removing the decoded [prefix, read) part, so that rules depending on the
// first token of a decode (a stripped leading space) cancel out, and new text is held back while
// it ends in U+FFFD (an incomplete character). Each token costs a decode of a few ids.
class WindowTextStream : public TextStream {
 public:
  explicit WindowTextStream(const Detokenizer* detokenizer) : detokenizer_(detokenizer) {}
  std::string Append(std::int32_t token) override;
  std::string Flush() override;

 private:
  std::string DecodeRange(std::size_t begin, std::size_t end) const;

  const Detokenizer* detokenizer_;
  std::vector<std::int32_t> ids_;
  std::size_t prefix_ = 0;  // the window starts here
  std::size_t read_ = 0;    // text of ids before this is settled
};

}  // namespace fission::engine
