#include "engine/data_parallel.h"

#include "base/error.h"

namespace fission::engine {

std::vector<DpGroup> MakeDpGroups(int count, const model::MemoryPlan& plan, const SchedulerConfig& scheduler,
                                  bool prefix_cache) {
  std::vector<DpGroup> groups(count);
  for (DpGroup& g : groups) {
    g.pool = std::make_unique<PagePool>(static_cast<std::int32_t>(plan.num_pages));
    if (plan.num_state_slots > 0) g.states = std::make_unique<StatePool>(static_cast<std::int32_t>(plan.num_state_slots));
    // A prefix hit would need the state after the prefix, which nothing keeps yet.
    if (prefix_cache && g.states == nullptr) g.prefix_cache = std::make_unique<PrefixCache>(g.pool.get(), scheduler.page_size);
    g.scheduler = std::make_unique<Scheduler>(scheduler, g.pool.get(), g.prefix_cache.get(), g.states.get());
  }
  return groups;
}

void ValidateLoadBalanceMethod(const std::string& method) {
  if (method != "round_robin" && method != "shortest_queue")
    Fail("--load-balance-method '", method, "' is not supported (supported: round_robin, shortest_queue)");
}

LoadBalancer::LoadBalancer(const std::string& method) {
  ValidateLoadBalanceMethod(method);
  shortest_queue_ = method == "shortest_queue";
}

int LoadBalancer::Pick(const std::vector<DpGroup>& groups) {
  const int n = static_cast<int>(groups.size());
  if (!shortest_queue_) {
    const int g = next_;
    next_ = (next_ + 1) % n;
    return g;
  }
  int best = 0;  // the fewest sequences running or waiting; ties to the lowest group
  for (int g = 1; g < n; ++g)
    if (groups[g].queue_length() < groups[best].queue_length()) best = g;
  return best;
}

}  // namespace fission::engine
