// What the engine needs from a tokenizer: ids to text. Stop strings are matched on this text, and
// streamed text is cut from it. The tokenizer layer (or a test) provides the implementation; the
// engine calls it only from its own thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fission::engine {

class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  // The text of the generated ids `ids` (decoded as a whole, so that multi-token characters and
  // leading-space rules come out as the tokenizer defines them).
  virtual std::string Decode(const std::vector<std::int32_t>& ids) const = 0;
};

}  // namespace fission::engine
