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

// The weight files of a directory without an index: model*.safetensors, or else the single file
// of SGLang's NextN export (a draft checkpoint, --speculative-draft-model-path).
constexpr const char* kNextnExportFile = "nextn_layer_parameters.safetensors";

std::vector<std::string> WeightFiles(const std::string& dir) {
  std::vector<std::string> files = ListSafetensors(dir), weights;
  for (const std::string& f : files)
    if (f.rfind("model", 0) == 0) weights.push_back(f);
  if (weights.empty() && std::find(files.begin(), files.end(), kNextnExportFile) != files.end())
    weights.push_back(kNextnExportFile);
  return weights;
}

}  // namespace

bool Checkpoint::Exists(const std::string& dir) {
  if (FileExists(dir + "/model.safetensors.index.json")) return true;
  return !WeightFiles(dir).empty();
}

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
    // Without an index the weights are model*.safetensors (or a NextN export's one file); other
    // safetensors files in the directory (reference outputs, adapters) are not part of the model.
    shards = WeightFiles(dir);
    if (shards.empty())
      Fail(dir, ": no model*.safetensors files, no ", kNextnExportFile, " and no model.safetensors.index.json");
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

namespace {

// DeepSeek-V4's companion of `X.weight` is `X.scale`.
std::string DotScaleOf(const std::string& name) {
  const std::string suffix = ".weight";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return "";
  return name.substr(0, name.size() - suffix.size()) + ".scale";
}

}  // namespace

std::string Checkpoint::Fp8ScaleOf(const std::string& name) const {
  if (Has(name + "_scale_inv")) return name + "_scale_inv";
  const std::string dot = DotScaleOf(name);
  if (!dot.empty() && Has(dot) && Has(name) && Info(name).dtype == DType::kF8E4M3) return dot;
  return "";
}

std::string Checkpoint::Mxfp4ScaleOf(const std::string& name) const {
  if (!Has(name) || (Info(name).dtype != DType::kU8 && Info(name).dtype != DType::kI8)) return "";
  for (const std::string& scale : {name + "_scale", DotScaleOf(name)}) {
    if (scale.empty() || !Has(scale)) continue;
    const DType s = Info(scale).dtype;
    if (s == DType::kU8 || s == DType::kE8M0) return scale;
  }
  return "";
}

bool Checkpoint::IsMxfp4(const std::string& name) const { return !Mxfp4ScaleOf(name).empty(); }

const Checkpoint::Location& Checkpoint::FindWithShape(const std::string& name, const Shape& expected) const {
  const Location& loc = Find(name);
  if (IsMxfp4(name)) {
    const Shape& stored = loc.info->shape;
    const Shape& scales = Info(Mxfp4ScaleOf(name)).shape;
    if (expected.rank() != 2 || expected[1] % 2 != 0 || !(stored == Shape{expected[0], expected[1] / 2}) ||
        !(scales == Shape{expected[0], (expected[1] + 31) / 32}))
      Fail(loc.file->path(), ": MXFP4 tensor '", name, "' has packed shape ", stored.ToString(), " and scales ",
           scales.ToString(), ", expected a ", expected.ToString(), " weight (packed [rows, cols / 2], scales [rows, ",
           "ceil(cols / 32)])");
    return loc;
  }
  if (!(loc.info->shape == expected))
    Fail(loc.file->path(), ": tensor '", name, "' has shape ", loc.info->shape.ToString(), ", expected ",
         expected.ToString());
  return loc;
}

void Checkpoint::DecodeMxfp4(const Location& loc, std::int64_t first, std::int64_t count, float* out) const {
  FISSION_CHECK(first % 2 == 0, "MXFP4 decode from odd element ", first);
  const auto* base = static_cast<const std::uint8_t*>(loc.file->View(*loc.info).data);
  ConvertToF32(DType::kF4E2M1, base + first / 2, out, count);
}

