// Post-processors add special tokens around an encoded sequence when add_special_tokens is set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/json.h"

namespace fission::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void Process(std::vector<std::int32_t>* ids) const = 0;
};

std::unique_ptr<PostProcessor> MakePostProcessor(const Json& j, const std::string& where);
// `bos` (when given) before and `eos` (when given) after the sequence: what transformers builds
// from tokenizer_config.json's add_bos_token / add_eos_token.
std::unique_ptr<PostProcessor> MakeBosEosProcessor(std::vector<std::int32_t> prefix, std::vector<std::int32_t> suffix);

}  // namespace fission::tokenizer
