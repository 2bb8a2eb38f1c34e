#include "tensor/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace fission {

std::string DeviceName(Device device) {
  return device.type == DeviceType::kCpu ? "cpu" : StrCat("cuda:", device.index);
}

Shape::Shape(std::initializer_list<std::int64_t> dims) : Shape(std::vector<std::int64_t>(dims)) {}

Shape::Shape(const std::vector<std::int64_t>& dims) {
  FISSION_CHECK(static_cast<int>(dims.size()) <= kMaxDims, "rank ", dims.size());
  rank_ = static_cast<int>(dims.size());
  for (int i = 0; i < rank_; ++i) dims_[i] = dims[i];
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != other.dims_[i]) return false;
  return true;
}

std::string Shape::ToString() const {
  std::ostringstream out;
  out << "[";
  for (int i = 0; i < rank_; ++i) out << (i ? ", " : "") << dims_[i];
  out << "]";
  return out.str();
}

Tensor Tensor::Rows(std::int64_t begin, std::int64_t end) const {
  FISSION_CHECK(rank() >= 1 && begin >= 0 && begin <= end && end <= shape[0], "rows ", begin, "..", end,
                " of ", shape.ToString());
  Tensor out = *this;
  const std::int64_t row_elems = shape[0] == 0 ? 0 : numel() / shape[0];
  FISSION_CHECK(DTypeBits(dtype) % 8 == 0 || row_elems % 2 == 0);
  out.data = static_cast<std::uint8_t*>(data) + DTypeBytes(dtype, begin * row_elems);
  out.shape[0] = end - begin;
  return out;
}

Tensor Tensor::View(Shape new_shape) const {
  FISSION_CHECK(new_shape.numel() == numel(), shape.ToString(), " -> ", new_shape.ToString());
  Tensor out = *this;
  out.shape = new_shape;
  return out;
}

namespace {
class HostAllocator final : public Allocator {
 public:
  void* Allocate(std::size_t bytes) override {
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    FISSION_CHECK(p != nullptr, "host allocation of ", bytes, " bytes failed");
    return p;
  }
  void Free(void* ptr, std::size_t) override { std::free(ptr); }
  Device device() const override { return Device::Cpu(); }
};
}  // namespace

Allocator* CpuAllocator() {
  static HostAllocator allocator;
  return &allocator;
}

Buffer::Buffer(DType dtype, Shape shape, Allocator* allocator) : allocator_(allocator) {
  tensor_.dtype = dtype;
  tensor_.shape = shape;
  tensor_.device = allocator->device();
  bytes_ = DTypeBytes(dtype, shape.numel());
  tensor_.data = allocator->Allocate(bytes_);
}

Buffer::~Buffer() { Release(); }

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Release();
    tensor_ = other.tensor_;
    bytes_ = other.bytes_;
    allocator_ = other.allocator_;
    other.tensor_.data = nullptr;
    other.allocator_ = nullptr;
  }
  return *this;
}

void Buffer::Release() {
  if (tensor_.data != nullptr && allocator_ != nullptr) allocator_->Free(tensor_.data, bytes_);
  tensor_.data = nullptr;
}

Buffer MakeF32Buffer(Shape shape, const std::vector<float>& values) {
  FISSION_CHECK_EQ(shape.numel(), static_cast<std::int64_t>(values.size()));
  Buffer buffer(DType::kF32, shape);
  std::memcpy(buffer.ptr<float>(), values.data(), values.size() * sizeof(float));
  return buffer;
}

}  // namespace fission
