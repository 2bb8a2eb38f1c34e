// DecodeGraphs' bookkeeping on the CPU: a backend that "captures" by keeping the step and
// "replays" by running it again on the CPU backend. The replayed step reads the graph's input
// block exactly as a CUDA replay's kernels read its device copy, so the layout, padding rows
// (KV slot -1), size choice, logits rows, memory changes and the fallback after a failed capture
// are all checked here against eager steps, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/arch/deepseek_v3.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"
#include "model/weights.h"

namespace fission::model {
namespace {

// A host block that starts as garbage, so a step that reads what it did not write shows.
class GarbageInputBlock final : public kernels::InputBlock {
 public:
  explicit GarbageInputBlock(std::size_t bytes) : bytes_(bytes, std::byte{0x5a}) {}
  std::span<std::byte> host() override { return bytes_; }
  void Upload(std::span<const kernels::InputCopy>) override {}

 private:
  std::vector<std::byte> bytes_;
};

class ReplayGraph final : public kernels::StepGraph {
 public:
  ReplayGraph(std::function<void()> step, int* replays) : step_(std::move(step)), replays_(replays) {}
  void Replay(std::span<const kernels::InputCopy>) override {
    ++*replays_;
    step_();
  }

 private:
  std::function<void()> step_;
  int* replays_;
};

// The CPU backend, plus graphs that replay by running the step again.
class ReplayingBackend final : public kernels::Backend {
 public:
  Device device() const override { return cpu_->device(); }
  Allocator* allocator() override { return cpu_->allocator(); }
  void Linear(const Tensor& x, const WeightView& w, const Tensor& out) override { cpu_->Linear(x, w, out); }
  void Embedding(const Tensor& t, std::span<const std::int32_t> ids, std::int64_t v0, const Tensor& out) override {
    cpu_->Embedding(t, ids, v0, out);
  }
  void Zero(const Tensor& x) override { cpu_->Zero(x); }
  void RmsNorm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) override { cpu_->RmsNorm(x, w, eps, out); }
  void LayerNorm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, const Tensor& out) override {
    cpu_->LayerNorm(x, w, b, eps, out);
  }
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) override { cpu_->Add(a, b, out); }
  void SiluMul(const Tensor& gu, const Tensor& out) override { cpu_->SiluMul(gu, out); }
  void Rope(const Tensor& x, std::int64_t off, std::int64_t dim, std::span<const std::int32_t> pos, const Tensor& f,
            float scaling, bool interleaved) override {
    cpu_->Rope(x, off, dim, pos, f, scaling, interleaved);
  }
  void WriteKv(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache) override {
    cpu_->WriteKv(rows, slots, cache);
  }
  void MoeRoute(const Tensor& l, const Tensor& b, const kernels::MoeRouting& r, const Tensor& ids,
                const Tensor& w) override {
    cpu_->MoeRoute(l, b, r, ids, w);
  }
  void MoeExperts(const Tensor& x, const Tensor& ids, const Tensor& w, std::span<const WeightView> gu,
                  std::span<const WeightView> d, const Tensor& out) override {
    cpu_->MoeExperts(x, ids, w, gu, d, out);
  }
  kernels::MlaOps& mla() override { return cpu_->mla(); }
  kernels::DsaOps& dsa() override { return cpu_->dsa(); }
  void GatherRows(const Tensor& x, std::span<const std::int32_t> i, const Tensor& out) override {
    cpu_->GatherRows(x, i, out);
  }
  void CopyToHost(const Tensor& src, float* dst) override { cpu_->CopyToHost(src, dst); }
  void CopyFromHost(const float* src, const Tensor& dst) override { cpu_->CopyFromHost(src, dst); }
  void CopyBytesFromHost(const void* src, const Tensor& dst) override { cpu_->CopyBytesFromHost(src, dst); }
  void CopyBytesToHost(const Tensor& src, void* dst) override { cpu_->CopyBytesToHost(src, dst); }
  void Sample(const Tensor& l, std::span<const kernels::SamplingRow> r, std::span<kernels::SampledToken> o) override {
    cpu_->Sample(l, r, o);
  }

  std::unique_ptr<kernels::InputBlock> MakeInputBlock(std::size_t bytes) override {
    return std::make_unique<GarbageInputBlock>(bytes);
  }
  bool CapturesGraphs() const override { return true; }
  std::unique_ptr<kernels::StepGraph> CaptureGraph(kernels::InputBlock&, const std::function<void()>& step) override {
    step();  // the eager run before capture
    ++captures;
    if (fail_captures) Fail("this step cannot be captured (test)");
    return std::make_unique<ReplayGraph>(step, &replays);
  }

  int captures = 0, replays = 0;
  bool fail_captures = false;

 private:
  std::unique_ptr<kernels::Backend> cpu_ = kernels::MakeCpuBackend();
};

class DecodeGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = FixtureModelDir("tiny-deepseek-v3");
    checkpoint_ = std::make_unique<io::Checkpoint>(dir);
    ShardOptions options;
    options.cuda_graphs.batch_sizes = {2, 4};
    WeightLoader loader(checkpoint_.get(), backend_);
    graphs_ = std::make_unique<DeepseekV3Model>(io::LoadModelConfig(dir), loader, options);
    eager_ = LoadCausalLM(dir);
  }

  // Prefills `lengths`, then runs `batches` (sequence indices) `rounds` times in both models,
  // feeding both the eager model's greedy tokens; every row must be bit-identical.
  // With `capture_first`, every graph is captured before the first step (the engine's start-up).
  void DecodeBoth(const std::vector<int>& lengths, const std::vector<std::vector<int>>& batches, int rounds,
                  std::int64_t pages = 96, bool capture_first = false) {
    StepRunner a(*graphs_, 4, pages, 5), b(*eager_, 4, pages, 5);
    if (capture_first) {
      graphs_->CaptureDecodeGraphs();
      EXPECT_EQ(backend_.captures, 2);  // sizes 4 and 2, before any step
    }
    std::vector<std::int32_t> next;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      const auto prompt = Tokens(lengths[i], 40 + i, eager_->vocab_size());
      a.Prefill(a.AddSequence(), prompt, false);
      next.push_back(Argmax(b.Prefill(b.AddSequence(), prompt, false).back()));
    }
    for (int round = 0; round < rounds; ++round)
      for (const std::vector<int>& batch : batches) {
        std::vector<StepRunner::Chunk> chunks;
        for (int s : batch) chunks.push_back({s, {next[s]}});
        const auto got = a.Step(chunks);
        const auto want = b.Step(chunks);
        ASSERT_EQ(got.size(), want.size());
        for (std::size_t r = 0; r < batch.size(); ++r) {
          EXPECT_EQ(got[r], want[r]) << "round " << round << ", batch of " << batch.size() << ", row " << r;
          next[batch[r]] = Argmax(want[r]);
        }
      }
  }

  ReplayingBackend backend_;
  std::unique_ptr<io::Checkpoint> checkpoint_;
  std::unique_ptr<DeepseekV3Model> graphs_;
  std::unique_ptr<CausalLM> eager_;
};

TEST_F(DecodeGraphsTest, ReplaysEqualEagerStepsAndPadToTheNextSize) {
  // Batches of 4 and 2 (captured sizes), 3 and 1 (padded to 4 and 2); contexts cross pages.
  DecodeBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}, {0, 2, 3}, {2}}, 6);
  EXPECT_EQ(backend_.captures, 2);    // sizes 4 and 2, each once (on padding rows)
  EXPECT_EQ(backend_.replays, 4 * 6);  // then every decode step is a replay
}

TEST_F(DecodeGraphsTest, LargerBatchesAndPrefillStepsRunEagerly) {
  DecodeBoth({5, 2, 7, 4, 11}, {{0, 1, 2, 3, 4}}, 3);  // 5 rows: over the largest size
  EXPECT_EQ(backend_.captures, 0);
  StepRunner a(*graphs_, 4, 64, 1);
  a.Step({{a.AddSequence(), Tokens(6, 1, graphs_->vocab_size())}, {a.AddSequence(), {5}}});  // a prefill chunk
  EXPECT_EQ(backend_.captures, 0);
}

TEST_F(DecodeGraphsTest, AFailedCaptureFallsBackToEagerSteps) {
  backend_.fail_captures = true;
  DecodeBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}}, 2);
  // Size 4 failed (sizes >= 4 off), then size 2 failed too; every step ran eagerly and no size is
  // tried again.
  EXPECT_EQ(backend_.captures, 2);
  EXPECT_EQ(backend_.replays, 0);
}

TEST_F(DecodeGraphsTest, NewMemoryGetsNewGraphs) {
  DecodeBoth({3, 9}, {{0, 1}}, 2);
  EXPECT_EQ(backend_.captures, 1);
  DecodeBoth({4, 1}, {{0, 1}}, 2, 80);  // the memory allocated again
  EXPECT_EQ(backend_.captures, 2);
}

TEST_F(DecodeGraphsTest, CaptureAtStartUpCoversEverySize) {
  DecodeBoth({3, 9, 14}, {{0, 1, 2}, {1}}, 2, 96, /*capture_first=*/true);
  EXPECT_EQ(backend_.captures, 2);  // no capture once steps run
  EXPECT_EQ(backend_.replays, 4);
}

TEST(DecodeGraphSizes, DefaultsAndFlags) {
  EXPECT_EQ(DefaultCudaGraphSizes(48), (std::vector<int>{1, 2, 4, 8, 12, 16, 24, 32, 40, 48}));
  EXPECT_EQ(DefaultCudaGraphSizes(10), (std::vector<int>{1, 2, 4, 8, 10}));
  EXPECT_EQ(DefaultCudaGraphSizes(0).back(), 256);
  CudaGraphOptions o;
  o.batch_sizes = {8, 2, 8, 300};
  o.max_batch_size = 64;
  EXPECT_EQ(CudaGraphSizes(o), (std::vector<int>{2, 8}));
  o.disabled = true;
  EXPECT_TRUE(CudaGraphSizes(o).empty());
}

}  // namespace
}  // namespace fission::model
