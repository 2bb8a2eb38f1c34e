// The interface every architecture implements, and what the engine's model runner calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "tensor/tensor.h"

namespace fission::kernels {
class Backend;
}

namespace fission::model {

// A step's fp32 logits [rows, vocab] and where they are.
struct StepLogits {
  StepLogits() = default;
  explicit StepLogits(Buffer owned, kernels::Backend* on = nullptr)
      : logits(owned.tensor()), backend(on), storage(std::move(owned)) {}
  // Logits the model keeps (a captured graph's output): valid until the model's next step.
  StepLogits(const Tensor& kept, kernels::Backend* on) : logits(kept), backend(on) {}

  Tensor logits;
  kernels::Backend* backend = nullptr;  // the backend whose device memory holds them; null: host memory
  Buffer storage;                       // owns `logits`, unless the model keeps them
};

// The logits in host memory (copied there from the device when they are not).
Buffer HostLogits(StepLogits logits);

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual std::string architecture() const = 0;
  virtual std::int64_t vocab_size() const = 0;
  virtual std::int64_t max_position_embeddings() const = 0;
  // The per-token KV row of every layer.
  virtual std::vector<KvLayerLayout> KvLayout() const = 0;
  // Runs one step: writes the new tokens' KV rows into `cache` and returns fp32 logits
  // [batch.logits_indices.size(), vocab_size] on the host.
  virtual Buffer Forward(const ForwardBatch& batch, KvCache& cache) = 0;
  // The same step, but a model running on a device may leave the logits there, with the backend
  // that owns them (the engine then samples on the device). By default: Forward's host logits.
  virtual StepLogits ForwardKeepLogits(const ForwardBatch& batch, KvCache& cache) {
    return StepLogits(Forward(batch, cache));
  }
  // Where the caller's KvCache must live: the memory of the device the model runs on (rank 0's).
  virtual Allocator* kv_allocator() { return CpuAllocator(); }
  // The memory left on the model's device after its weights (the smallest free and total over
  // its ranks); nullopt when the model runs in host memory.
  virtual std::optional<kernels::DeviceMemory> device_memory() { return std::nullopt; }
  // Captures the decode graphs of every configured batch size for `cache` now, as SGLang does at
  // start-up, so that no request waits for a capture; a model without graphs does nothing.
  virtual void CaptureDecodeGraphs(KvCache& /*cache*/) {}
  // Drops captured decode graphs (they reference the communicators, which a parallel model
  // destroys before its ranks' models).
  virtual void ReleaseGraphs() {}
};

}  // namespace fission::model