void Checkpoint::ApplyBlockScales(const std::string& name, const Shape& expected, std::int64_t row0,
                                  std::int64_t col0, const Buffer& slice, int block) const {
  if (IsMxfp4(name)) {
    const Tensor scales = View(Mxfp4ScaleOf(name));  // e8m0 codes, one per 32 columns of a row
    const std::int64_t groups = scales.shape[1];
    const Tensor& t = slice.tensor();
    const std::int64_t slice_rows = t.shape[0], slice_cols = t.shape[1];
    for (std::int64_t r = 0; r < slice_rows; ++r) {
      const auto* srow = static_cast<const std::uint8_t*>(scales.data) + (row0 + r) * groups;
      float* w = slice.ptr<float>() + r * slice_cols;
      for (std::int64_t c = 0; c < slice_cols; ++c) w[c] *= E8M0ToF32(srow[(col0 + c) / 32]);
    }
    return;
  }
  const std::string scale_name = Fp8ScaleOf(name);
  if (scale_name.empty()) return;
  if (expected.rank() != 2) Fail(FileOf(name), ": tensor '", name, "' has a block scale but is not 2-D");
  const std::int64_t rows = expected[0], cols = expected[1];
  const std::int64_t scale_cols = (cols + block - 1) / block;
  const Buffer scale = LoadF32(scale_name, Shape{(rows + block - 1) / block, scale_cols}, block);
  const Tensor& t = slice.tensor();
  const std::int64_t slice_rows = t.shape[0], slice_cols = t.numel() / std::max<std::int64_t>(slice_rows, 1);
  for (std::int64_t r = 0; r < slice_rows; ++r) {
    const float* srow = scale.ptr<float>() + ((row0 + r) / block) * scale_cols;
    float* w = slice.ptr<float>() + r * slice_cols;
    for (std::int64_t c = 0; c < slice_cols; ++c) w[c] *= srow[(col0 + c) / block];
  }
}

Buffer Checkpoint::LoadF32Rows(const std::string& name, const Shape& expected, std::int64_t begin, std::int64_t end,
                               int block) const {
  const Location& loc = FindWithShape(name, expected);
  const std::int64_t rows = expected.rank() == 0 ? 1 : expected[0];
  FISSION_CHECK(begin >= 0 && begin <= end && end <= rows, name, " rows ", begin, "..", end);
  const std::int64_t cols = rows == 0 ? 0 : expected.numel() / rows;
  Shape out_shape = expected;
  if (expected.rank() > 0) out_shape[0] = end - begin;
  Buffer out(DType::kF32, out_shape);
  if (IsMxfp4(name)) {
    DecodeMxfp4(loc, begin * cols, (end - begin) * cols, out.ptr<float>());
    ApplyBlockScales(name, expected, begin, 0, out, block);
    return out;
  }
  const auto* base = static_cast<const std::uint8_t*>(loc.file->View(*loc.info).data);
  if (loc.info->dtype == DType::kF4E2M1 && (cols * begin) % 2 != 0)
    Fail(loc.file->path(), ": tensor '", name, "': fp4 row slice does not start on a byte");
  ConvertToF32(loc.info->dtype, base + DTypeBytes(loc.info->dtype, begin * cols), out.ptr<float>(), (end - begin) * cols);
  ApplyBlockScales(name, expected, begin, 0, out, block);
  return out;
}

Buffer Checkpoint::LoadF32Cols(const std::string& name, const Shape& expected, std::int64_t begin, std::int64_t end,
                               int block) const {
  const Location& loc = FindWithShape(name, expected);
  FISSION_CHECK(expected.rank() == 2 && begin >= 0 && begin <= end && end <= expected[1], name, " cols ", begin, "..",
                end);
  const std::int64_t rows = expected[0], cols = expected[1];
  Buffer out(DType::kF32, Shape{rows, end - begin});
  if (IsMxfp4(name)) {
    // Rows hold whole bytes (cols is even); a slice must start on a byte too.
    if (begin % 2 != 0) Fail(loc.file->path(), ": MXFP4 tensor '", name, "': column slice starting at odd column ", begin);
    for (std::int64_t r = 0; r < rows; ++r) DecodeMxfp4(loc, r * cols + begin, end - begin, out.ptr<float>() + r * (end - begin));
    ApplyBlockScales(name, expected, 0, begin, out, block);
    return out;
  }
  if (DTypeBits(loc.info->dtype) < 8) Fail(loc.file->path(), ": tensor '", name, "': column slices of fp4 are not supported");
  const auto* base = static_cast<const std::uint8_t*>(loc.file->View(*loc.info).data);
  for (std::int64_t r = 0; r < rows; ++r)
    ConvertToF32(loc.info->dtype, base + DTypeBytes(loc.info->dtype, r * cols + begin),
                 out.ptr<float>() + r * (end - begin), end - begin);
  ApplyBlockScales(name, expected, 0, begin, out, block);
  return out;
}

