// A step's input block and captured steps.
//
// Every step's host metadata (token ids, positions, KV slots, block tables, ...) is written once
// into an InputBlock: host memory, mirrored to the device in one copy (Upload) on a backend with
// its own memory. Operations given spans inside the block read its device copy instead of
// uploading them again. A captured step (a CUDA graph) records the operations of one step once and
// replays them after new inputs are copied into its block: operations captured with metadata from
// anywhere else are an Error during capture, since a replay would repeat the captured values.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace fission::kernels {

// Bytes of an InputBlock to copy to the device: `rows` rows of `bytes` bytes each, `pitch` apart
// (one row when pitch is 0), from `offset` on.
struct InputCopy {
  std::size_t offset = 0;
  std::size_t bytes = 0;
  std::size_t rows = 1;
  std::size_t pitch = 0;
};

class InputBlock {
 public:
  virtual ~InputBlock() = default;
  // The host memory; waits first until the last upload (or replay) has copied it.
  virtual std::span<std::byte> host() = 0;
  // Copies `copies` of the host memory to the device copy, queued before the operations that
  // follow; from then on operations read spans inside the block from that copy. Nothing to do
  // for a block in host memory.
  virtual void Upload(std::span<const InputCopy> copies) = 0;
};

// A block in host memory only (the CPU backend's, and any backend's that reads host spans).
class HostInputBlock final : public InputBlock {
 public:
  explicit HostInputBlock(std::size_t bytes) : bytes_(bytes) {}
  std::span<std::byte> host() override { return bytes_; }
  void Upload(std::span<const InputCopy>) override {}

 private:
  std::vector<std::byte> bytes_;
};

class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Copies `copies` of the input block to the device, then runs the captured operations. Memory
  // the operations allocated during capture keeps its addresses: a graph's outputs are valid until
  // the next replay of any graph of the same backend.
  virtual void Replay(std::span<const InputCopy> copies) = 0;
};

}  // namespace fission::kernels
