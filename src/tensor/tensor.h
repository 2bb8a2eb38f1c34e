// Tensor views and owning buffers.
//
// A Tensor is a non-owning view: pointer, dtype, shape (row-major, contiguous) and device. Memory is
// owned by Buffers, which get it from a per-device Allocator. Model code passes Tensors to the
// Backend and never touches device memory itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "tensor/dtype.h"

namespace fission {

enum class DeviceType : std::uint8_t { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  static Device Cpu() { return {}; }
  static Device Cuda(int index) { return {DeviceType::kCuda, index}; }
};
std::string DeviceName(Device device);

// Up to kMaxDims dimensions, stored inline.
class Shape {
 public:
  static constexpr int kMaxDims = 6;
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(const std::vector<std::int64_t>& dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return dims_[i < 0 ? i + rank_ : i]; }
  std::int64_t& operator[](int i) { return dims_[i < 0 ? i + rank_ : i]; }
  std::int64_t numel() const;
  std::vector<std::int64_t> dims() const { return {dims_.begin(), dims_.begin() + rank_}; }
  bool operator==(const Shape& other) const;
  std::string ToString() const;

 private:
  std::array<std::int64_t, kMaxDims> dims_{};
  int rank_ = 0;
};

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Device device;

  std::int64_t numel() const { return shape.numel(); }
  std::size_t bytes() const { return DTypeBytes(dtype, numel()); }
  std::int64_t dim(int i) const { return shape[i]; }
  int rank() const { return shape.rank(); }

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }
  // Rows [begin, end) of the first dimension.
  Tensor Rows(std::int64_t begin, std::int64_t end) const;
  // Same memory, new shape of the same element count.
  Tensor View(Shape new_shape) const;
};

// Allocates and frees memory of one device.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* Allocate(std::size_t bytes) = 0;
  virtual void Free(void* ptr, std::size_t bytes) = 0;
  virtual Device device() const = 0;
};

// The process-wide host allocator (64-byte aligned).
Allocator* CpuAllocator();

// Owns memory for one tensor.
class Buffer {
 public:
  Buffer() = default;
  Buffer(DType dtype, Shape shape, Allocator* allocator = CpuAllocator());
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  const Tensor& tensor() const { return tensor_; }
  operator const Tensor&() const { return tensor_; }
  template <typename T>
  T* ptr() const { return tensor_.ptr<T>(); }
  bool empty() const { return tensor_.data == nullptr; }

 private:
  void Release();
  Tensor tensor_;
  std::size_t bytes_ = 0;
  Allocator* allocator_ = nullptr;
};

// Host fp32 buffer filled from values (tests and small tables).
Buffer MakeF32Buffer(Shape shape, const std::vector<float>& values);

}  // namespace fission
