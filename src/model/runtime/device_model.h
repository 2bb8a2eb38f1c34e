// A model together with the backend it runs on, for backends that are not process-wide (one CUDA
// backend per device). Before every step it makes its device current on the calling thread, so
// the rank threads of ParallelCausalLM and the engine thread each talk to the right GPU.
#pragma once

#include <functional>
#include <memory>

#include "kernels/backend.h"
#include "model/causal_lm.h"

namespace fission::model {

class DeviceCausalLM final : public CausalLM {
 public:
  DeviceCausalLM(std::unique_ptr<kernels::Backend> backend, std::unique_ptr<CausalLM> model,
                 std::function<void()> make_current)
      : backend_(std::move(backend)), model_(std::move(model)), make_current_(std::move(make_current)) {}
  ~DeviceCausalLM() override {
    make_current_();
    model_.reset();  // its weights go back to the backend's allocator first
  }

  std::string architecture() const override { return model_->architecture(); }
  std::int64_t vocab_size() const override { return model_->vocab_size(); }
  std::int64_t max_position_embeddings() const override { return model_->max_position_embeddings(); }
  MemorySpec Memory() const override { return model_->Memory(); }
  void AllocateMemory(const MemoryPlan& plan) override {
    make_current_();
    model_->AllocateMemory(plan);
  }
  StepLogits Forward(const ForwardBatch& batch) override {
    make_current_();
    return model_->Forward(batch);
  }
  bool has_draft() const override { return model_->has_draft(); }
  std::int32_t padded_extend_rows() const override { return model_->padded_extend_rows(); }
  StepLogits ForwardDraft(const DraftBatch& batch) override {
    make_current_();
    return model_->ForwardDraft(batch);
  }
  void CaptureDecodeGraphs(std::int32_t draft_steps) override {
    make_current_();
    model_->CaptureDecodeGraphs(draft_steps);
  }
  void ReleaseGraphs() override {
    make_current_();
    model_->ReleaseGraphs();
  }
  std::optional<kernels::DeviceMemory> device_memory() override {
    make_current_();
    return backend_->Memory();
  }
  CausalLM& wrapped() { return *model_; }
  kernels::Backend& backend() { return *backend_; }

 private:
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<CausalLM> model_;
  std::function<void()> make_current_;
};

}  // namespace fission::model
