// A Hugging Face checkpoint directory: one or more safetensors files, with
// model.safetensors.index.json naming the file of every tensor when sharded.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace fission::io {

class Checkpoint {
 public:
  // Opens (maps) every shard of `dir`. Errors name the directory, the index or the shard.
  explicit Checkpoint(const std::string& dir);
  // Whether `dir` holds weights: an index or a model*.safetensors file.
  static bool Exists(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool Has(const std::string& name) const { return where_.count(name) != 0; }
  // Error "<dir>: missing tensor '<name>'" when absent.
  const TensorInfo& Info(const std::string& name) const;
  const std::string& FileOf(const std::string& name) const;
  Tensor View(const std::string& name) const;
  std::vector<std::string> Names() const;

  // Loads `name` as fp32, checking its shape against `expected` (Error naming the tensor on a
  // mismatch). Block-quantized FP8 weights (Fp8ScaleOf: one scale per `block`×`block` tile) are
  // dequantized: w = q * scale[row / block][col / block]. So are MXFP4 weights (IsMxfp4):
  // w = e2m1 * 2^(scale[row][col / 32] - 127).
  Buffer LoadF32(const std::string& name, const Shape& expected, int block = 128) const;
  // Rows [begin, end) of the first dimension of a 2-D (or 1-D) tensor, dequantized likewise: a
  // tensor-parallel rank reads only its own slice from the map.
  Buffer LoadF32Rows(const std::string& name, const Shape& expected, std::int64_t begin, std::int64_t end,
                     int block = 128) const;
  // Columns [begin, end) of a 2-D tensor (a row-parallel rank's slice), dequantized likewise; only
  // those bytes of each row are read.
  Buffer LoadF32Cols(const std::string& name, const Shape& expected, std::int64_t begin, std::int64_t end,
                     int block = 128) const;
  // MXFP4: `name` holds U8 or I8 [rows, cols / 2] (two e2m1 codes a byte, the even column in the
  // low nibble) with U8 or F8_E8M0 [rows, ceil(cols / 32)] e8m0 scales in `<name>_scale` (Quark)
  // or, for `X.weight`, `X.scale` (DeepSeek-V4's FP4 experts). Such a tensor has the logical
  // shape [rows, cols] everywhere in this class.
  bool IsMxfp4(const std::string& name) const;
  std::string Mxfp4ScaleOf(const std::string& name) const;  // "" unless IsMxfp4
  // The block scales of an FP8 weight: `<name>_scale_inv` (fp32, DeepSeek-V3) or, for an e4m3
  // `X.weight`, `X.scale` (ue8m0, DeepSeek-V4); "" when it has none.
  std::string Fp8ScaleOf(const std::string& name) const;

  // Rows [row0, row1) × columns [col0, col1) of a 2-D tensor of at least 8 bits, in its stored
  // dtype (FP8 weights kept as codes on a device).
  Buffer LoadRaw(const std::string& name, const Shape& expected, std::int64_t row0, std::int64_t row1,
                 std::int64_t col0, std::int64_t col1) const;
  // Rows [row0, row1) × columns [col0, col1) of an MXFP4 tensor as stored: F4E2M1 codes [rows,
  // cols] packed two a byte over the slice, and its E8M0 scales [rows, ceil(cols / 32)]. The
  // columns must start on a 1x32 group and end on one or at the matrix's end (Error otherwise).
  struct Mxfp4Slice {
    Buffer codes, scales;
  };
  Mxfp4Slice LoadMxfp4(const std::string& name, const Shape& expected, std::int64_t row0, std::int64_t row1,
                       std::int64_t col0, std::int64_t col1) const;

 private:
  struct Location {
    const SafetensorsFile* file;
    const TensorInfo* info;
  };
  const Location& Find(const std::string& name) const;
  const Location& FindWithShape(const std::string& name, const Shape& expected) const;
  // Decodes `count` e2m1 codes of an MXFP4 tensor from element `first` (even) into `out`.
  void DecodeMxfp4(const Location& loc, std::int64_t first, std::int64_t count, float* out) const;
  // Multiplies a [rows, cols] slice starting at (row0, col0) of `name` by its block scales, if any
  // (FP8 `_scale_inv` blocks or MXFP4 `_scale` groups).
  void ApplyBlockScales(const std::string& name, const Shape& expected, std::int64_t row0, std::int64_t col0,
                        const Buffer& slice, int block) const;

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Location> where_;
};

}  // namespace fission::io
