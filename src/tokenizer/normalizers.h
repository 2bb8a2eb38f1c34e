// Normalizers of the tokenizer.json pipeline: they rewrite the text before pre-tokenization.
#pragma once

#include <memory>
#include <string>

#include "base/json.h"

namespace fission::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(std::string* text) const = 0;
};

// Builds the normalizer described by `j` (null gives nullptr). Unsupported types fail naming `where`.
std::unique_ptr<Normalizer> MakeNormalizer(const Json& j, const std::string& where);

}  // namespace fission::tokenizer
