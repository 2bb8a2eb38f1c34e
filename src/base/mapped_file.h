// A read-only memory map of a whole file. Pages are read by the kernel only when touched, so
// opening a large checkpoint costs nothing until a tensor is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fission {

class MappedFile {
 public:
  // Maps `path`; an Error names the path and the system's reason when it cannot.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

// Reads a whole (text) file; an Error names the path when it cannot.
std::string ReadFile(const std::string& path);
bool FileExists(const std::string& path);

}  // namespace fission
