// safetensors files: an 8-byte little-endian header length, a JSON header that maps tensor names to
// {dtype, shape, data_offsets}, then the raw bytes. Files are memory-mapped; a tensor's bytes are
// read only when it is used.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "tensor/tensor.h"

namespace fission::io {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::uint64_t begin = 0;  // byte offsets relative to the data section
  std::uint64_t end = 0;
};

struct SafetensorsHeader {
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_offset = 0;  // where the data section starts in the file
};

// Validates and parses the header of a safetensors image of `size` bytes. Every problem — truncated
// file, header length past the end, malformed JSON, unknown dtype, negative or oversized shapes,
// offsets out of range or overlapping, byte size not matching dtype × shape — is an Error naming
// `source` and the tensor. Never reads past `size`.
SafetensorsHeader ParseSafetensorsHeader(const std::uint8_t* data, std::size_t size, const std::string& source);

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::map<std::string, TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* Find(const std::string& name) const;
  // A host view of the tensor's bytes inside the map (read-only memory: do not write).
  Tensor View(const TensorInfo& info) const;

 private:
  MappedFile file_;
  SafetensorsHeader header_;
};

// Writes tensors (host memory) to a safetensors file; used by tools and tests.
struct TensorToWrite {
  std::string name;
  Tensor tensor;
};
void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace fission::io
