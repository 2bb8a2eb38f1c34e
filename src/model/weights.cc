#include "model/weights.h"

#include <cmath>
#include <cstring>

namespace fission::model {

Range EvenPart(std::int64_t total, int n, int r, const char* what) {
  if (total % n != 0) Fail(what, " (", total, ") is not divisible by the ", n, " ranks that share it");
  const std::int64_t part = total / n;
  return {r * part, (r + 1) * part};
}

WeightLoader::WeightLoader(const io::Checkpoint* checkpoint, kernels::Backend& backend, std::uint64_t seed,
                           DType matrix_dtype)
    : checkpoint_(checkpoint), backend_(backend), matrix_dtype_(matrix_dtype), rng_(seed) {
  FISSION_CHECK(matrix_dtype == DType::kF32 || (matrix_dtype == DType::kBF16 && backend.device().type != DeviceType::kCpu),
                "weights are fp32 on the CPU backend and fp32 or bf16 on a device");
}

Buffer WeightLoader::ToBackend(Buffer host, bool keep_f32) {
  if (backend_.device().type == DeviceType::kCpu) return host;
  const DType dtype = host.tensor().shape.rank() == 2 && !keep_f32 ? matrix_dtype_ : DType::kF32;
  Buffer device(dtype, host.tensor().shape, backend_.allocator());
  backend_.CopyFromHost(host.ptr<float>(), device);
  return device;
}

Buffer WeightLoader::Random(const Shape& shape, float scale) {
  if (!device_fill_) return ToBackend(RandomHost(shape, scale));
  Buffer device(shape.rank() == 2 ? matrix_dtype_ : DType::kF32, shape, backend_.allocator());
  device_fill_(device.tensor(), scale * std::sqrt(3.0f), rng_());
  return device;
}

Buffer WeightLoader::RandomHost(const Shape& shape, float scale) {
  Buffer host(DType::kF32, shape);
  std::normal_distribution<float> normal(0.0f, scale);
  for (std::int64_t i = 0; i < shape.numel(); ++i) host.ptr<float>()[i] = normal(rng_);
  return host;
}

Buffer WeightLoader::Load(const std::string& name, const Shape& shape, Range rows) {
  const std::int64_t full_rows = shape.rank() == 0 ? 1 : shape[0];
  if (dummy()) {
    Shape slice = shape;
    if (slice.rank() > 0) slice[0] = rows.size(full_rows);
    const float fan_in = shape.rank() >= 2 ? static_cast<float>(shape[-1]) : 1.0f;
    return Random(slice, 1.0f / std::sqrt(fan_in));
  }
  return ToBackend(checkpoint_->LoadF32Rows(name, shape, rows.begin, rows.stop(full_rows)));
}

Buffer WeightLoader::LoadF32(const std::string& name, const Shape& shape) {
  if (dummy()) {
    const float fan_in = shape.rank() >= 2 ? static_cast<float>(shape[-1]) : 1.0f;
    return ToBackend(RandomHost(shape, 1.0f / std::sqrt(fan_in)), /*keep_f32=*/true);
  }
  return ToBackend(checkpoint_->LoadF32Rows(name, shape, 0, shape.rank() == 0 ? 1 : shape[0]), /*keep_f32=*/true);
}

Buffer WeightLoader::LoadCols(const std::string& name, const Shape& shape, Range cols) {
  if (dummy()) return Random(Shape{shape[0], cols.size(shape[1])}, 1.0f / std::sqrt(static_cast<float>(shape[1])));
  return ToBackend(checkpoint_->LoadF32Cols(name, shape, cols.begin, cols.stop(shape[1])));
}

Buffer WeightLoader::LoadNorm(const std::string& name, std::int64_t size) {
  if (dummy()) {
    Buffer host(DType::kF32, Shape{size});
    for (std::int64_t i = 0; i < size; ++i) host.ptr<float>()[i] = 1.0f;
    return ToBackend(std::move(host));
  }
  return Load(name, Shape{size});
}

Buffer WeightLoader::LoadStacked(const std::string& first, const std::string& second, const Shape& each, Range rows) {
  // Stack on the host, then move once.
  const bool cpu = backend_.device().type == DeviceType::kCpu;
  if (dummy() && device_fill_) {
    Shape stacked = each;
    stacked[0] = 2 * rows.size(each[0]);
    return Random(stacked, 1.0f / std::sqrt(static_cast<float>(each[-1])));
  }
  auto load_host = [&](const std::string& name) {
    if (dummy()) {
      Shape slice = each;
      slice[0] = rows.size(each[0]);
      return RandomHost(slice, 1.0f / std::sqrt(static_cast<float>(each[-1])));
    }
    return checkpoint_->LoadF32Rows(name, each, rows.begin, rows.stop(each[0]));
  };
  Buffer a = load_host(first), b = load_host(second);
  Shape stacked = a.tensor().shape;
  stacked[0] *= 2;
  Buffer host(DType::kF32, stacked);
  std::memcpy(host.ptr<float>(), a.ptr<float>(), a.tensor().bytes());
  std::memcpy(host.ptr<std::uint8_t>() + a.tensor().bytes(), b.ptr<float>(), b.tensor().bytes());
  return cpu ? std::move(host) : ToBackend(std::move(host));
}

}  // namespace fission::model
