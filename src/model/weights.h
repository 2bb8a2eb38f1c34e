// Loads a model's tensors onto a backend: from a checkpoint (dequantizing FP8 blocks, or keeping
// them as stored for FP8 products on a device), or as random "dummy" weights when only the shapes
// are known (--load-format dummy). Under tensor parallelism a rank asks for its slice only: a
// range of rows (column-parallel layers) or of columns (row-parallel layers), read from the memory
// map without touching the rest.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/online_quant.h"
#include "model/weight.h"

namespace fission::model {

// A half-open range of one dimension; {0, -1} means all of it.
struct Range {
  std::int64_t begin = 0;
  std::int64_t end = -1;
  std::int64_t size(std::int64_t full) const { return (end < 0 ? full : end) - begin; }
  std::int64_t stop(std::int64_t full) const { return end < 0 ? full : end; }
};

// The r-th of n equal parts of [0, total); an Error when n does not divide total.
Range EvenPart(std::int64_t total, int n, int r, const char* what);

// Rows `rows` of the weight `name` of full shape `shape`: one part of a matrix stacked by rows.
struct StackedPart {
  std::string name;
  Shape shape;
  Range rows = {};
  std::int64_t size() const { return rows.size(shape[0]); }
};
// The shape of the parts stacked; an Error when their widths differ.
Shape StackedShape(const std::vector<StackedPart>& parts);

class WeightLoader {
 public:
  // `checkpoint` null means dummy weights from `seed`. Matrices (2-D weights) are stored on the
  // backend as `matrix_dtype` (fp32 or bf16); vectors (norms, biases) stay fp32.
  WeightLoader(const io::Checkpoint* checkpoint, kernels::Backend& backend, std::uint64_t seed = 0,
               DType matrix_dtype = DType::kF32);

  // A weight of full shape `shape`, or rows `rows` of it. A missing tensor or wrong shape is an
  // Error naming the file and tensor.
  Buffer Load(const std::string& name, const Shape& shape, Range rows = {});
  // Like Load, but kept in fp32 whatever the matrix dtype (the MoE router: a bf16 router flips
  // expert choices at near ties).
  Buffer LoadF32(const std::string& name, const Shape& shape);
  // Columns `cols` of a 2-D weight.
  Buffer LoadCols(const std::string& name, const Shape& shape, Range cols);
  // Norm weights: dummy ones are ones rather than random.
  Buffer LoadNorm(const std::string& name, std::int64_t size);
  // Bias vectors: dummy ones are zeros.
  Buffer LoadBias(const std::string& name, std::int64_t size);
  // An integer table [rows, cols] on the host (DeepSeek-V4's tid2eid, I32 or I64 in checkpoints),
  // every value checked to lie in [0, bound). Dummy: row r holds (r·cols + k) % bound, distinct
  // within a row when cols <= bound.
  std::vector<std::int32_t> LoadIndexTable(const std::string& name, const Shape& shape, std::int64_t bound);
  // Rows `rows` of two same-shaped weights stacked into one (gate over up).
  Buffer LoadStacked(const std::string& first, const std::string& second, const Shape& each, Range rows = {});
  // The parts stacked by rows, in order.
  Buffer LoadStacked(const std::vector<StackedPart>& parts);
  // Linear layers' weights. Once KeepFp8() was called, a matrix the checkpoint stores as FP8 (every
  // such matrix when dummy) stays e4m3 with its block scales, provided the slice starts and ends on
  // 128-row (or 128-column) block boundaries; otherwise it is dequantized like Load does (logged
  // once per process).
  Weight LoadLinear(const std::string& name, const Shape& shape, Range rows = {});
  // `allow_fp8` false dequantizes whatever is stored (the routed experts' down projections follow
  // their gate_up, since the expert operation takes one kind for both).
  Weight LoadLinearCols(const std::string& name, const Shape& shape, Range cols, bool allow_fp8 = true);
  // Gate over up, as LoadStacked; FP8 only when each half is a whole number of blocks.
  Weight LoadLinearStacked(const std::string& first, const std::string& second, const Shape& each,
                                 Range rows = {});
  // The parts stacked by rows into one weight in the format each would load in alone (MLA's q_a_proj
  // over kv_a_proj_with_mqa: one product for both), or nullopt when that cannot be: they would load
  // in different formats (an online plan that gives them different ones, FP8 kept for some only),
  // or FP8 blocks that a part's slice cuts or that straddle two parts.
  std::optional<Weight> LoadLinearStacked(const std::vector<StackedPart>& parts);
  // Keep FP8 weights as stored (a device backend and a checkpoint with 128×128 block scales).
  void KeepFp8() { keep_fp8_ = true; }
  // Keep the routed experts (a module ending in ".experts": model.layers.N.mlp.experts, DeepSeek-V4's
  // layers.N.ffn.experts) that the checkpoint stores as MXFP4 as stored, codes and e8m0 scales, in
  // `format` (Mxfp4: a Quark checkpoint's experts, whose products quantize their activations;
  // Mxfp4A8: DeepSeek-V4's, whose products quantize them to e4m3 per 1x128). A down projection whose column slice does not
  // start and end on a 1x32 group is quantized again from its decoded values (the slice's own
  // scales, logged once); dummy experts are drawn in the format (codes on the device when it can
  // draw them, else drawn and quantized on the host). Other modules load as before.
  void KeepMxfp4Experts(const WeightFormat& format = WeightFormat::Mxfp4()) { kept_mxfp4_experts_ = format; }
  // Online quantization (model/online_quant.h): the Linear weights of a module the plan names are
  // read in fp32 (dequantized from the checkpoint's format if need be, or drawn when dummy), this
  // rank's slice quantized into the plan's format. It takes precedence over KeepFp8. The plan must
  // outlive the loading.
  void SetOnlineQuant(const OnlineQuantPlan* plan) { online_ = plan; }
  // The format LoadLinear keeps the matrix `name` in when it keeps one (an online plan's, MXFP4
  // experts kept as stored, FP8 kept as stored), read from the checkpoint's metadata alone;
  // nullopt when it loads plain values. A kept format may still fall back to plain values for a
  // slice off the format's blocks.
  std::optional<WeightFormat> KeptFormatOf(const std::string& name) const;
  bool dummy() const { return checkpoint_ == nullptr; }
  // A loader of `checkpoint` with this one's settings (matrix dtype, FP8 policy, device fill): a
  // draft layer from its own checkpoint directory.
  WeightLoader ForCheckpoint(const io::Checkpoint* checkpoint) const {
    WeightLoader other(checkpoint, backend_, 0, matrix_dtype_);
    other.device_fill_ = device_fill_;
    other.keep_fp8_ = keep_fp8_;
    other.kept_mxfp4_experts_ = kept_mxfp4_experts_;
    return other;
  }
  // Dummy matrices drawn on the device instead of the host: fill(tensor, bound, seed) writes
  // uniform values in [-bound, bound) (the same standard deviation as the host's normal draws).
  using DeviceFill = std::function<void(const Tensor&, float, std::uint64_t)>;
  void SetDeviceFill(DeviceFill fill) { device_fill_ = std::move(fill); }
  kernels::Backend& backend() { return backend_; }