Buffer Checkpoint::LoadRaw(const std::string& name, const Shape& expected, std::int64_t row0, std::int64_t row1,
                           std::int64_t col0, std::int64_t col1) const {
  const Location& loc = FindWithShape(name, expected);
  FISSION_CHECK(expected.rank() == 2 && 0 <= row0 && row0 <= row1 && row1 <= expected[0] && 0 <= col0 &&
                    col0 <= col1 && col1 <= expected[1],
                name, " rows ", row0, "..", row1, " cols ", col0, "..", col1);
  const DType dtype = loc.info->dtype;
  if (DTypeBits(dtype) < 8) Fail(loc.file->path(), ": tensor '", name, "': raw slices of sub-byte types are not supported");
  Buffer out(dtype, Shape{row1 - row0, col1 - col0});
  const auto* base = static_cast<const std::uint8_t*>(loc.file->View(*loc.info).data);
  const std::size_t row_bytes = DTypeBytes(dtype, col1 - col0);
  for (std::int64_t r = row0; r < row1; ++r)
    std::memcpy(out.ptr<std::uint8_t>() + (r - row0) * row_bytes, base + DTypeBytes(dtype, r * expected[1] + col0),
                row_bytes);
  return out;
}

Checkpoint::Mxfp4Slice Checkpoint::LoadMxfp4(const std::string& name, const Shape& expected, std::int64_t row0,
                                             std::int64_t row1, std::int64_t col0, std::int64_t col1) const {
  const Location& loc = FindWithShape(name, expected);
  if (!IsMxfp4(name)) Fail(loc.file->path(), ": tensor '", name, "' is not MXFP4");
  const std::int64_t cols = expected[1], groups = (cols + 31) / 32;
  FISSION_CHECK(0 <= row0 && row0 <= row1 && row1 <= expected[0] && 0 <= col0 && col0 <= col1 && col1 <= cols, name,
                " rows ", row0, "..", row1, " cols ", col0, "..", col1);
  if (col0 % 32 != 0 || (col1 % 32 != 0 && col1 != cols))
    Fail(loc.file->path(), ": MXFP4 tensor '", name, "': columns ", col0, "..", col1, " do not start and end on 1x32 ",
         "scale groups");
  // cols is even (FindWithShape) and so is every slice width: rows of the slice are whole bytes.
  Mxfp4Slice out{Buffer(DType::kF4E2M1, Shape{row1 - row0, col1 - col0}),
                 Buffer(DType::kE8M0, Shape{row1 - row0, (col1 - col0 + 31) / 32})};
  const auto* codes = static_cast<const std::uint8_t*>(loc.file->View(*loc.info).data);
  const Tensor scales = View(Mxfp4ScaleOf(name));
  const std::size_t code_bytes = (col1 - col0) / 2, scale_bytes = (col1 - col0 + 31) / 32;
  for (std::int64_t r = row0; r < row1; ++r) {
    std::memcpy(out.codes.ptr<std::uint8_t>() + (r - row0) * code_bytes, codes + (r * cols + col0) / 2, code_bytes);
    std::memcpy(out.scales.ptr<std::uint8_t>() + (r - row0) * scale_bytes,
                static_cast<const std::uint8_t*>(scales.data) + r * groups + col0 / 32, scale_bytes);
  }
  return out;
}

}  // namespace fission::io
