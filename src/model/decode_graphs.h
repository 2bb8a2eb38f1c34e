// Captured decode steps (CUDA graphs) for one model shard: a decode-only step of n sequences runs
// as the replay of a graph captured for the smallest batch size >= n in the configured list, its
// rows past n padding (token 0 at position 0, KV slot -1: nothing is written; their logits are
// dropped). The engine captures every size at start-up (CaptureAll); a size not captured yet is
// captured the first time a batch needs it.
//
// Every graph reads its step from one fixed step-input block (model/step_inputs.h), written the
// same way as an eager step's, with block tables at a fixed width of `max_pages` pages per
// sequence. A replay writes the padded batch into the block and copies everything before the
// tables plus the tables' used columns.
//
// Graphs hold the model memory's addresses: they belong to one allocation and are dropped when the
// model allocates its memory again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "model/forward_batch.h"
#include "model/model_memory.h"
#include "model/step_inputs.h"

namespace fission::model {

// SGLang's --cuda-graph-bs, --cuda-graph-max-bs and --disable-cuda-graph.
struct CudaGraphOptions {
  bool disabled = false;
  std::vector<int> batch_sizes;  // empty: DefaultCudaGraphSizes(max_batch_size)
  int max_batch_size = 0;        // 0: 256
};

// 1, 2, 4, 8, 12, 16, 24, then every 8 up to `max_batch_size` (and it).
std::vector<int> DefaultCudaGraphSizes(int max_batch_size);
// The sorted, de-duplicated sizes `options` asks for; empty when graphs are off.
std::vector<int> CudaGraphSizes(const CudaGraphOptions& options);

class DecodeGraphs {
 public:
  // Runs one step of `view` (a padded batch in the graph's input block), leaving its logits in
  // `logits_out` [size, vocab].
  using StepFn = std::function<void(const StepView& view, const Tensor& logits_out)>;

  // Graphs of `sizes` for `memory` on `backend`; null when the backend does not capture graphs.
  static std::unique_ptr<DecodeGraphs> Create(kernels::Backend& backend, std::vector<int> sizes,
                                              const ModelMemory& memory, int vocab_ranks, std::int64_t max_positions,
                                              std::int64_t vocab_size);
  ~DecodeGraphs();

  // Whether these graphs were made for `memory` (the same storage and geometry).
  bool For(const ModelMemory& memory) const;
  // Whether `batch` is a step a graph runs: decode only (one new token per sequence, rows in
  // sequence order, every row's logits in order), at most the largest size, tables that fit.
  bool Takes(const ForwardBatch& batch) const;
  // Runs `batch` (Takes must hold) on its graph, capturing it first with `step` if needed (`step`
  // must stay valid as long as the graphs: a backend may run it again). An Error from the capture
  // turns off this size and every larger one (the step then runs eagerly: returns nullopt) and is
  // logged once.
  std::optional<StepLogits> Run(const ForwardBatch& batch, const StepFn& step);
  // Captures every size not captured yet, largest first (smaller graphs then reuse the larger
  // ones' scratch in the graph pool); returns how many sizes have a graph.
  int CaptureAll(const StepFn& step);

 private:
  DecodeGraphs(kernels::Backend& backend, std::vector<int> sizes, const ModelMemory& memory, int vocab_ranks,
               std::int64_t max_positions, std::int64_t vocab_size);
  int SizeFor(int batch_size) const;
  // Whether `size` has a graph, capturing it if needed; false (logged, that size and larger ones
  // off) when the capture fails.
  bool EnsureCaptured(int size, const StepFn& step);
  void Capture(int size, const StepFn& step);
  // Writes `batch`'s sequences and padding rows up to `size` into the block.
  void WritePadded(const ForwardBatch& batch, int size);

  kernels::Backend& backend_;
  std::vector<int> sizes_;  // ascending; sizes from a failed capture on are removed
  std::vector<const void*> memory_addresses_;
  MemoryPlan memory_plan_;
  std::int64_t max_pages_ = 0, vocab_size_ = 0;
  std::unique_ptr<StepInputs> inputs_;
  ForwardBatch padded_;  // the last padded batch (scratch)
  Buffer logits_;        // [largest size, vocab]: every graph's output rows
  std::map<int, std::unique_ptr<kernels::StepGraph>> graphs_;
};

}  // namespace fission::model
