#include "model/decode_graphs.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace fission::model {
namespace {

constexpr int kDefaultMaxBatchSize = 256;

}  // namespace

std::vector<int> DefaultCudaGraphSizes(int max_batch_size) {
  const int cap = max_batch_size > 0 ? max_batch_size : kDefaultMaxBatchSize;
  std::vector<int> sizes;
  for (int s : {1, 2, 4, 8, 12, 16, 24})
    if (s <= cap) sizes.push_back(s);
  for (int s = 32; s <= cap; s += 8) sizes.push_back(s);
  if (sizes.empty() || sizes.back() != cap) sizes.push_back(cap);
  return sizes;
}

std::vector<int> CudaGraphSizes(const CudaGraphOptions& options) {
  if (options.disabled) return {};
  std::vector<int> sizes = options.batch_sizes.empty() ? DefaultCudaGraphSizes(options.max_batch_size)
                                                       : options.batch_sizes;
  if (!options.batch_sizes.empty() && options.max_batch_size > 0)
    std::erase_if(sizes, [&](int s) { return s > options.max_batch_size; });
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::unique_ptr<DecodeGraphs> DecodeGraphs::Create(kernels::Backend& backend, std::vector<int> sizes,
                                                   const ModelMemory& memory, const StepShape& shape) {
  if (sizes.empty() || !backend.CapturesGraphs()) return nullptr;
  return std::unique_ptr<DecodeGraphs>(new DecodeGraphs(backend, std::move(sizes), memory, shape));
}

DecodeGraphs::DecodeGraphs(kernels::Backend& backend, std::vector<int> sizes, const ModelMemory& memory,
                           const StepShape& shape)
    : backend_(backend),
      sizes_(std::move(sizes)),
      shape_(shape),
      memory_addresses_(memory.addresses()),
      memory_plan_(memory.plan()) {
  FISSION_CHECK(!sizes_.empty() && sizes_.front() >= 1, "no CUDA graph batch sizes");
  FISSION_CHECK(shape_.tokens_per_sequence >= 1, "a graph step needs at least one token per sequence");
  const std::int64_t page_size = memory_plan_.page_size;
  // A sequence never holds more pages than its longest context needs, nor than the memory has.
  max_pages_ = std::min(memory_plan_.num_pages, (shape_.max_positions + page_size - 1) / page_size);
  const std::int64_t g = sizes_.back(), rows = g * shape_.tokens_per_sequence;
  StepInputs sizing(backend_, memory.spec(), shape_.vocab_ranks, 0, shape_.family);
  inputs_ = std::make_unique<StepInputs>(backend_, memory.spec(), shape_.vocab_ranks,
                                         sizing.BytesFor(rows, rows, LogitsRows(g), g, max_pages_), shape_.family);
  Allocator* alloc = backend_.allocator();
  logits_ = Buffer(DType::kF32, Shape{LogitsRows(g), shape_.vocab_size}, alloc);
  if (shape_.hidden_size > 0) {
    hidden_ = Buffer(DType::kF32, Shape{rows, shape_.hidden_size}, alloc);
    if (shape_.input_rows) {
      input_ = Buffer(DType::kF32, Shape{rows, shape_.hidden_size}, alloc);
      backend_.Zero(input_);  // padding rows read finite values
    }
  }
}

DecodeGraphs::~DecodeGraphs() { graphs_.clear(); }

bool DecodeGraphs::For(const ModelMemory& memory) const {
  return memory.plan() == memory_plan_ && memory.SameStorage(memory_addresses_);
}

std::int64_t DecodeGraphs::LogitsRows(std::int64_t sequences) const {
  return shape_.last_row_logits ? sequences : sequences * shape_.tokens_per_sequence;
}

bool DecodeGraphs::Takes(const ForwardBatch& batch) const {
  const std::size_t n = batch.sequences.size();
  const std::int32_t t = shape_.tokens_per_sequence;
  if (sizes_.empty() || n == 0 || n > static_cast<std::size_t>(sizes_.back())) return false;
  const std::size_t rows = n * static_cast<std::size_t>(t);
  const std::size_t logits = static_cast<std::size_t>(LogitsRows(static_cast<std::int64_t>(n)));
  if (batch.token_ids.size() != rows || batch.logits_indices.size() != logits) return false;
  // Every row in order, or the last row of each sequence.
  const std::int32_t step = shape_.last_row_logits ? t : 1, offset = shape_.last_row_logits ? t - 1 : 0;
  for (std::size_t r = 0; r < logits; ++r)
    if (batch.logits_indices[r] != static_cast<std::int32_t>(r) * step + offset) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const SequenceSlice& s = batch.sequences[i];
    if (s.query_len != t || s.query_start != static_cast<std::int32_t>(i) * t || (t > 1 && !s.verify) ||
        static_cast<std::int64_t>(s.block_table.size()) > max_pages_ || s.block_table.empty())
      return false;
  }
  return true;
}

