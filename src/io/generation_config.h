// What a checkpoint says about generation beside the model itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fission::io {

// The EOS ids of a checkpoint: generation_config.json's eos_token_id, else config.json's (an int
// or a list); empty when neither file has one. An Error names the file and field when it is not
// a token id or a list of them.
std::vector<std::int32_t> ReadEosTokenIds(const std::string& model_dir);

}  // namespace fission::io
