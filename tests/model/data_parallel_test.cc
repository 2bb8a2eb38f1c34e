// Data-parallel attention and expert parallelism on the CPU (ranks as threads, the local
// communicator): every layout of tp {2, 4} x dp {1, 2, 4} x ep {1, 2, 4} x cp {1, 2} equals one
// rank, step by step, with DP groups of uneven and empty work.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "comm/communicator.h"
#include "io/model_config.h"
#include "model/expert_dispatch.h"
#include "model/runtime/model_loader.h"
#include "model/runtime/parallel_model.h"
#include "model/step_runner_testlib.h"
#include "model/token_layout.h"

namespace fission::model {
namespace {

TEST(DataParallelLayout, PlacesRanksAsSglangDoes) {
  // tp 8, dp 2, cp 2: attention-TP groups of 2; rank r = (dp · 2 + cp) · 2 + attn_tp.
  const comm::Layout l = comm::MakeLayout(comm::LayoutSizes{8, 2, 2, 4});
  EXPECT_EQ(l.ranks[5].dp_rank, 1);
  EXPECT_EQ(l.ranks[5].cp_rank, 0);
  EXPECT_EQ(l.ranks[5].attn_tp_rank, 1);
  EXPECT_EQ(l.ranks[5].ep_rank, 2);  // 8 ranks in 4 EP ranks of 2
  EXPECT_EQ(l.attn_tp_groups[3], (std::vector<int>{6, 7}));
  EXPECT_EQ(l.cp_groups[2], (std::vector<int>{4, 6}));
  ASSERT_EQ(l.dp_groups.size(), 4u);
  EXPECT_EQ(l.dp_groups[1], (std::vector<int>{1, 5}));
  EXPECT_TRUE(comm::MakeLayout(comm::LayoutSizes{4, 2}).dp_groups.empty());
}

std::string LayoutError(comm::LayoutSizes sizes) {
  try {
    comm::ValidateLayout(sizes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DataParallelLayout, BadSizesNameTheFlags) {
  EXPECT_EQ(LayoutError({4, 1, 3, 1}), "--dp-size (3) must divide --tp-size (4)");
  EXPECT_NE(LayoutError({2, 2, 2, 1}).find("--dp-size (2) times --attn-cp-size (2) must divide --tp-size (2)"),
            std::string::npos);
  EXPECT_EQ(LayoutError({4, 1, 1, 8}), "--ep-size (8) must divide --tp-size (4)");
  EXPECT_EQ(LayoutError({4, 2, 2, 4}), "");
}

TEST(DataParallelLayout, ExpertsThatEpDoesNotDivideAreRefusedBeforeLoading) {
  LoadOptions options;
  options.tp_size = 4;
  options.ep_size = 4;
  options.json_model_override_args = R"({"n_routed_experts": 6, "n_group": 2, "topk_group": 2})";
  try {
    LoadCausalLM(FixtureModelDir("tiny-deepseek-v3"), options);
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--ep-size 4 must divide the routed experts"), std::string::npos) << e.what();
  }
  options = LoadOptions{};
  options.tp_size = 4;
  options.dp_size = 2;
  try {
    LoadCausalLM(FixtureModelDir("tiny-deepseek-v3"), options);
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without --enable-dp-attention"), std::string::npos) << e.what();
  }
}

TEST(ExpertDispatch, SendsEachPairToItsExpertsRanksInExpertOrder) {
  // 2 tokens, top-2, 8 experts over 2 EP ranks of 2 ranks each (moe_tp 2).
  const std::vector<std::int32_t> ids = {5, 1, 2, 3};
  const std::vector<float> w = {0.5f, 0.25f, 1.0f, 2.0f};
  const ExpertDispatch d = PlanExpertDispatch(ids, w, 2, 2, 8, 2, 2);
  // Token 0's expert 1 and both of token 1's go to EP rank 0 (world ranks 0, 1); expert 5 to 2, 3.
  EXPECT_EQ(d.send_rows, (std::vector<std::int64_t>{3, 3, 1, 1}));
  EXPECT_EQ(d.send_index, (std::vector<std::int32_t>{0, 1, 1, 0, 1, 1, 0, 0}));
  // Rank 0 gets (expert 1, 0.25), (2, 1.0), (3, 2.0); rank 2 gets expert 5 as local expert 1.
  EXPECT_EQ(d.send_meta[0], 1.0f);
  EXPECT_EQ(d.send_meta[1], 0.25f);
  EXPECT_EQ(d.send_meta[12], 1.0f);
  EXPECT_EQ(d.send_meta[13], 0.5f);
  // Token 0: expert 1 (rows 0 and 3), then expert 5 (rows 6 and 7).
  ASSERT_EQ(d.combine.size(), 4u);
  EXPECT_EQ(d.combine[0][0], 0);
  EXPECT_EQ(d.combine[1][0], 3);
  EXPECT_EQ(d.combine[2][0], 6);
  EXPECT_EQ(d.combine[3][0], 7);
  EXPECT_EQ(d.combine[2][1], 2);  // token 1's expert 3 on rank 0
}

TEST(AllToAllV, LocalExchangeDeliversEveryChunk) {
  comm::LocalWorld world(comm::LayoutSizes{3});
  // Rank r sends (r + 1) · (p + 1) values to rank p, each value 100 r + p.
  std::vector<std::vector<float>> got(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::vector<std::int64_t> send(3), recv(3);
      std::vector<float> in;
      for (int p = 0; p < 3; ++p) {
        send[p] = (r + 1) * (p + 1);
        recv[p] = (p + 1) * (r + 1);
        in.insert(in.end(), send[p], 100.0f * r + p);
      }
      got[r].assign(std::accumulate(recv.begin(), recv.end(), std::int64_t{0}), -1.0f);
      Tensor tin{in.data(), DType::kF32, Shape{static_cast<std::int64_t>(in.size())}};
      Tensor tout{got[r].data(), DType::kF32, Shape{static_cast<std::int64_t>(got[r].size())}};
      world.Groups(r).world->AllToAllV(tin, send, tout, recv);
    });
  }
  for (auto& t : threads) t.join();
  // Rank 1 receives 2 values from 0, 4 from 1, 6 from 2.
  std::vector<float> want;
  for (int p = 0; p < 3; ++p) want.insert(want.end(), 2 * (p + 1), 100.0f * p + 1);
  EXPECT_EQ(got[1], want);
}

struct DpLayout {
  const char* fixture;
  int tp, dp, ep, cp;
  bool indexer_split = false;  // --dsa-indexer-query-split (DSA checkpoints)
};

// A sequence of the scenario: its prompt, its DP group, the step it arrives at.
struct ScenarioSeq {
  std::vector<std::int32_t> tokens;
  std::int32_t prompt = 0, computed = 0, generated = 0;
  int group = 0, start = 0;
  std::vector<std::int32_t> pages;
};

constexpr std::int64_t kPageSize = 4;
constexpr std::int32_t kPagesPerGroup = 32;
constexpr std::int32_t kChunk = 8;
constexpr std::int32_t kGenerate = 4;

// Group g's batch of this step: every started sequence gets its next prompt chunk or its decode
// token. Pages are the group's own (`page_offset` shifts them into the reference's one pool).
ForwardBatch GroupBatch(std::vector<ScenarioSeq>& seqs, const std::vector<int>& members, int step,
                        std::vector<std::int32_t>* next_page, std::int32_t page_offset, std::vector<int>* sampled) {
  ForwardBatch b;
  for (int k : members) {
    ScenarioSeq& s = seqs[k];
    if (step < s.start || s.generated >= kGenerate) continue;
    const std::int32_t len = s.computed < s.prompt ? std::min(kChunk, s.prompt - s.computed) : 1;
    SequenceSlice slice;
    slice.query_start = b.num_tokens();
    slice.query_len = len;
    slice.context_len = s.computed;
    while (static_cast<std::int64_t>(s.pages.size()) * kPageSize < s.computed + len)
      s.pages.push_back((*next_page)[s.group]++);
    for (std::int32_t i = 0; i < len; ++i) {
      const std::int32_t pos = s.computed + i;
      b.token_ids.push_back(s.tokens[pos]);
      b.positions.push_back(pos);
      b.kv_slots.push_back((s.pages[pos / kPageSize] + page_offset) * kPageSize + pos % kPageSize);
    }
    for (std::int32_t p : s.pages) slice.block_table.push_back(p + page_offset);
    b.sequences.push_back(slice);
    if (s.computed + len >= s.prompt) {
      b.logits_indices.push_back(b.num_tokens() - 1);
      sampled->push_back(k);
    }
  }
  return b;
}

class DataParallelLayouts : public ::testing::TestWithParam<DpLayout> {};

// Five sequences of odd prompt lengths arrive over the first steps into DP groups k % dp (so
// groups have uneven work and are empty at times), prefill in chunks of 8 (split over the CP
// group), decode 4 greedy tokens; steps mix prefill and decode. Every step's logits equal the
// single-rank model's on the same sequences within 1e-5, the greedy tokens agree, and each step's
// expert load is its tokens times top-k per MoE layer.
TEST_P(DataParallelLayouts, EqualSingleRank) {
  const DpLayout layout = GetParam();
  const std::string dir = FixtureModelDir(layout.fixture);
  auto single = LoadCausalLM(dir);
  LoadOptions options;
  options.tp_size = layout.tp;
  options.dp_size = layout.dp;
  options.enable_dp_attention = layout.dp > 1;
  options.ep_size = layout.ep;
  options.attn_cp_size = layout.cp;
  options.pcp_min_tokens = 2;
  options.indexer_query_split = layout.indexer_split;
  auto parallel = LoadCausalLM(dir, options);
  ASSERT_EQ(parallel->dp_size(), layout.dp);
  const int dp = layout.dp;
  MemoryPlan plan;
  plan.page_size = kPageSize;
  plan.num_pages = kPagesPerGroup;
  parallel->AllocateMemory(plan);
  MemoryPlan whole = plan;
  whole.num_pages = kPagesPerGroup * dp;  // the reference holds every group's pages side by side
  single->AllocateMemory(whole);

  std::vector<ScenarioSeq> seqs;
  // The 41-token prompt outgrows the DSA checkpoints' index_topk (32): their indexer selects.
  const std::int32_t prompts[] = {9, 41, 6, 11, 7};
  for (int k = 0; k < 5; ++k) {
    ScenarioSeq s;
    s.tokens = Tokens(prompts[k], 40 + k, single->vocab_size());
    s.prompt = prompts[k];
    s.group = k % dp;
    s.start = k;
    seqs.push_back(s);
  }
  std::vector<std::vector<int>> members(dp);
  for (int k = 0; k < 5; ++k) members[seqs[k].group].push_back(k);
  std::vector<std::int32_t> next_page(dp, 0);
  const io::ModelConfig config = io::LoadModelConfig(dir);
  std::int64_t moe_layers = 0;
  for (std::int64_t layer = 0; layer < config.num_hidden_layers; ++layer) moe_layers += config.IsMoeLayer(layer);
  auto load_sum = [&] {
    const std::vector<std::int64_t> load = parallel->ExpertLoad();
    return std::accumulate(load.begin(), load.end(), std::int64_t{0});
  };
  std::int64_t tokens = 0;
  int empty_group_steps = 0;
  double worst = 0.0;
  for (int step = 0; step < 14; ++step) {
    std::vector<ForwardBatch> batches(dp), reference(dp);
    std::vector<std::vector<int>> sampled(dp);
    const std::int64_t tokens_before = tokens, load_before = load_sum();
    for (int g = 0; g < dp; ++g) {
      std::vector<std::int32_t> reference_pages = next_page;
      std::vector<ScenarioSeq> before = seqs;
      std::vector<int> ignored;
      batches[g] = GroupBatch(seqs, members[g], step, &next_page, 0, &sampled[g]);
      reference[g] = GroupBatch(before, members[g], step, &reference_pages, g * kPagesPerGroup, &ignored);
      tokens += batches[g].num_tokens();
      empty_group_steps += batches[g].token_ids.empty();
    }
    std::vector<StepLogits> got = parallel->ForwardGroups(batches);
    // This step's expert load: its tokens (empty groups count none) times top-k per MoE layer.
    EXPECT_EQ(load_sum() - load_before, (tokens - tokens_before) * config.num_experts_per_tok * moe_layers)
        << "step " << step;
    ASSERT_EQ(got.size(), static_cast<std::size_t>(dp));
    for (int g = 0; g < dp; ++g) {
      if (batches[g].token_ids.empty()) continue;
      const Buffer want = ForwardToHost(*single, reference[g]);
      const Buffer have = HostLogits(std::move(got[g]));
      const std::int64_t vocab = single->vocab_size();
      ASSERT_EQ(have.tensor().numel(), want.tensor().numel());
      for (std::size_t i = 0; i < sampled[g].size(); ++i) {
        const float* w = want.tensor().ptr<float>() + i * vocab;
        std::vector<float> row(have.tensor().ptr<float>() + i * vocab, have.tensor().ptr<float>() + (i + 1) * vocab);
        const double err = RelativeL2(row, w, vocab);
        worst = std::max(worst, err);
        ASSERT_LE(err, 1e-5) << "step " << step << " group " << g << " row " << i;
        const std::vector<float> want_row(w, w + vocab);
        EXPECT_EQ(Argmax(row), Argmax(want_row)) << "step " << step << " group " << g;
        seqs[sampled[g][i]].tokens.push_back(Argmax(want_row));
      }
    }
    // Advance what each sequence computed this step.
    for (int g = 0; g < dp; ++g) {
      for (int k : members[g]) {
        ScenarioSeq& s = seqs[k];
        if (step < s.start || s.generated >= kGenerate) continue;
        const std::int32_t len = s.computed < s.prompt ? std::min(kChunk, s.prompt - s.computed) : 1;
        if (s.computed >= s.prompt) ++s.generated;
        s.computed += len;
        if (s.computed == s.prompt) ++s.generated;  // the prompt's last chunk sampled the first token
      }
    }
  }
  for (const ScenarioSeq& s : seqs) EXPECT_EQ(s.generated, kGenerate);
  if (dp > 1) {
    EXPECT_GT(empty_group_steps, 0);
  }
  // Expert load: every token of every step once per MoE layer and routed expert, over ep ranks.
  const std::vector<std::int64_t> load = parallel->ExpertLoad();
  ASSERT_EQ(load.size(), static_cast<std::size_t>(layout.ep));
  EXPECT_EQ(std::accumulate(load.begin(), load.end(), std::int64_t{0}),
            tokens * config.num_experts_per_tok * moe_layers);
  if (layout.ep > 1) {
    for (std::int64_t l : load) EXPECT_GT(l, 0);
  }
  std::printf("%s tp %d dp %d ep %d cp %d: worst relative L2 %.3g, load", layout.fixture, layout.tp, layout.dp,
              layout.ep, layout.cp, worst);
  for (std::int64_t l : load) std::printf(" %lld", static_cast<long long>(l));
  std::printf("\n");
}

std::vector<DpLayout> AllDpLayouts() {
  std::vector<DpLayout> layouts;
  // The DeepSeek-V3 checkpoints (fp32, FP8 experts) and the DSA ones (DeepSeek-V3.2, GLM-5 with
  // IndexShare, GLM's routing).
  for (const char* fixture :
       {"tiny-deepseek-v3", "tiny-deepseek-v3-fp8", "tiny-deepseek-v32", "tiny-glm-dsa", "tiny-glm-routing"})
    for (int tp : {2, 4})
      for (int dp : {1, 2, 4})
        for (int ep : {1, 2, 4})
          for (int cp : {1, 2})
            if (tp % (dp * cp) == 0 && tp % ep == 0 && !(dp == 1 && ep == 1) &&
                // The FP8 checkpoint has two attention heads: at most two attention-TP ranks.
                (std::string(fixture) != "tiny-deepseek-v3-fp8" || tp / (dp * cp) <= 2))
              layouts.push_back({fixture, tp, dp, ep, cp});
  // DSA's indexer queries split over each group's attention-TP ranks, with DP attention and EP.
  for (const char* fixture : {"tiny-deepseek-v32", "tiny-glm-dsa"})
    for (DpLayout l : {DpLayout{fixture, 4, 2, 4, 1}, DpLayout{fixture, 4, 1, 2, 1}, DpLayout{fixture, 4, 2, 2, 1}}) {
      l.indexer_split = true;
      layouts.push_back(l);
    }
  return layouts;
}

INSTANTIATE_TEST_SUITE_P(CpuLocal, DataParallelLayouts, ::testing::ValuesIn(AllDpLayouts()), [](const auto& info) {
  std::string name = StrCat(info.param.fixture, "_tp", info.param.tp, "_dp", info.param.dp, "_ep", info.param.ep,
                            "_cp", info.param.cp, info.param.indexer_split ? "_indexer_split" : "");
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
});

}  // namespace
}  // namespace fission::model
