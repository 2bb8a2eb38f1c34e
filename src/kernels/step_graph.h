// Captured steps (CUDA graphs): a backend records the operations of one step once and replays them
// with new inputs, without the host launching each operation again.
//
// The inputs live in a GraphInputs block: host memory the caller fills, with a copy in device
// memory. Operations captured with host metadata (ids, positions, slots, block tables) inside the
// block read its device copy, so a replay sees whatever the block holds when it starts. Metadata
// from anywhere else is an Error during capture (a replay would repeat the captured values).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>

namespace fission::kernels {

// Bytes of a GraphInputs block a replay copies to the device: `rows` rows of `bytes` bytes each,
// `pitch` apart (one row when pitch is 0), from `offset` on.
struct GraphInputCopy {
  std::size_t offset = 0;
  std::size_t bytes = 0;
  std::size_t rows = 1;
  std::size_t pitch = 0;
};

class GraphInputs {
 public:
  virtual ~GraphInputs() = default;
  // The host memory; waits first until the last replay has copied it.
  virtual std::span<std::byte> host() = 0;
};

class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Copies `copies` of the input block to the device, then runs the captured operations. Memory
  // the operations allocated during capture keeps its addresses: a graph's outputs are valid until
  // the next replay of any graph of the same backend.
  virtual void Replay(std::span<const GraphInputCopy> copies) = 0;
};

}  // namespace fission::kernels
