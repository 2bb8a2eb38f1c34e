#include "model/parallel_model.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <thread>

#include "base/log.h"
#include "model/step_plan.h"

namespace fission::model {

ParallelCausalLM::ParallelCausalLM(std::unique_ptr<comm::World> world, std::vector<std::unique_ptr<CausalLM>> ranks,
                                   std::unique_ptr<comm::NodeLink> link)
    : link_(std::move(link)), ranks_(std::move(ranks)), world_(std::move(world)) {
  FISSION_CHECK(static_cast<int>(ranks_.size()) == world_->num_local_ranks());
  FISSION_CHECK(link_ != nullptr || world_->num_local_ranks() == world_->size());
}

ParallelCausalLM::~ParallelCausalLM() {
  // Captured graphs hold NCCL work of the communicators, which go before the ranks' models.
  for (auto& rank : ranks_) rank->ReleaseGraphs();
  if (!link_ || !link_->leader()) return;
  // Destroyed while an exception unwinds: node 0 is failing, and followers must not exit 0.
  const std::string reason =
      std::uncaught_exceptions() > 0 ? "the leader (node 0) stopped because of an error (its log says which)" : "";
  try {
    link_->SendToFollowers(comm::ControlMessage::kShutdown, reason);
  } catch (const Error& e) {
    Log(LogLevel::kWarning, "could not tell every follower to exit: ", e.what());
  }
}

const KvCache& ParallelCausalLM::RankCache(const KvCache& cache, int rank) const {
  if (rank == 0) return cache;
  return *rank_caches_.at(&cache).at(rank - 1);
}

StepLogits ParallelCausalLM::RunLocalRanks(const ForwardBatch& batch, const std::vector<KvCache*>& caches) {
  const int local = static_cast<int>(ranks_.size());
  const int threads_each = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local);
  std::vector<std::thread> workers;
  for (int r = 1; r < local; ++r) {
    workers.emplace_back([&, r] {
      omp_set_num_threads(threads_each);
      ranks_[r]->ForwardKeepLogits(batch, *caches[r]);  // only local rank 0's logits are used
    });
  }
  StepLogits logits = ranks_[0]->ForwardKeepLogits(batch, *caches[0]);
  for (std::thread& t : workers) t.join();
  return logits;
}

std::optional<kernels::DeviceMemory> ParallelCausalLM::device_memory() {
  std::optional<kernels::DeviceMemory> least;
  for (auto& rank : ranks_) {
    const std::optional<kernels::DeviceMemory> m = rank->device_memory();
    if (!m) return std::nullopt;
    if (!least) least = m;
    least->free_bytes = std::min(least->free_bytes, m->free_bytes);
    least->total_bytes = std::min(least->total_bytes, m->total_bytes);
  }
  return least;
}

void ParallelCausalLM::SendPlan(const ForwardBatch& batch, const KvCache& cache) {
  auto [it, added] = cache_ids_.try_emplace(&cache, static_cast<std::uint32_t>(cache_ids_.size()));
  StepPlan plan{it->second, cache.num_pages(), cache.page_size(), batch};
  try {
    link_->SendToFollowers(comm::ControlMessage::kStepPlan, EncodeStepPlan(plan));
  } catch (const Error& e) {
    // The step loop has no caller to report to, and the world cannot run without the node.
    Log(LogLevel::kError, "node 0: ", e.what(), "; exiting");
    std::fflush(stderr);
    std::_Exit(1);
  }
}

Buffer ParallelCausalLM::Forward(const ForwardBatch& batch, KvCache& cache) {
  return HostLogits(ForwardKeepLogits(batch, cache));
}

StepLogits ParallelCausalLM::ForwardKeepLogits(const ForwardBatch& batch, KvCache& cache) {
  FISSION_CHECK(world_->first_local_rank() == 0, "Forward runs on the node of rank 0; followers run RunFollower");
  std::vector<KvCache*> all = LocalCaches(cache);
  if (link_) SendPlan(batch, cache);
  return RunLocalRanks(batch, all);
}

std::vector<KvCache*> ParallelCausalLM::LocalCaches(KvCache& cache) {
  auto& caches = rank_caches_[&cache];
  if (caches.size() + 1 != ranks_.size() ||
      (!caches.empty() && (caches[0]->num_pages() != cache.num_pages() || caches[0]->page_size() != cache.page_size()))) {
    caches.clear();
    for (std::size_t r = 1; r < ranks_.size(); ++r)
      caches.push_back(
          std::make_unique<KvCache>(KvLayout(), cache.num_pages(), cache.page_size(), ranks_[r]->kv_allocator()));
  }
  std::vector<KvCache*> all = {&cache};
  for (auto& c : caches) all.push_back(c.get());
  return all;
}

void ParallelCausalLM::CaptureDecodeGraphs(KvCache& cache) {
  if (link_) return;
  const std::vector<KvCache*> caches = LocalCaches(cache);
  std::vector<std::thread> workers;
  for (std::size_t r = 1; r < ranks_.size(); ++r)
    workers.emplace_back([&, r] { ranks_[r]->CaptureDecodeGraphs(*caches[r]); });
  ranks_[0]->CaptureDecodeGraphs(*caches[0]);
  for (std::thread& t : workers) t.join();
}

std::vector<KvCache*> ParallelCausalLM::FollowerCaches(std::uint32_t cache_id, std::int64_t num_pages,
                                                       std::int64_t page_size) {
  auto& caches = follower_caches_[cache_id];
  if (caches.empty() || caches[0]->num_pages() != num_pages || caches[0]->page_size() != page_size) {
    caches.clear();
    for (auto& rank : ranks_)
      caches.push_back(std::make_unique<KvCache>(KvLayout(), num_pages, page_size, rank->kv_allocator()));
  }
  std::vector<KvCache*> out;
  for (auto& c : caches) out.push_back(c.get());
  return out;
}

void ParallelCausalLM::RunFollower() {
  FISSION_CHECK(follower(), "RunFollower runs on a follower node");
  const std::string who = StrCat("node ", link_->node_rank());
  for (std::int64_t step = 0;; ++step) {
    const std::optional<comm::Socket::Frame> frame = link_->ReceiveFromLeader();
    if (!frame)
      Fail(who, ": the leader (node 0) closed the connection without a shutdown message (it exited or failed) after ",
           step, " steps");
    if (frame->type == static_cast<std::uint8_t>(comm::ControlMessage::kShutdown)) {
      if (!frame->payload.empty()) Fail(who, ": ", frame->payload, " after ", step, " steps");
      Log(LogLevel::kInfo, who, ": the leader shut down after ", step, " steps; exiting");
      return;
    }
    if (frame->type != static_cast<std::uint8_t>(comm::ControlMessage::kStepPlan))
      Fail(who, ": the leader sent message type ", int{frame->type}, " where a step plan was due");
    const StepPlan plan = DecodeStepPlan(frame->payload);
    const ForwardBatch& b = plan.batch;
    for (std::int32_t i = 0; i < b.num_tokens(); ++i)
      if (b.token_ids[i] >= vocab_size())
        Fail(who, ": step plan ", step, " has token id ", b.token_ids[i], " outside the vocabulary (", vocab_size(),
             ")");
    RunLocalRanks(b, FollowerCaches(plan.cache_id, plan.num_pages, plan.page_size));
  }
}

void RunFollower(CausalLM& model) {
  auto* parallel = dynamic_cast<ParallelCausalLM*>(&model);
  FISSION_CHECK(parallel != nullptr && parallel->follower(), "RunFollower needs a follower node's model");
  parallel->RunFollower();
}

}  // namespace fission::model
