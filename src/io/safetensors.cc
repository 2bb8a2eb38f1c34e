#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "base/json.h"

namespace fission::io {
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit is 100 MB

std::uint64_t ReadU64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

TensorInfo ParseEntry(const std::string& name, const Json& entry, std::uint64_t data_size,
                      const std::string& source) {
  const std::string where = StrCat(source, ": tensor '", name, "'");
  if (!entry.is_object()) Fail(where, ": header entry is not an object");
  TensorInfo info;
  info.name = name;
  const std::string dtype = GetString(entry, "dtype", where);
  if (!ParseSafetensorsDType(dtype, &info.dtype)) Fail(where, ": unknown dtype '", dtype, "'");
  const Json& shape = RequireField(entry, "shape", where);
  if (!shape.is_array()) Fail(where, ": 'shape' must be an array");
  if (shape.size() > static_cast<std::size_t>(Shape::kMaxDims))
    Fail(where, ": rank ", shape.size(), " exceeds ", Shape::kMaxDims);
  std::vector<std::int64_t> dims;
  std::uint64_t numel = 1;
  for (const Json& d : shape) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0))
      Fail(where, ": shape entries must be non-negative integers, got ", d.dump());
    const std::uint64_t v = d.get<std::uint64_t>();
    if (v > (1ull << 40) || (v != 0 && numel > (1ull << 48) / v)) Fail(where, ": shape ", shape.dump(), " too large");
    numel *= v;
    dims.push_back(static_cast<std::int64_t>(v));
  }
  info.shape = Shape(dims);
  const Json& offsets = RequireField(entry, "data_offsets", where);
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    Fail(where, ": 'data_offsets' must be two non-negative integers, got ", offsets.dump());
  info.begin = offsets[0].get<std::uint64_t>();
  info.end = offsets[1].get<std::uint64_t>();
  if (info.begin > info.end || info.end > data_size)
    Fail(where, ": data_offsets [", info.begin, ", ", info.end, "] outside the data section of ", data_size,
         " bytes");
  const std::uint64_t expected = DTypeBytes(info.dtype, static_cast<std::int64_t>(numel));
  if (info.end - info.begin != expected)
    Fail(where, ": ", info.end - info.begin, " bytes stored but dtype ", dtype, " and shape ", info.shape.ToString(),
         " need ", expected);
  return info;
}

void CheckNoOverlap(const std::map<std::string, TensorInfo>& tensors, const std::string& source) {
  std::vector<const TensorInfo*> sorted;
  for (const auto& [name, info] : tensors)
    if (info.end > info.begin) sorted.push_back(&info);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->begin < sorted[i - 1]->end)
      Fail(source, ": tensors '", sorted[i - 1]->name, "' and '", sorted[i]->name, "' overlap");
  }
}

}  // namespace

SafetensorsHeader ParseSafetensorsHeader(const std::uint8_t* data, std::size_t size, const std::string& source) {
  if (size < 8) Fail(source, ": truncated safetensors file (", size, " bytes, need at least 8)");
  const std::uint64_t header_len = ReadU64(data);
  if (header_len > kMaxHeaderBytes) Fail(source, ": header length ", header_len, " exceeds the 100 MB limit");
  if (header_len > size - 8)
    Fail(source, ": header length ", header_len, " runs past the end of the file (", size, " bytes)");
  SafetensorsHeader header;
  header.data_offset = 8 + header_len;
  const std::uint64_t data_size = size - header.data_offset;
  const std::string text(reinterpret_cast<const char*>(data + 8), header_len);
  const Json json = ParseJson(text, source + " (header)");
  if (!json.is_object()) Fail(source, ": header is not a JSON object");
  for (const auto& [name, entry] : json.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) Fail(source, ": __metadata__ must be an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) Fail(source, ": __metadata__ value for '", k, "' must be a string");
        header.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    header.tensors.emplace(name, ParseEntry(name, entry, data_size, source));
  }
  CheckNoOverlap(header.tensors, source);
  return header;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  header_ = ParseSafetensorsHeader(file_.data(), file_.size(), path);
}

const TensorInfo* SafetensorsFile::Find(const std::string& name) const {
  auto it = header_.tensors.find(name);
  return it == header_.tensors.end() ? nullptr : &it->second;
}

Tensor SafetensorsFile::View(const TensorInfo& info) const {
  Tensor t;
  t.data = const_cast<std::uint8_t*>(file_.data() + header_.data_offset + info.begin);
  t.dtype = info.dtype;
  t.shape = info.shape;
  return t;
}

void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    const std::uint64_t bytes = t.tensor.bytes();
    header[t.name] = {{"dtype", std::string(DTypeName(t.tensor.dtype))},
                      {"shape", t.tensor.shape.dims()},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // align the data section
  std::ofstream out(path, std::ios::binary);
  if (!out) Fail(path, ": cannot create");
  std::uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(text.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const TensorToWrite& t : tensors)
    out.write(static_cast<const char*>(t.tensor.data), static_cast<std::streamsize>(t.tensor.bytes()));
  if (!out) Fail(path, ": write failed");
}

}  // namespace fission::io