Tensor DecodeGraphs::InputRows(std::int32_t tokens) const {
  FISSION_CHECK(!input_.empty(), "these graphs read no input rows");
  return input_.tensor().Rows(0, tokens);
}

int DecodeGraphs::SizeFor(int batch_size) const {
  return *std::lower_bound(sizes_.begin(), sizes_.end(), batch_size);
}

// Sequences past the batch's are padding: tokens 0 at positions 0 .. T - 1 reading page 0, KV
// slot -1, no state.
void DecodeGraphs::WritePadded(const ForwardBatch& batch, int size) {
  padded_ = batch;
  const std::int32_t t = shape_.tokens_per_sequence;
  const std::int32_t page_size = static_cast<std::int32_t>(memory_plan_.page_size);
  for (std::int32_t i = static_cast<std::int32_t>(batch.sequences.size()); i < size; ++i) {
    SequenceSlice pad{i * t, t, 0, std::vector<std::int32_t>((t + page_size - 1) / page_size, 0), -1};
    pad.verify = t > 1;
    padded_.sequences.push_back(std::move(pad));
    for (std::int32_t j = 0; j < t; ++j) {
      padded_.token_ids.push_back(0);
      padded_.positions.push_back(j);
      padded_.kv_slots.push_back(-1);
      if (!shape_.last_row_logits || j + 1 == t) padded_.logits_indices.push_back(i * t + j);
    }
  }
  const PcpPlan unsplit = PlanContextParallelStep(padded_, 1, 0, 0);
  inputs_->Write(padded_, unsplit, memory_plan_.page_size, static_cast<std::int32_t>(max_pages_));
}

DecodeGraphs::Outputs DecodeGraphs::OutputsOf(int size) const {
  const std::int64_t rows = static_cast<std::int64_t>(size) * shape_.tokens_per_sequence;
  Outputs out;
  out.logits = logits_.tensor().Rows(0, LogitsRows(size));
  if (!hidden_.empty()) out.hidden = hidden_.tensor().Rows(0, rows);
  if (!input_.empty()) out.input = input_.tensor().Rows(0, rows);
  return out;
}

void DecodeGraphs::Capture(int size, const StepFn& step) {
  WritePadded(ForwardBatch{}, size);
  const Outputs out = OutputsOf(size);
  StepInputs* inputs = inputs_.get();
  // A backend may run the step again (the CPU tests' replays): it reads whatever the block holds.
  graphs_[size] = backend_.CaptureGraph(inputs_->block(), [inputs, out, step] { step(inputs->view(), out); });
}
bool DecodeGraphs::EnsureCaptured(int size, const StepFn& step) {
  if (graphs_.count(size) != 0) return true;
  try {
    Capture(size, step);
    return true;
  } catch (const Error& e) {
    Log(LogLevel::kWarning, "CUDA graphs of ", shape_.what, " steps for batch sizes >= ", size,
        " are off (the step runs eagerly): ", e.what());
    graphs_.erase(size);
    std::erase_if(sizes_, [&](int s) { return s >= size; });
    return false;
  }
}

int DecodeGraphs::CaptureAll(const StepFn& step) {
  const std::vector<int> sizes = sizes_;
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    if (std::find(sizes_.begin(), sizes_.end(), *it) == sizes_.end() || EnsureCaptured(*it, step)) continue;
    // That size and the larger ones are off; the smaller ones go up from the smallest and stop at
    // the next failure, so a step that cannot be captured is tried twice, not at every size.
    for (const int s : std::vector<int>(sizes_))
      if (!EnsureCaptured(s, step)) break;
    break;
  }
  return static_cast<int>(graphs_.size());
}

std::optional<DecodeGraphs::Result> DecodeGraphs::Run(const ForwardBatch& batch, const StepFn& step) {
  const int n = static_cast<int>(batch.sequences.size());
  const int size = SizeFor(n);
  if (!EnsureCaptured(size, step)) return std::nullopt;
  WritePadded(batch, size);
  std::int32_t used_pages = 1;
  for (const SequenceSlice& s : padded_.sequences)
    used_pages = std::max(used_pages, static_cast<std::int32_t>(s.block_table.size()));
  graphs_.at(size)->Replay(inputs_->ReplayCopies(used_pages));
  const std::int64_t rows = batch.num_tokens();
  Result result{StepLogits(logits_.tensor().Rows(0, LogitsRows(n)), &backend_), Tensor{}};
  if (!hidden_.empty()) result.hidden = hidden_.tensor().Rows(0, rows);
  return result;
}

}  // namespace fission::model
