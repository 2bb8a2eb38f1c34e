#include "model/decode_graphs.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"

namespace fission::model {
namespace {

constexpr int kDefaultMaxBatchSize = 256;

std::size_t AlignUp(std::size_t n) { return (n + 255) / 256 * 256; }

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

DecodeGraphs::Layout DecodeGraphs::MakeLayout(std::size_t g, std::size_t sizes, std::size_t max_pages) {
  Layout l;
  l.token_ids = 0;
  l.positions = AlignUp(l.token_ids + g * sizeof(std::int32_t));
  l.kv_slots = AlignUp(l.positions + g * sizeof(std::int32_t));
  l.logits_rows = AlignUp(l.kv_slots + g * sizeof(std::int64_t));
  l.shape_metadata = AlignUp(l.logits_rows + g * sizeof(std::int32_t));
  l.tables = AlignUp(l.shape_metadata + sizes * kShapeMetadataInts * sizeof(std::int32_t));
  l.bytes = l.tables + g * max_pages * sizeof(std::int32_t);
  return l;
}

std::unique_ptr<DecodeGraphs> DecodeGraphs::Create(kernels::Backend& backend, std::vector<int> sizes,
                                                   const KvCache& cache, std::int64_t max_positions,
                                                   std::int64_t vocab_size) {
  if (sizes.empty()) return nullptr;
  auto graphs =
      std::unique_ptr<DecodeGraphs>(new DecodeGraphs(backend, std::move(sizes), cache, max_positions, vocab_size));
  if (graphs->inputs_ == nullptr) return nullptr;
  graphs->Prepare();
  return graphs;
}

DecodeGraphs::DecodeGraphs(kernels::Backend& backend, std::vector<int> sizes, const KvCache& cache,
                           std::int64_t max_positions, std::int64_t vocab_size)
    : backend_(backend), sizes_(std::move(sizes)), vocab_size_(vocab_size) {
  FISSION_CHECK(!sizes_.empty() && sizes_.front() >= 1, "no CUDA graph batch sizes");
  for (int l = 0; l < cache.num_layers(); ++l) cache_layers_.push_back(cache.layer(l).data);
  cache_pages_ = cache.num_pages();
  page_size_ = cache.page_size();
  // A sequence never holds more pages than its longest context needs, nor than the cache has.
  max_pages_ = std::min(cache_pages_, (max_positions + page_size_ - 1) / page_size_);
  const std::size_t g = static_cast<std::size_t>(sizes_.back());
  layout_ = MakeLayout(g, sizes_.size(), static_cast<std::size_t>(max_pages_));
  inputs_ = backend_.MakeGraphInputs(layout_.bytes);
}

void DecodeGraphs::Prepare() {
  const std::size_t g = static_cast<std::size_t>(sizes_.back());
  host_ = inputs_->host();
  std::span<std::int32_t> rows = Array<std::int32_t>(layout_.logits_rows, g);
  for (std::size_t i = 0; i < g; ++i) rows[i] = static_cast<std::int32_t>(i);  // every row, in order
  FillPadding(0, static_cast<int>(g));
  logits_ = Buffer(DType::kF32, Shape{static_cast<std::int64_t>(g), vocab_size_}, backend_.allocator());
}

DecodeGraphs::~DecodeGraphs() { graphs_.clear(); }

template <typename T>
std::span<T> DecodeGraphs::Array(std::size_t offset, std::size_t count) {
  return {reinterpret_cast<T*>(host_.data() + offset), count};
}

bool DecodeGraphs::For(const KvCache& cache) const {
  if (cache.num_pages() != cache_pages_ || cache.page_size() != page_size_ ||
      cache.num_layers() != static_cast<int>(cache_layers_.size()))
    return false;
  for (int l = 0; l < cache.num_layers(); ++l)
    if (cache.layer(l).data != cache_layers_[l]) return false;
  return true;
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

std::size_t DecodeGraphs::ShapeSlot(int size) const {
  // Slots follow the configured sizes (sizes_ only ever loses its largest entries).
  const std::size_t index = static_cast<std::size_t>(std::lower_bound(sizes_.begin(), sizes_.end(), size) - sizes_.begin());
  return layout_.shape_metadata + index * kShapeMetadataInts * sizeof(std::int32_t);
}

int DecodeGraphs::SizeFor(int batch_size) const {
  return *std::lower_bound(sizes_.begin(), sizes_.end(), batch_size);
}

// Rows [first_row, size) become padding: token 0 at position 0 in page 0, KV slot -1.
void DecodeGraphs::FillPadding(int first_row, int size) {
  const std::size_t w = static_cast<std::size_t>(max_pages_);
  const auto ids = Array<std::int32_t>(layout_.token_ids, size), positions = Array<std::int32_t>(layout_.positions, size);
  const auto slots = Array<std::int64_t>(layout_.kv_slots, size);
  const auto tables = Array<std::int32_t>(layout_.tables, size * w);
  for (int r = first_row; r < size; ++r) {
    ids[r] = 0;
    positions[r] = 0;
    slots[r] = -1;
    tables[r * w] = 0;
  }
}

void DecodeGraphs::Capture(int size, const StepFn& step) {
  const std::size_t g = static_cast<std::size_t>(size), w = static_cast<std::size_t>(max_pages_);
  host_ = inputs_->host();
  FillPadding(0, size);
  auto c = std::make_unique<Captured>();
  // The padded batch the plan is made from, and the views into the block the step reads.
  ForwardBatch& padded = c->padded;
  padded.token_ids.assign(g, 0);
  padded.positions.assign(g, 0);
  padded.kv_slots.assign(g, -1);
  padded.sequences.resize(g);
  for (std::size_t i = 0; i < g; ++i) {
    padded.sequences[i] = SequenceSlice{static_cast<std::int32_t>(i), 1, 0, {0}};
    padded.logits_indices.push_back(static_cast<std::int32_t>(i));
  }
  const auto positions = Array<const std::int32_t>(layout_.positions, g);
  const auto tables = Array<const std::int32_t>(layout_.tables, g * w);
  c->seqs.resize(g);
  for (std::size_t i = 0; i < g; ++i) {
    kernels::SeqAttention& s = c->seqs[i];
    s.query_start = static_cast<std::int32_t>(i);
    s.query_len = 1;
    s.kv_len = 1;
    s.query_positions = positions.subspan(i, 1);
    s.block_table = tables.subspan(i * w, w);
  }
  GraphStepViews& views = c->views;
  views.token_ids = Array<const std::int32_t>(layout_.token_ids, g);
  views.positions = positions;
  views.kv_slots = Array<const std::int64_t>(layout_.kv_slots, g);
  views.logits_indices = Array<const std::int32_t>(layout_.logits_rows, g);
  views.seqs = c->seqs;
  views.shape_metadata = Array<std::int32_t>(ShapeSlot(size), kShapeMetadataInts);
  views.logits_out = logits_.tensor().Rows(0, size);
  c->step = step;
  Captured* captured = c.get();
  c->graph = backend_.CaptureGraph(*inputs_, [captured] { captured->step(captured->padded, captured->views); });
  graphs_[size] = std::move(c);
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
  const std::size_t w = static_cast<std::size_t>(max_pages_);
  host_ = inputs_->host();  // waits until the last replay has copied the block
  auto ids = Array<std::int32_t>(layout_.token_ids, size);
  auto positions = Array<std::int32_t>(layout_.positions, size);
  auto slots = Array<std::int64_t>(layout_.kv_slots, size);
  auto tables = Array<std::int32_t>(layout_.tables, size * w);
  std::size_t used_pages = 1;
  for (int i = 0; i < n; ++i) {
    const SequenceSlice& s = batch.sequences[i];
    ids[i] = batch.token_ids[i];
    positions[i] = batch.positions[i];
    slots[i] = batch.kv_slots[i];
    std::copy(s.block_table.begin(), s.block_table.end(), tables.begin() + i * w);
    used_pages = std::max(used_pages, s.block_table.size());
  }
  FillPadding(n, size);
  // The host copy of each key count, for backends that read it (a device replay derives it from
  // the position).
  Captured& c = *graphs_.at(size);
  for (int i = 0; i < size; ++i) c.seqs[i].kv_len = positions[i] + 1;
  const std::vector<kernels::GraphInputCopy> copies = {
      {0, layout_.shape_metadata, 1, 0},
      {ShapeSlot(size), kShapeMetadataInts * sizeof(std::int32_t), 1, 0},
      {layout_.tables, used_pages * sizeof(std::int32_t), static_cast<std::size_t>(size), w * sizeof(std::int32_t)},
  };
  c.graph->Replay(copies);
  return StepLogits(logits_.tensor().Rows(0, n), &backend_);
}

}  // namespace fission::model
