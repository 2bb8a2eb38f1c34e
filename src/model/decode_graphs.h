// Captured decode steps (CUDA graphs) for one model shard: a decode-only step of n sequences runs
// as the replay of a graph captured for the smallest batch size >= n in the configured list, its
// rows past n padding (token 0 at position 0, KV slot -1: nothing is written; their logits are
// dropped). The engine captures every size at start-up (CaptureAll); a size not captured yet is
// captured the first time a batch needs it.
//
// Every graph reads its step from one input block (kernels/step_graph.h), laid out as
//   token ids | positions | KV slots | logits rows | shape metadata | block tables
// for the largest size, block tables at a fixed width of `max_pages` pages per sequence, and one
// shape-metadata slot per size (each graph's own constants). A replay copies the first four
// arrays, its slot and the used columns of the tables.
//
// Graphs hold the KV cache's addresses: they belong to one cache and are dropped when the model
// is given another.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "model/causal_lm.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"

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

// The host spans a captured step's operations read, all inside the input block.
struct GraphStepViews {
  std::span<const std::int32_t> token_ids, positions, logits_indices;
  std::span<const std::int64_t> kv_slots;
  std::span<const kernels::SeqAttention> seqs;
  std::span<std::int32_t> shape_metadata;  // room for metadata derived from shapes alone
  Tensor logits_out;                       // [size, vocab] fp32: where the step leaves its logits
};

class DecodeGraphs {
 public:
  // Runs one step of `padded` (the all-padding batch of the graph's size, for the plan) with the
  // views' spans, leaving its logits in views.logits_out.
  using StepFn = std::function<void(const ForwardBatch& padded, const GraphStepViews& views)>;

  // Graphs of `sizes` for `cache` on `backend`; null when the backend does not capture graphs.
  static std::unique_ptr<DecodeGraphs> Create(kernels::Backend& backend, std::vector<int> sizes, const KvCache& cache,
                                              std::int64_t max_positions, std::int64_t vocab_size);
  ~DecodeGraphs();

  // Whether these graphs were made for `cache` (the same memory and geometry).
  bool For(const KvCache& cache) const;
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
  struct Layout {
    std::size_t token_ids, positions, kv_slots, logits_rows, shape_metadata, tables, bytes;
  };
  // A captured size: the padded batch and views it was captured with, kept for the graph's life.
  struct Captured {
    ForwardBatch padded;
    std::vector<kernels::SeqAttention> seqs;
    GraphStepViews views;
    StepFn step;
    std::unique_ptr<kernels::StepGraph> graph;
  };
  static constexpr std::size_t kShapeMetadataInts = 2048;  // per size: TP 8 at batch 256

  DecodeGraphs(kernels::Backend& backend, std::vector<int> sizes, const KvCache& cache, std::int64_t max_positions,
               std::int64_t vocab_size);
  static Layout MakeLayout(std::size_t largest, std::size_t sizes, std::size_t max_pages);
  std::size_t ShapeSlot(int size) const;  // offset of a size's shape-metadata slot
  void Prepare();  // fills the constant parts of the block and allocates the logits
  int SizeFor(int batch_size) const;
  // Whether `size` has a graph, capturing it if needed; false (logged, that size and larger ones
  // off) when the capture fails.
  bool EnsureCaptured(int size, const StepFn& step);
  void Capture(int size, const StepFn& step);
  void FillPadding(int first_row, int size);
  template <typename T>
  std::span<T> Array(std::size_t offset, std::size_t count);

  kernels::Backend& backend_;
  std::vector<int> sizes_;  // ascending; sizes from a failed capture on are removed
  std::vector<const void*> cache_layers_;
  std::int64_t cache_pages_ = 0, page_size_ = 0, max_pages_ = 0, vocab_size_ = 0;
  Layout layout_{};
  std::unique_ptr<kernels::GraphInputs> inputs_;
  std::span<std::byte> host_;
  Buffer logits_;  // [largest size, vocab]: every graph's output rows
  std::map<int, std::unique_ptr<Captured>> graphs_;
};

}  // namespace fission::model
