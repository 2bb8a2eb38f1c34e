// What every layer's forward needs besides its own weights: the backend, the step's inputs (read
// through the spans of the step-input block), the token layout's transitions and the model's
// memory.
#pragma once

#include "kernels/backend.h"
#include "model/model_memory.h"
#include "model/step_inputs.h"
#include "model/token_layout.h"

namespace fission::model {

enum class MlaForm { kAuto, kExpanded, kAbsorbed };

struct StepContext {
  kernels::Backend* backend = nullptr;
  const StepView* in = nullptr;
  const TokenLayout* layout = nullptr;
  const ModelMemory* memory = nullptr;
  Tensor logits_out;  // where the logits go (data null: a new buffer)
  MlaForm mla_form = MlaForm::kAuto;
};

}  // namespace fission::model
