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
                                                   const ModelMemory& memory, int vocab_ranks,
                                                   std::int64_t max_positions, std::int64_t vocab_size) {
  if (sizes.empty() || !backend.CapturesGraphs()) return nullptr;
  return std::unique_ptr<DecodeGraphs>(
      new DecodeGraphs(backend, std::move(sizes), memory, vocab_ranks, max_positions, vocab_size));
}

DecodeGraphs::DecodeGraphs(kernels::Backend& backend, std::vector<int> sizes, const ModelMemory& memory,
                           int vocab_ranks, std::int64_t max_positions, std::int64_t vocab_size)
    : backend_(backend),
      sizes_(std::move(sizes)),
      memory_addresses_(memory.addresses()),
      memory_plan_(memory.plan()),
      vocab_size_(vocab_size) {
  FISSION_CHECK(!sizes_.empty() && sizes_.front() >= 1, "no CUDA graph batch sizes");
  const std::int64_t page_size = memory_plan_.page_size;
  // A sequence never holds more pages than its longest context needs, nor than the memory has.
  max_pages_ = std::min(memory_plan_.num_pages, (max_positions + page_size - 1) / page_size);
  const std::int64_t g = sizes_.back();
  StepInputs sizing(backend_, memory.spec(), vocab_ranks);
  inputs_ = std::make_unique<StepInputs>(backend_, memory.spec(), vocab_ranks,
                                         sizing.BytesFor(g, g, g, g, max_pages_));
  logits_ = Buffer(DType::kF32, Shape{g, vocab_size_}, backend_.allocator());
}

DecodeGraphs::~DecodeGraphs() { graphs_.clear(); }

bool DecodeGraphs::For(const ModelMemory& memory) const {
  return memory.plan() == memory_plan_ && memory.SameStorage(memory_addresses_);
}

bool DecodeGraphs::Takes(const ForwardBatch& batch) const {
  const std::size_t n = batch.sequences.size();
  if (sizes_.empty() || n == 0 || n > static_cast<std::size_t>(sizes_.back())) return false;
  if (batch.token_ids.size() != n || batch.logits_indices.size() != n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const SequenceSlice& s = batch.sequences[i];
    if (s.query_len != 1 || s.query_start != static_cast<std::int32_t>(i) ||
        batch.logits_indices[i] != static_cast<std::int32_t>(i) ||
        static_cast<std::int64_t>(s.block_table.size()) > max_pages_ || s.block_table.empty())
      return false;
  }
  return true;
}

int DecodeGraphs::SizeFor(int batch_size) const {
  return *std::lower_bound(sizes_.begin(), sizes_.end(), batch_size);
}

// Rows past the batch's are padding: token 0 at position 0 reading page 0, KV slot -1, no state.
void DecodeGraphs::WritePadded(const ForwardBatch& batch, int size) {
  padded_ = batch;
  const std::int32_t n = batch.num_tokens();
  for (std::int32_t i = n; i < size; ++i) {
    padded_.token_ids.push_back(0);
    padded_.positions.push_back(0);
    padded_.kv_slots.push_back(-1);
    padded_.sequences.push_back(SequenceSlice{i, 1, 0, {0}, -1});
    padded_.logits_indices.push_back(i);
  }
  const PcpPlan unsplit = PlanContextParallelStep(padded_, 1, 0, 0);
  inputs_->Write(padded_, unsplit, memory_plan_.page_size, static_cast<std::int32_t>(max_pages_));
}

void DecodeGraphs::Capture(int size, const StepFn& step) {
  WritePadded(ForwardBatch{}, size);
  const Tensor out = logits_.tensor().Rows(0, size);
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
    Log(LogLevel::kWarning, "CUDA graphs for batch sizes >= ", size, " are off (the step runs eagerly): ", e.what());
    graphs_.erase(size);
    std::erase_if(sizes_, [&](int s) { return s >= size; });
    return false;
  }
}

int DecodeGraphs::CaptureAll(const StepFn& step) {
  const std::vector<int> sizes = sizes_;
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it)
    if (std::find(sizes_.begin(), sizes_.end(), *it) != sizes_.end()) EnsureCaptured(*it, step);
  return static_cast<int>(graphs_.size());
}

std::optional<StepLogits> DecodeGraphs::Run(const ForwardBatch& batch, const StepFn& step) {
  const int n = static_cast<int>(batch.sequences.size());
  const int size = SizeFor(n);
  if (!EnsureCaptured(size, step)) return std::nullopt;
  WritePadded(batch, size);
  std::int32_t used_pages = 1;
  for (const SequenceSlice& s : batch.sequences)
    used_pages = std::max(used_pages, static_cast<std::int32_t>(s.block_table.size()));
  graphs_.at(size)->Replay(inputs_->ReplayCopies(used_pages));
  return StepLogits(logits_.tensor().Rows(0, n), &backend_);
}

}  // namespace fission::model