 private:
  // host: fp32 (converted to the device's matrix dtype on the way) or ReadCols's stored bf16.
  Buffer ToBackend(Buffer host, bool keep_f32 = false);
  // Whether a matrix goes to the device as its stored bytes: bf16 in the checkpoint and on the
  // device (no fp32 round trip, the same values). Its rows are copied straight from the
  // checkpoint's map into `dst` (UploadStoredRows); a column slice takes one host copy (ReadCols,
  // which gives fp32 for every other matrix).
  bool KeepsStoredBytes(const std::string& name, const Shape& shape) const;
  void UploadStoredRows(const std::string& name, const Shape& shape, Range rows, const Tensor& dst);
  Buffer ReadCols(const std::string& name, const Shape& shape, Range cols) const;
  // A vector from the checkpoint, or `dummy_value` everywhere when dummy.
  Buffer LoadVector(const std::string& name, std::int64_t size, float dummy_value);
  // A dummy matrix of standard deviation `scale`, on the backend (drawn on the device if it can).
  Buffer Random(const Shape& shape, float scale);
  Buffer RandomHost(const Shape& shape, float scale);
  // FP8 codes and block scales of a slice, on the host. The codes of a slice of whole rows are
  // not copied: `mapped` points at them in the checkpoint's map (valid while it is open).
  struct HostFp8 {
    Buffer codes, scales;
    const std::uint8_t* mapped = nullptr;
    Shape shape;  // of the codes
    const std::uint8_t* Codes() const { return mapped != nullptr ? mapped : codes.ptr<std::uint8_t>(); }
  };
  bool KeptFp8(const std::string& name) const;
  HostFp8 ReadFp8(const std::string& name, const Shape& shape, Range rows, Range cols) const;
  // The parts stacked by rows (gate over up) into one weight on the backend.
  Weight UploadFp8(const std::vector<const HostFp8*>& parts);
  // Dummy FP8 weights of standard deviation `scale`: uniform codes over ±448 and one scale for
  // every block.
  Weight RandomFp8(const Shape& shape, float scale);
  Weight Dequantized(const std::string& name, Buffer weight, const std::string& why);
  // Online quantization: the format of a tensor's module, host fp32 slices, and the upload.
  std::optional<WeightFormat> OnlineFormatOf(const std::string& tensor) const;
  Buffer HostSlice(const std::string& name, const Shape& shape, Range rows, Range cols);
  Weight Quantized(const Buffer& host, const WeightFormat& format);
  // MXFP4 routed experts kept as stored (KeepMxfp4Experts), in the kept format.
  bool KeptMxfp4(const std::string& name) const;
  Weight UploadMxfp4(io::Checkpoint::Mxfp4Slice host);
  Weight StackedMxfp4(const std::vector<StackedPart>& parts);
  // The parts' fp32 values stacked on the host (HostSlice of each).
  Buffer StackedHost(const std::vector<StackedPart>& parts);
  // Dummy kept experts of standard deviation about `scale`: uniform values rounded to e2m1 codes
  // (on the device) and one e8m0 scale for every group.
  Weight RandomMxfp4(const Shape& shape, float scale);

  const io::Checkpoint* checkpoint_;
  kernels::Backend& backend_;
  DType matrix_dtype_;
  std::mt19937_64 rng_;
  DeviceFill device_fill_;
  bool keep_fp8_ = false;
  std::optional<WeightFormat> kept_mxfp4_experts_;
  const OnlineQuantPlan* online_ = nullptr;
};

}  // namespace fission::model
