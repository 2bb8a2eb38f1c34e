// Data-parallel attention on the engine's side: each DP group of the model (CausalLM::dp_size)
// has its own page pool, state pool, prefix cache and scheduler, and a request is placed in one
// group for its whole life (all its completions too, so they share the group's prefix cache).
// The balancer is SGLang's --load-balance-method: round_robin (the default) or shortest_queue.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/page_pool.h"
#include "engine/prefix_cache.h"
#include "engine/scheduler.h"
#include "engine/state_pool.h"
#include "model/memory_spec.h"

namespace fission::engine {

struct DpGroup {
  std::unique_ptr<PagePool> pool;
  std::unique_ptr<StatePool> states;        // a model with per-request memory
  std::unique_ptr<PrefixCache> prefix_cache;  // null: --disable-radix-cache or per-request memory
  std::unique_ptr<Scheduler> scheduler;

  // Sequences the group runs or queues: what shortest_queue compares.
  std::size_t queue_length() const { return scheduler->running().size() + scheduler->num_waiting(); }
};

// `count` groups over the memory of `plan` each (the model allocated every group's).
std::vector<DpGroup> MakeDpGroups(int count, const model::MemoryPlan& plan, const SchedulerConfig& scheduler,
                                  bool prefix_cache);

// Picks the group of each new request.
class LoadBalancer {
 public:
  // `method`: "round_robin" or "shortest_queue" (an Error naming --load-balance-method otherwise).
  explicit LoadBalancer(const std::string& method);
  int Pick(const std::vector<DpGroup>& groups);

 private:
  bool shortest_queue_ = false;
  int next_ = 0;
};

// Checks a --load-balance-method value.
void ValidateLoadBalanceMethod(const std::string& method);

}  // namespace fission::engine
