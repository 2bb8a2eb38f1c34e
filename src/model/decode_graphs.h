// Captured steps (CUDA graphs) for one model shard: a step of n sequences of T new tokens each
// (T = 1: plain decode or a chained draft step; T = S + 1: speculative verify runs of a token and
// S drafts, or padded draft extends, model/draft_batch.h) runs as the replay of a graph captured
// for the smallest batch size >= n in the configured list, its sequences past n padding (tokens 0
// at positions 0 .. T - 1, KV slot -1: nothing is written; their rows are dropped). Every row
// returns logits, or (StepShape::last_row_logits, the draft extends) each sequence's last row
// only. The engine captures every size at start-up (CaptureAll); a size not captured yet is
// captured the first time a batch needs it.
//
// Every graph reads its step from one fixed step-input block (model/step_inputs.h), written the
// same way as an eager step's, with block tables at a fixed width of `max_pages` pages per
// sequence. A replay writes the padded batch into the block and copies everything before the
// tables plus the tables' used columns. Besides the logits, a graph set may keep fixed rows of a
// model's own (StepShape::hidden_size): an output the step writes (the normed hidden states a draft
// step reads) and an input the caller fills before Run (the hidden rows a draft step reads).
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
  // What every graph of a set computes.
  struct StepShape {
    int tokens_per_sequence = 1;     // T: 1 for decode, S + 1 for verify runs and padded extends
    std::int64_t vocab_size = 0;     // the logits' width
    int vocab_ranks = 1;             // attention-TP ranks (the step-input block's vocabulary order)
    std::int64_t max_positions = 0;  // the longest context (the block tables' fixed width)
    // > 0: the graphs also write rows [tokens, hidden_size] (`Outputs::hidden`) and, with
    // `input_rows`, read rows [tokens, hidden_size] the caller fills (`Outputs::input`).
    std::int64_t hidden_size = 0;
    bool input_rows = false;
    // Logits of each sequence's last row only (rows i·T + T − 1), not of every row.
    bool last_row_logits = false;
    const char* what = "decode";  // the steps' name in logs
    const FamilyInputs* family = nullptr;  // the family's own step inputs (step_inputs.h), if any
  };
  // A graph's fixed tensors at its size (rows = size · T; logits rows = size with
  // last_row_logits): where the step writes its logits (and hidden rows) and the input rows it
  // reads. Empty where the StepShape asks for none.
  struct Outputs {
    Tensor logits, hidden, input;
  };
  // What a replay left: the batch's logits rows and hidden rows (valid until this set runs again).
  struct Result {
    StepLogits logits;
    Tensor hidden;
  };
  // Runs one step of `view` (a padded batch in the graph's input block) into `out`.
  using StepFn = std::function<void(const StepView& view, const Outputs& out)>;

  // Graphs of `sizes` for `memory` on `backend`; null when the backend does not capture graphs.
  static std::unique_ptr<DecodeGraphs> Create(kernels::Backend& backend, std::vector<int> sizes,
                                              const ModelMemory& memory, const StepShape& shape);
  ~DecodeGraphs();

  // Whether these graphs were made for `memory` (the same storage and geometry).
  bool For(const ModelMemory& memory) const;
  // Whether `batch` is a step a graph runs: every sequence T new tokens (T > 1: verify runs or
  // padded extends) in sequence order, every row's logits in order (or every sequence's last
  // row's), at most the largest size, tables that fit.
  bool Takes(const ForwardBatch& batch) const;
  // The input rows of the first `tokens` rows, for the caller to fill before Run (StepShape::input_rows).
  Tensor InputRows(std::int32_t tokens) const;
  // Runs `batch` (Takes must hold) on its graph, capturing it first with `step` if needed (`step`
  // must stay valid as long as the graphs: a backend may run it again; it must not write the
  // input rows). An Error from the capture turns off this size and every larger one (the step
  // then runs eagerly: returns nullopt) and is logged once.
  std::optional<Result> Run(const ForwardBatch& batch, const StepFn& step);
  // Captures every size not captured yet, largest first (smaller graphs then reuse the larger
  // ones' scratch in the graph pool); returns how many sizes have a graph.
  int CaptureAll(const StepFn& step);
  int tokens_per_sequence() const { return shape_.tokens_per_sequence; }

 private:
  DecodeGraphs(kernels::Backend& backend, std::vector<int> sizes, const ModelMemory& memory, const StepShape& shape);
  int SizeFor(int batch_size) const;
  // Whether `size` has a graph, capturing it if needed; false (logged, that size and larger ones
  // off) when the capture fails.
  bool EnsureCaptured(int size, const StepFn& step);
  void Capture(int size, const StepFn& step);
  // Writes `batch`'s sequences and padding sequences up to `size` into the block.
  void WritePadded(const ForwardBatch& batch, int size);
  Outputs OutputsOf(int size) const;
  // Logits rows a graph of `size` sequences returns.
  std::int64_t LogitsRows(std::int64_t sequences) const;

  kernels::Backend& backend_;
  std::vector<int> sizes_;  // ascending; sizes from a failed capture on are removed
  StepShape shape_;
  std::vector<const void*> memory_addresses_;
  MemoryPlan memory_plan_;
  std::int64_t max_pages_ = 0;
  std::unique_ptr<StepInputs> inputs_;
  ForwardBatch padded_;  // the last padded batch (scratch)
  // [largest size · T (or largest size), vocab] and [largest size · T, hidden]: every graph's
  // rows.
  Buffer logits_, hidden_, input_;
  std::map<int, std::unique_ptr<kernels::StepGraph>> graphs_;
};

}  // namespace fission::model
