#include "model/parallel_model.h"

#include <omp.h>

#include <thread>

namespace fission::model {

ParallelCausalLM::ParallelCausalLM(std::unique_ptr<comm::World> world, std::vector<std::unique_ptr<CausalLM>> ranks)
    : ranks_(std::move(ranks)), world_(std::move(world)) {
  FISSION_CHECK(static_cast<int>(ranks_.size()) == world_->size());
}

ParallelCausalLM::~ParallelCausalLM() = default;

const KvCache& ParallelCausalLM::RankCache(const KvCache& cache, int rank) const {
  if (rank == 0) return cache;
  return *rank_caches_.at(&cache).at(rank - 1);
}

Buffer ParallelCausalLM::Forward(const ForwardBatch& batch, KvCache& cache) {
  return HostLogits(ForwardKeepLogits(batch, cache));
}

StepLogits ParallelCausalLM::ForwardKeepLogits(const ForwardBatch& batch, KvCache& cache) {
  auto& caches = rank_caches_[&cache];
  if (caches.empty() || caches[0]->num_pages() != cache.num_pages() || caches[0]->page_size() != cache.page_size()) {
    caches.clear();
    for (int r = 1; r < world_size(); ++r)
      caches.push_back(
          std::make_unique<KvCache>(KvLayout(), cache.num_pages(), cache.page_size(), ranks_[r]->kv_allocator()));
  }
  const int threads_each = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / world_size());
  std::vector<std::thread> workers;
  for (int r = 1; r < world_size(); ++r) {
    workers.emplace_back([&, r] {
      omp_set_num_threads(threads_each);
      ranks_[r]->Forward(batch, *caches[r - 1]);
    });
  }
  StepLogits logits = ranks_[0]->ForwardKeepLogits(batch, cache);
  for (std::thread& t : workers) t.join();
  return logits;
}

}  // namespace fission::model
