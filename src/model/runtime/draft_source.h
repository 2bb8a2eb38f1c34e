// Where speculative decoding's draft layer comes from (LoadOptions::load_draft): the NextN layer
// the target checkpoint carries after its decoder layers (`model.layers.{num_hidden_layers}.*`,
// as published DeepSeek-V3/R1 checkpoints do), or a separate checkpoint directory
// (--speculative-draft-model-path) in the layout of SGLang's NextN export: config.json with
// num_hidden_layers 1 and the layer as `model.layers.0.*` (an older export keeps the target's
// num_hidden_layers and the layer's original index, which is read the same way SGLang reads it).
#pragma once

#include <cstdint>
#include <memory>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/runtime/load_options.h"

namespace fission::model {

struct DraftSource {
  std::unique_ptr<io::Checkpoint> checkpoint;  // null: the target's own checkpoint (or dummy weights)
  std::int64_t layer = 0;                      // the layer's index in that checkpoint
};

// Checks everything before any weight is read (the family, the layout, the draft's config against
// the target's, the layer's tensors) and opens the draft checkpoint; one Error lists every problem.
// `target_checkpoint` is null with dummy weights.
DraftSource ResolveDraftSource(const io::ModelConfig& target, const io::Checkpoint* target_checkpoint,
                               const LoadOptions& options);

}  // namespace fission::model
