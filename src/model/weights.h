// Loads a model's tensors onto a backend: from a checkpoint (dequantizing FP8 blocks), or as
// random "dummy" weights when only the shapes are known (--load-format dummy).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "io/checkpoint.h"
#include "kernels/backend.h"

namespace fission::model {

class WeightLoader {
 public:
  // `checkpoint` null means dummy weights from `seed`.
  WeightLoader(const io::Checkpoint* checkpoint, kernels::Backend& backend, std::uint64_t seed = 0);

  // A weight of `shape`; a missing tensor or wrong shape is an Error naming the file and tensor.
  Buffer Load(const std::string& name, const Shape& shape);
  // Rows [begin, end) of the first dimension (the slice one tensor-parallel rank owns).
  Buffer LoadRows(const std::string& name, const Shape& shape, std::int64_t begin, std::int64_t end);
  // Norm weights: dummy ones are all-ones-ish rather than random.
  Buffer LoadNorm(const std::string& name, std::int64_t size);
  // Several tensors stacked along the first dimension (gate and up projections into one).
  Buffer LoadStacked(const std::string& first, const std::string& second, const Shape& each);
  bool dummy() const { return checkpoint_ == nullptr; }
  kernels::Backend& backend() { return backend_; }

 private:
  Buffer Upload(const Buffer& host);
  Buffer Random(const Shape& shape, float scale);

  const io::Checkpoint* checkpoint_;
  kernels::Backend& backend_;
  std::mt19937_64 rng_;
};

}  // namespace fission::model
