// Which model family builds a config's `model_type`: one entry per family, each a constructor of
// one rank's shard (model/decoder.h). Types whose family has not landed are read and refused with a
// message that names what was read.
#pragma once

#include <functional>
#include <memory>

#include "io/model_config.h"
#include "model/decoder.h"
#include "model/weights.h"

namespace fission::model {

using ModelFactory =
    std::function<std::unique_ptr<CausalLM>(const io::ModelConfig&, WeightLoader&, const ShardOptions&)>;

// The factory of `config.model_type`; an Error naming the type when no family builds it.
const ModelFactory& FactoryFor(const io::ModelConfig& config);
// Whether the family of `config.model_type` loads a NextN draft layer (ShardOptions::load_draft).
bool HasDraftLayer(const io::ModelConfig& config);

}  // namespace fission::model
