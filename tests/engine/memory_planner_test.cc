// How the engine sizes a model's declared memory (engine/memory_planner.h, model/memory_spec.h):
// bytes per page over paged classes of several tokens per entry and typed fields, state slots
// beside the pages, the token and byte budgets, and the errors that say what is wrong.
#include "engine/memory_planner.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/state_pool.h"

namespace fission::engine {
namespace {

using model::CacheClass;
using model::CacheKind;
using model::MemoryPlan;
using model::MemorySpec;

// A DSA-like latent (bf16, with an fp8 index key riding the same pages), a compressed class of
// one entry per 4 tokens (an e4m3 part, its fp32 scale and a bf16 part) and a per-request ring.
MemorySpec HybridSpec() {
  CacheClass latent{"latent", CacheKind::kPaged, 1, 0, 2, {{"latent", DType::kBF16, 576}}};
  CacheClass keys{"index_keys", CacheKind::kPaged, 1, 0, 2, {{"key", DType::kF8E4M3, 128}}};
  CacheClass compressed{"compressed", CacheKind::kPaged, 4, 0, 2,
                        {{"nope", DType::kF8E4M3, 448}, {"scale", DType::kF32, 1}, {"rope", DType::kBF16, 64}}};
  CacheClass ring{"window", CacheKind::kPerRequest, 1, 128, 2, {{"kv", DType::kBF16, 512}}};
  return {{latent, keys, compressed, ring}};
}

TEST(MemorySpecTest, EntriesPagesAndSlots) {
  const MemorySpec spec = HybridSpec();
  const CacheClass& c = spec.classes[2];
  EXPECT_EQ(c.entry_bytes(), 448u + 4u + 128u);
  EXPECT_EQ(c.field_offset("scale"), 448u);
  EXPECT_EQ(c.field_offset("rope"), 452u);
  EXPECT_THROW(c.field_offset("missing"), Error);
  EXPECT_EQ(c.entries_per_page(16), 4);
  EXPECT_EQ(c.entries_per_page(2), 1);  // an entry wider than a page lives in its first page
  // Two layers each: 16 tokens of 1152 + 128 bytes, and 4 entries of 580 bytes.
  EXPECT_EQ(spec.page_bytes(16), 2 * (16 * 1152 + 16 * 128 + 4 * 580));
  EXPECT_EQ(spec.state_slot_bytes(), 2 * 128 * 1024);
  EXPECT_TRUE(spec.has_per_request_state());
  EXPECT_EQ(spec.index_of("compressed"), 2);
  // Position 13 of a sequence whose pages are {7, 3}: its entry starts at 12, in page 3 at row 12.
  const std::vector<std::int32_t> table = {7, 3};
  EXPECT_EQ(model::PagedEntrySlot(c, table, 8, 13), 3 * 2 + 1);
  EXPECT_EQ(model::PagedEntrySlot(spec.classes[0], table, 8, 13), 3 * 8 + 5);
  CacheClass wide{"wide", CacheKind::kPaged, 128, 0, 1, {{"x", DType::kF32, 4}}};
  const std::vector<std::int32_t> pages = {9, 4, 6, 2, 5, 1, 8, 0, 3};  // 16 tokens a page
  EXPECT_EQ(model::PagedEntrySlot(wide, pages, 16, 130), 3);  // entry 1 starts at 128: page 8 = 3
}

TEST(MemorySpecTest, ValidationNamesEveryProblem) {
  MemorySpec spec = HybridSpec();
  spec.classes[2].tokens_per_entry = 3;
  spec.classes[3].entries_per_request = 0;
  spec.classes[1].name = "latent";
  try {
    spec.Validate(16);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'compressed' covers 3 tokens per entry"), std::string::npos) << what;
    EXPECT_NE(what.find("'window' has 0 entries per request"), std::string::npos) << what;
    EXPECT_NE(what.find("'latent' is declared twice"), std::string::npos) << what;
  }
}

TEST(MemoryPlannerTest, HostMemoryUsesTheTokenBudget) {
  EngineConfig c;
  c.page_size = 16;
  c.max_total_tokens = 1000;
  c.max_running_requests = 7;
  const MemoryPlan plan = PlanMemory(HybridSpec(), c, std::nullopt);
  EXPECT_EQ(plan.num_pages, 1000 / 16);
  EXPECT_EQ(plan.num_state_slots, 7);  // one per running request
  MemorySpec stateless = HybridSpec();
  stateless.classes.pop_back();
  EXPECT_EQ(PlanMemory(stateless, c, std::nullopt).num_state_slots, 0);
  c.max_total_tokens = 15;
  EXPECT_THROW(PlanMemory(HybridSpec(), c, std::nullopt), Error);
}

TEST(MemoryPlannerTest, AByteBudgetIsSplitBetweenStateSlotsAndPages) {
  const MemorySpec spec = HybridSpec();
  EngineConfig c;
  c.page_size = 16;
  c.max_running_requests = 4;
  c.kv_cache_bytes = 100 * spec.page_bytes(16) + 4 * spec.state_slot_bytes();
  MemoryPlan plan = PlanMemory(spec, c, std::nullopt);
  EXPECT_EQ(plan.num_state_slots, 4);
  EXPECT_EQ(plan.num_pages, 100);
  // Slots never take more than half the budget.
  c.max_running_requests = 1000;
  plan = PlanMemory(spec, c, std::nullopt);
  EXPECT_EQ(plan.num_state_slots, c.kv_cache_bytes / 2 / spec.state_slot_bytes());
  EXPECT_EQ(plan.num_pages, (c.kv_cache_bytes - plan.num_state_slots * spec.state_slot_bytes()) / spec.page_bytes(16));
  EXPECT_NE(DescribeMemoryPlan(spec, plan).find("state slots"), std::string::npos);
  c.kv_cache_bytes = spec.state_slot_bytes();  // not even two slots
  EXPECT_THROW(PlanMemory(spec, c, std::nullopt), Error);
}

TEST(MemoryPlannerTest, DeviceMemoryAfterTheFractionCappedByMaxTotalTokens) {
  MemorySpec spec = HybridSpec();
  spec.classes.pop_back();
  EngineConfig c;
  c.page_size = 16;
  c.mem_fraction_static = 0.5;
  const kernels::DeviceMemory device{3 << 20, 4 << 20};  // 1 MiB left after reserving half of 4 MiB
  EXPECT_EQ(PlanMemory(spec, c, device).num_pages, (1 << 20) / spec.page_bytes(16));
  c.max_total_tokens = 64;
  EXPECT_EQ(PlanMemory(spec, c, device).num_pages, 4);
}

TEST(StatePoolTest, ReservesAndFrees) {
  StatePool pool(2);
  const std::int32_t a = pool.Reserve(), b = pool.Reserve();
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.Reserve(), -1);
  EXPECT_EQ(pool.num_free(), 0);
  pool.Free(a);
  EXPECT_FALSE(pool.used(a));
  EXPECT_EQ(pool.Reserve(), a);
  EXPECT_DEATH(pool.Free(7), "");
}

}  // namespace
}  // namespace fission::engine
