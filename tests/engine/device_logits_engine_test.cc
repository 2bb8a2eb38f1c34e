// The engine's route for logits that stay where the model computed them (CausalLM::Forward
// returning them with a backend): every row — samples of every kind and prompt logprobs — goes
// through Backend::Sample. With the CPU backend standing in for the device, the outputs must equal
// the host route's exactly, so any mix-up of rows, parameters or results shows.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"
#include "kernels/backend.h"

namespace fission::engine {
namespace {

using testing::Collected;
using testing::Collector;
using testing::FakeCausalLM;
using testing::FakeDetokenizer;
using testing::MakePrompt;

// FakeCausalLM whose logits are reported as living in a backend's memory.
class BackendLogitsModel : public FakeCausalLM {
 public:
  model::StepLogits Forward(const model::ForwardBatch& batch) override {
    ++device_steps_;
    return model::StepLogits(model::HostLogits(FakeCausalLM::Forward(batch)), backend_.get());
  }
  int device_steps() const { return device_steps_; }

 private:
  std::unique_ptr<kernels::Backend> backend_ = kernels::MakeCpuBackend();
  int device_steps_ = 0;
};

std::vector<SamplingParams> Mix() {
  std::vector<SamplingParams> all;
  for (int i = 0; i < 9; ++i) {
    SamplingParams p;
    p.max_new_tokens = 12;
    p.ignore_eos = i % 2 == 0;
    p.seed = 1000 + i;
    p.temperature = i == 0 ? 0.0 : 0.8;
    if (i == 1) p.top_k = 5;
    if (i == 2) p.top_p = 0.6;
    if (i == 3) p.min_p = 0.2;
    if (i == 4) p.repetition_penalty = 1.5;
    if (i == 5) {
      p.frequency_penalty = 0.5;
      p.presence_penalty = 0.3;
    }
    if (i == 6) {
      p.min_new_tokens = 4;
      p.stop_token_ids = {7, 8};
    }
    if (i == 7) p.n = 3;
    if (i % 3 == 0) {
      p.logprobs = true;
      p.top_logprobs = i % 4 + 1;
    }
    if (i == 8) {
      p.prompt_logprobs = true;
      p.top_logprobs = 2;
    }
    all.push_back(p);
  }
  return all;
}

std::vector<std::vector<Collected>> RunAll(FakeCausalLM& model) {
  EngineConfig c;
  c.page_size = 4;
  c.max_total_tokens = 4096;
  c.chunked_prefill_size = 16;  // prompt logprobs over several chunks
  c.eos_token_ids = {9};
  FakeDetokenizer detok;
  Engine engine(&model, c, &detok);
  Collector collector;
  std::vector<std::int64_t> ids;
  const std::vector<SamplingParams> params = Mix();
  for (std::size_t i = 0; i < params.size(); ++i)
    ids.push_back(collector.Submit(engine, MakePrompt(50 + i, 10 + 5 * i, model.vocab_size()), params[i]));
  engine.RunUntilIdle();
  EXPECT_EQ(engine.CheckPageAccounting(), "");
  std::vector<std::vector<Collected>> out;
  for (std::int64_t id : ids) out.push_back(collector.results(id));
  return out;
}

void ExpectSameLogprobs(const std::vector<TokenLogprob>& a, const std::vector<TokenLogprob>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].token_id, b[i].token_id) << what << " " << i;
    EXPECT_EQ(a[i].logprob, b[i].logprob) << what << " " << i;
    ASSERT_EQ(a[i].top.size(), b[i].top.size()) << what << " " << i;
    for (std::size_t j = 0; j < a[i].top.size(); ++j) {
      EXPECT_EQ(a[i].top[j].token_id, b[i].top[j].token_id) << what << " " << i << " top " << j;
      EXPECT_EQ(a[i].top[j].logprob, b[i].top[j].logprob) << what << " " << i << " top " << j;
    }
  }
}

TEST(DeviceLogitsEngineTest, BackendRouteEqualsHostRouteForEveryParameter) {
  FakeCausalLM host_model;
  BackendLogitsModel device_model;
  const auto host = RunAll(host_model);
  const auto device = RunAll(device_model);
  EXPECT_GT(device_model.device_steps(), 0);
  ASSERT_EQ(host.size(), device.size());
  for (std::size_t r = 0; r < host.size(); ++r) {
    ASSERT_EQ(host[r].size(), device[r].size());
    for (std::size_t i = 0; i < host[r].size(); ++i) {
      const std::string what = "request " + std::to_string(r) + " completion " + std::to_string(i);
      EXPECT_EQ(host[r][i].tokens, device[r][i].tokens) << what;
      EXPECT_FALSE(host[r][i].tokens.empty()) << what;
      EXPECT_EQ(host[r][i].finish_reason, device[r][i].finish_reason) << what;
      ExpectSameLogprobs(host[r][i].logprobs, device[r][i].logprobs, what + " logprobs");
      ExpectSameLogprobs(host[r][i].prompt_logprobs, device[r][i].prompt_logprobs, what + " prompt logprobs");
    }
  }
  EXPECT_FALSE(host[8][0].prompt_logprobs.empty());
  EXPECT_FALSE(host[0][0].logprobs.empty());
}

}  // namespace
}  // namespace fission::engine
