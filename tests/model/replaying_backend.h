// Test helper: the CPU backend, plus "graphs" that replay by running the captured step again.
// A replayed step reads the graph's input block exactly as a CUDA replay's kernels read its
// device copy, so the CPU tests check the layout, padding rows, size choice, fixed outputs,
// memory changes and the fallback after a failed capture of captured steps (model/decode_graphs.h)
// against eager steps, bit for bit.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "kernels/backend.h"
#include "model/arch/deepseek_v3.h"
#include "model/weights.h"

namespace fission::model {

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
  kernels::V4Ops& v4() override { return cpu_->v4(); }
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

// A DeepSeek-V3 checkpoint loaded on a ReplayingBackend (the backend outlives the model).
struct ReplayedModel {
  ReplayingBackend backend;
  std::unique_ptr<io::Checkpoint> checkpoint;
  std::unique_ptr<DeepseekV3Model> model;
};

// `options.load_draft` loads the checkpoint's own NextN layer (model.layers.{num_hidden_layers}).
inline std::unique_ptr<ReplayedModel> LoadReplayed(const std::string& dir, ShardOptions options) {
  auto r = std::make_unique<ReplayedModel>();
  r->checkpoint = std::make_unique<io::Checkpoint>(dir);
  io::ModelConfig config = io::LoadModelConfig(dir);
  if (options.load_draft) options.draft_layer = config.num_hidden_layers;
  WeightLoader loader(r->checkpoint.get(), r->backend);
  r->model = std::make_unique<DeepseekV3Model>(std::move(config), loader, options);
  return r;
}

}  // namespace fission::model
