#include "model/weights.h"

#include <cmath>
#include <cstring>

namespace fission::model {

WeightLoader::WeightLoader(const io::Checkpoint* checkpoint, kernels::Backend& backend, std::uint64_t seed)
    : checkpoint_(checkpoint), backend_(backend), rng_(seed) {}

Buffer WeightLoader::Upload(const Buffer& host) {
  if (backend_.device().type == DeviceType::kCpu) {
    Buffer copy(DType::kF32, host.tensor().shape);
    std::memcpy(copy.tensor().data, host.tensor().data, host.tensor().bytes());
    return copy;
  }
  Buffer device(DType::kF32, host.tensor().shape, backend_.allocator());
  backend_.CopyFromHost(host.ptr<float>(), device);
  return device;
}

Buffer WeightLoader::Random(const Shape& shape, float scale) {
  Buffer host(DType::kF32, shape);
  std::normal_distribution<float> normal(0.0f, scale);
  for (std::int64_t i = 0; i < shape.numel(); ++i) host.ptr<float>()[i] = normal(rng_);
  return host;
}

Buffer WeightLoader::Load(const std::string& name, const Shape& shape) {
  return LoadRows(name, shape, 0, shape.rank() == 0 ? 1 : shape[0]);
}

Buffer WeightLoader::LoadRows(const std::string& name, const Shape& shape, std::int64_t begin, std::int64_t end) {
  if (dummy()) {
    Shape slice = shape;
    slice[0] = end - begin;
    const float fan_in = shape.rank() >= 2 ? static_cast<float>(shape[-1]) : 1.0f;
    Buffer host = Random(slice, 1.0f / std::sqrt(fan_in));
    return backend_.device().type == DeviceType::kCpu ? std::move(host) : Upload(host);
  }
  Buffer host = checkpoint_->LoadF32Rows(name, shape, begin, end);
  return backend_.device().type == DeviceType::kCpu ? std::move(host) : Upload(host);
}

Buffer WeightLoader::LoadNorm(const std::string& name, std::int64_t size) {
  if (dummy()) {
    Buffer host(DType::kF32, Shape{size});
    for (std::int64_t i = 0; i < size; ++i) host.ptr<float>()[i] = 1.0f;
    return backend_.device().type == DeviceType::kCpu ? std::move(host) : Upload(host);
  }
  return Load(name, Shape{size});
}

Buffer WeightLoader::LoadStacked(const std::string& first, const std::string& second, const Shape& each) {
  Buffer a = Load(first, each);
  Buffer b = Load(second, each);
  Shape stacked = each;
  stacked[0] = 2 * each[0];
  Buffer out(DType::kF32, stacked, backend_.allocator());
  // Both halves are already on the backend; for the CPU a plain copy stacks them.
  FISSION_CHECK(backend_.device().type == DeviceType::kCpu, "LoadStacked on device backends goes through host");
  std::memcpy(out.ptr<float>(), a.ptr<float>(), a.tensor().bytes());
  std::memcpy(out.ptr<std::uint8_t>() + a.tensor().bytes(), b.ptr<float>(), b.tensor().bytes());
  return out;
}

}  // namespace fission::model
