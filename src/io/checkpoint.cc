#include "io/checkpoint.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>

#include "base/json.h"
#include "base/mapped_file.h"

namespace fission::io {
namespace {

std::vector<std::string> ListSafetensors(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) Fail(dir, ": cannot open checkpoint directory");
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::vector<std::string> shards;
  if (FileExists(index_path)) {
    const Json index = ReadJsonFile(index_path);
    const Json& map = RequireField(index, "weight_map", index_path);
    if (!map.is_object()) Fail(index_path, ": 'weight_map' must be an object");
    for (const auto& [tensor, file] : map.items()) {
      if (!file.is_string()) Fail(index_path, ": weight_map entry for '", tensor, "' must be a file name");
      const std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos) Fail(index_path, ": shard name '", f, "' must not contain '/'");
      weight_map[tensor] = f;
      if (std::find(shards.begin(), shards.end(), f) == shards.end()) shards.push_back(f);
    }
  } else {
    // Without an index the weights are model*.safetensors; other safetensors files in the
    // directory (reference outputs, adapters) are not part of the model.
    for (const std::string& f : ListSafetensors(dir))
      if (f.rfind("model", 0) == 0) shards.push_back(f);
    if (shards.empty()) Fail(dir, ": no model*.safetensors files and no model.safetensors.index.json");
  }
  std::map<std::string, const SafetensorsFile*> by_name;
  for (const std::string& shard : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>(dir + "/" + shard));
    by_name[shard] = files_.back().get();
  }
  if (!weight_map.empty()) {
    for (const auto& [tensor, shard] : weight_map) {
      const SafetensorsFile* file = by_name.at(shard);
      const TensorInfo* info = file->Find(tensor);
      if (info == nullptr) Fail(file->path(), ": tensor '", tensor, "' listed in the index is not in this shard");
      where_[tensor] = {file, info};
    }
  } else {
    for (const auto& file : files_) {
      for (const auto& [tensor, info] : file->tensors()) {
        if (where_.count(tensor)) Fail(dir, ": tensor '", tensor, "' appears in two files");
        where_[tensor] = {file.get(), &info};
      }
    }
  }
}

const Checkpoint::Location& Checkpoint::Find(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) Fail(dir_, ": missing tensor '", name, "'");
  return it->second;
}

const TensorInfo& Checkpoint::Info(const std::string& name) const { return *Find(name).info; }
const std::string& Checkpoint::FileOf(const std::string& name) const { return Find(name).file->path(); }
Tensor Checkpoint::View(const std::string& name) const {
  const Location& loc = Find(name);
  return loc.file->View(*loc.info);
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, loc] : where_) names.push_back(name);
  return names;
}

Buffer Checkpoint::LoadF32(const std::string& name, const Shape& expected, int block) const {
  return LoadF32Rows(name, expected, 0, expected.rank() == 0 ? 1 : expected[0], block);
}

Buffer Checkpoint::LoadF32Rows(const std::string& name, const Shape& expected, std::int64_t begin, std::int64_t end,
                               int block) const {
  const Location& loc = Find(name);
  const TensorInfo& info = *loc.info;
  if (!(info.shape == expected))
    Fail(loc.file->path(), ": tensor '", name, "' has shape ", info.shape.ToString(), ", expected ",
         expected.ToString());
  const std::int64_t rows = expected.rank() == 0 ? 1 : expected[0];
  FISSION_CHECK(begin >= 0 && begin <= end && end <= rows, name, " rows ", begin, "..", end);
  const std::int64_t cols = rows == 0 ? 0 : expected.numel() / rows;
  Shape out_shape = expected;
  if (expected.rank() > 0) out_shape[0] = end - begin;
  Buffer out(DType::kF32, out_shape);
  const Tensor all = loc.file->View(info);
  const auto* base = static_cast<const std::uint8_t*>(all.data);
  if (info.dtype == DType::kF4E2M1 && (cols * begin) % 2 != 0)
    Fail(loc.file->path(), ": tensor '", name, "': fp4 row slice does not start on a byte");
  ConvertToF32(info.dtype, base + DTypeBytes(info.dtype, begin * cols), out.ptr<float>(), (end - begin) * cols);

  const std::string scale_name = name + "_scale_inv";
  if (!Has(scale_name)) return out;
  if (expected.rank() != 2) Fail(loc.file->path(), ": tensor '", name, "' has a scale but is not 2-D");
  const std::int64_t scale_rows = (rows + block - 1) / block, scale_cols = (cols + block - 1) / block;
  const Buffer scale = LoadF32(scale_name, Shape{scale_rows, scale_cols}, block);
  float* w = out.ptr<float>();
  const float* s = scale.ptr<float>();
  for (std::int64_t r = begin; r < end; ++r) {
    const float* srow = s + (r / block) * scale_cols;
    float* wrow = w + (r - begin) * cols;
    for (std::int64_t c = 0; c < cols; ++c) wrow[c] *= srow[c / block];
  }
  return out;
}

}  // namespace fission::io
