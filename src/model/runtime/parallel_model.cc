#include "model/runtime/parallel_model.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <thread>

#include "base/log.h"
#include "model/runtime/follower_step.h"
#include "model/token_layout.h"

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

void ParallelCausalLM::OnEveryRank(const std::function<void(int)>& fn) {
  const int local = static_cast<int>(ranks_.size());
  const int threads_each = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local);
  std::vector<std::thread> workers;
  for (int r = 1; r < local; ++r) {
    workers.emplace_back([&, r] {
      omp_set_num_threads(threads_each);
      fn(r);
    });
  }
  fn(0);
  for (std::thread& t : workers) t.join();
}

StepLogits ParallelCausalLM::RunLocalRanks(const ForwardBatch& batch) {
  FISSION_CHECK(dp_size() == 1, "with data-parallel attention every step is ForwardGroups");
  StepLogits logits;
  OnEveryRank([&](int r) {
    StepLogits mine = ranks_[r]->Forward(batch);
    if (r == 0) logits = std::move(mine);  // only local rank 0's logits are used
  });
  return logits;
}

std::vector<StepLogits> ParallelCausalLM::ForwardGroups(const std::vector<ForwardBatch>& batches) {
  const int groups = dp_size();
  if (groups == 1) return CausalLM::ForwardGroups(batches);
  FISSION_CHECK(static_cast<int>(batches.size()) == groups, batches.size(), " batches for ", groups, " DP groups");
  FISSION_CHECK(!link_ && memory_.has_value(), "ForwardGroups runs on one node after AllocateMemory");
  // Each group's batch, told every group's shape; an empty group runs the empty step.
  std::vector<ForwardBatch> runs(groups);
  std::vector<DpGroupShape> shapes(groups);
  for (int g = 0; g < groups; ++g) {
    const bool empty = batches[g].token_ids.empty();
    runs[g] = empty ? EmptyDataParallelStep() : batches[g];
    shapes[g] = empty ? DpGroupShape{} : DataParallelShape(batches[g]);
  }
  for (int g = 0; g < groups; ++g) {
    runs[g].dp_groups = shapes;
    runs[g].dp_rank = g;
  }
  std::vector<StepLogits> logits(groups);
  OnEveryRank([&](int r) {
    const comm::ProcessGroups& where = world_->Groups(r);
    StepLogits mine = ranks_[r]->Forward(runs[where.dp_rank]);
    // The group's first rank (CP and attention-TP rank 0) holds the logits every member computed.
    if (where.cp_rank == 0 && where.attn_tp_rank == 0 && shapes[where.dp_rank].num_tokens > 0)
      logits[where.dp_rank] = std::move(mine);
  });
  return logits;
}

void ParallelCausalLM::AllocateMemory(const MemoryPlan& plan) {
  for (auto& rank : ranks_) rank->AllocateMemory(plan);
  memory_ = plan;
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

void ParallelCausalLM::SendPlan(const ForwardBatch& batch) {
  const FollowerStep plan{*memory_, batch};
  try {
    link_->SendToFollowers(comm::ControlMessage::kFollowerStep, EncodeFollowerStep(plan));
  } catch (const Error& e) {
    // The step loop has no caller to report to, and the world cannot run without the node.
    Log(LogLevel::kError, "node 0: ", e.what(), "; exiting");
    std::fflush(stderr);
    std::_Exit(1);
  }
}

StepLogits ParallelCausalLM::Forward(const ForwardBatch& batch) {
  FISSION_CHECK(world_->first_local_rank() == 0, "Forward runs on the node of rank 0; followers run RunFollower");
  FISSION_CHECK(memory_.has_value(), "Forward before AllocateMemory");
  if (link_) SendPlan(batch);
  return RunLocalRanks(batch);
}

StepLogits ParallelCausalLM::ForwardDraft(const DraftBatch& batch) {
  FISSION_CHECK(!link_, "draft steps run on one node");
  FISSION_CHECK(memory_.has_value(), "ForwardDraft before AllocateMemory");
  StepLogits logits;
  OnEveryRank([&](int r) {
    StepLogits mine = ranks_[r]->ForwardDraft(batch);
    if (r == 0) logits = std::move(mine);
  });
  return logits;
}

void ParallelCausalLM::CaptureDecodeGraphs(std::int32_t draft_steps) {
  if (link_) return;
  OnEveryRank([&](int r) { ranks_[r]->CaptureDecodeGraphs(draft_steps); });
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
    if (frame->type != static_cast<std::uint8_t>(comm::ControlMessage::kFollowerStep))
      Fail(who, ": the leader sent message type ", int{frame->type}, " where a follower step was due");
    const FollowerStep plan = DecodeFollowerStep(frame->payload);
    const ForwardBatch& b = plan.batch;
    for (std::int32_t i = 0; i < b.num_tokens(); ++i)
      if (b.token_ids[i] >= vocab_size())
        Fail(who, ": follower step ", step, " has token id ", b.token_ids[i], " outside the vocabulary (", vocab_size(),
             ")");
    if (!memory_ || !(*memory_ == plan.memory)) AllocateMemory(plan.memory);
    RunLocalRanks(b);
  }
}

void RunFollower(CausalLM& model) {
  auto* parallel = dynamic_cast<ParallelCausalLM*>(&model);
  FISSION_CHECK(parallel != nullptr && parallel->follower(), "RunFollower needs a follower node's model");
  parallel->RunFollower();
}

}  // namespace fission::model
