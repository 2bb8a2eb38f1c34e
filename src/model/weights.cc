#include "model/weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "tensor/quantize.h"

namespace fission::model {
namespace {

constexpr std::int64_t kFp8Block = 128;

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A slice that starts on a block boundary and ends on one or at the end of the dimension.
bool BlockAligned(Range r, std::int64_t full) {
  return r.begin % kFp8Block == 0 && (r.stop(full) % kFp8Block == 0 || r.stop(full) == full);
}

}  // namespace

Shape StackedShape(const std::vector<StackedPart>& parts) {
  FISSION_CHECK(!parts.empty(), "a stacked weight of no parts");
  std::int64_t rows = 0;
  for (const StackedPart& p : parts) {
    FISSION_CHECK(p.shape.rank() == 2 && p.shape[1] == parts[0].shape[1], p.name, " ", p.shape.ToString(),
                  " cannot be stacked under ", parts[0].name, " ", parts[0].shape.ToString());
    rows += p.size();
  }
  return Shape{rows, parts[0].shape[1]};
}

Range EvenPart(std::int64_t total, int n, int r, const char* what) {
  if (total % n != 0) Fail(what, " (", total, ") is not divisible by the ", n, " ranks that share it");
  const std::int64_t part = total / n;
  return {r * part, (r + 1) * part};
}

WeightLoader::WeightLoader(const io::Checkpoint* checkpoint, kernels::Backend& backend, std::uint64_t seed,
                           DType matrix_dtype)
    : checkpoint_(checkpoint), backend_(backend), matrix_dtype_(matrix_dtype), rng_(seed) {
  FISSION_CHECK(matrix_dtype == DType::kF32 || (matrix_dtype == DType::kBF16 && backend.device().type != DeviceType::kCpu),
                "weights are fp32 on the CPU backend and fp32 or bf16 on a device");
}

Buffer WeightLoader::ToBackend(Buffer host, bool keep_f32) {
  if (backend_.device().type == DeviceType::kCpu) return host;
  if (host.tensor().dtype == DType::kBF16) {
    Buffer device(DType::kBF16, host.tensor().shape, backend_.allocator());
    backend_.CopyBytesFromHost(host.ptr<std::uint8_t>(), device);
    return device;
  }
  const DType dtype = host.tensor().shape.rank() == 2 && !keep_f32 ? matrix_dtype_ : DType::kF32;
  Buffer device(dtype, host.tensor().shape, backend_.allocator());
  backend_.CopyFromHost(host.ptr<float>(), device);
  return device;
}

bool WeightLoader::KeepsStoredBytes(const std::string& name, const Shape& shape) const {
  if (dummy() || backend_.device().type == DeviceType::kCpu || matrix_dtype_ != DType::kBF16 || shape.rank() != 2)
    return false;
  const io::TensorInfo& info = checkpoint_->Info(name);
  return info.dtype == DType::kBF16 && info.shape == shape;
}

void WeightLoader::UploadStoredRows(const std::string& name, const Shape& shape, Range rows, const Tensor& dst) {
  const auto* base = static_cast<const std::uint8_t*>(checkpoint_->View(name).data);
  backend_.CopyBytesFromHost(base + DTypeBytes(DType::kBF16, rows.begin * shape[1]), dst);
}

Buffer WeightLoader::ReadCols(const std::string& name, const Shape& shape, Range cols) const {
  const std::int64_t c0 = cols.begin, c1 = cols.stop(shape[1]);
  if (KeepsStoredBytes(name, shape)) return checkpoint_->LoadRaw(name, shape, 0, shape[0], c0, c1);
  return checkpoint_->LoadF32Cols(name, shape, c0, c1);
}

Buffer WeightLoader::Random(const Shape& shape, float scale) {
  if (!device_fill_) return ToBackend(RandomHost(shape, scale));
  Buffer device(shape.rank() == 2 ? matrix_dtype_ : DType::kF32, shape, backend_.allocator());
  device_fill_(device.tensor(), scale * std::sqrt(3.0f), rng_());
  return device;
}

Buffer WeightLoader::RandomHost(const Shape& shape, float scale) {
  Buffer host(DType::kF32, shape);
  std::normal_distribution<float> normal(0.0f, scale);
  for (std::int64_t i = 0; i < shape.numel(); ++i) host.ptr<float>()[i] = normal(rng_);
  return host;
}

Buffer WeightLoader::Load(const std::string& name, const Shape& shape, Range rows) {
  const std::int64_t full_rows = shape.rank() == 0 ? 1 : shape[0];
  if (dummy()) {
    Shape slice = shape;
    if (slice.rank() > 0) slice[0] = rows.size(full_rows);
    const float fan_in = shape.rank() >= 2 ? static_cast<float>(shape[-1]) : 1.0f;
    return Random(slice, 1.0f / std::sqrt(fan_in));
  }
  if (KeepsStoredBytes(name, shape)) {
    Buffer device(DType::kBF16, Shape{rows.size(full_rows), shape[1]}, backend_.allocator());
    UploadStoredRows(name, shape, rows, device);
    return device;
  }
  return ToBackend(checkpoint_->LoadF32Rows(name, shape, rows.begin, rows.stop(full_rows)));
}

Buffer WeightLoader::LoadF32(const std::string& name, const Shape& shape) {
  if (dummy()) {
    const float fan_in = shape.rank() >= 2 ? static_cast<float>(shape[-1]) : 1.0f;
    return ToBackend(RandomHost(shape, 1.0f / std::sqrt(fan_in)), /*keep_f32=*/true);
  }
  return ToBackend(checkpoint_->LoadF32Rows(name, shape, 0, shape.rank() == 0 ? 1 : shape[0]), /*keep_f32=*/true);
}

Buffer WeightLoader::LoadCols(const std::string& name, const Shape& shape, Range cols) {
  if (dummy()) return Random(Shape{shape[0], cols.size(shape[1])}, 1.0f / std::sqrt(static_cast<float>(shape[1])));
  return ToBackend(ReadCols(name, shape, cols));
}

Buffer WeightLoader::LoadNorm(const std::string& name, std::int64_t size) { return LoadVector(name, size, 1.0f); }

Buffer WeightLoader::LoadBias(const std::string& name, std::int64_t size) { return LoadVector(name, size, 0.0f); }

std::vector<std::int32_t> WeightLoader::LoadIndexTable(const std::string& name, const Shape& shape, std::int64_t bound) {
  const std::int64_t rows = shape[0], cols = shape[1];
  std::vector<std::int32_t> table(static_cast<std::size_t>(rows * cols));
  if (dummy()) {
    for (std::int64_t i = 0; i < rows * cols; ++i) table[i] = static_cast<std::int32_t>(i % bound);
    return table;
  }
  const Tensor stored = checkpoint_->View(name);
  if (!(stored.shape == shape) || (stored.dtype != DType::kI32 && stored.dtype != DType::kI64))
    Fail(checkpoint_->FileOf(name), ": tensor '", name, "' is ", DTypeName(stored.dtype), " ", stored.shape.ToString(),
         ", expected I32 or I64 ", shape.ToString());
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    const std::int64_t v = stored.dtype == DType::kI32 ? stored.ptr<std::int32_t>()[i] : stored.ptr<std::int64_t>()[i];
    if (v < 0 || v >= bound)
      Fail(checkpoint_->FileOf(name), ": tensor '", name, "' row ", i / cols, " holds ", v, ", outside [0, ", bound, ")");
    table[i] = static_cast<std::int32_t>(v);
  }
  return table;
}

Buffer WeightLoader::LoadVector(const std::string& name, std::int64_t size, float dummy_value) {
  if (dummy()) {
    Buffer host(DType::kF32, Shape{size});
    for (std::int64_t i = 0; i < size; ++i) host.ptr<float>()[i] = dummy_value;
    return ToBackend(std::move(host));
  }
  return Load(name, Shape{size});
}

Buffer WeightLoader::LoadStacked(const std::string& first, const std::string& second, const Shape& each, Range rows) {
  return LoadStacked({{first, each, rows}, {second, each, rows}});
}

Buffer WeightLoader::LoadStacked(const std::vector<StackedPart>& parts) {
  const Shape stacked = StackedShape(parts);
  // Stack on the host, then move once.
  const bool cpu = backend_.device().type == DeviceType::kCpu;
  if (dummy() && device_fill_) return Random(stacked, 1.0f / std::sqrt(static_cast<float>(stacked[1])));
  const bool stored = std::all_of(parts.begin(), parts.end(),
                                  [&](const StackedPart& p) { return KeepsStoredBytes(p.name, p.shape); });
  if (!cpu && stored) {
    Buffer device(DType::kBF16, stacked, backend_.allocator());
    std::int64_t row = 0;
    for (const StackedPart& p : parts) {
      UploadStoredRows(p.name, p.shape, p.rows, device.tensor().Rows(row, row + p.size()));
      row += p.size();
    }
    return device;
  }
  Buffer host = StackedHost(parts);
  return cpu ? std::move(host) : ToBackend(std::move(host));
}

Buffer WeightLoader::StackedHost(const std::vector<StackedPart>& parts) {
  const Shape stacked = StackedShape(parts);
  Buffer host(DType::kF32, stacked);
  std::int64_t row = 0;
  for (const StackedPart& p : parts) {
    const Buffer part = HostSlice(p.name, p.shape, p.rows, {});
    std::memcpy(host.ptr<float>() + row * stacked[1], part.ptr<float>(), part.tensor().bytes());
    row += p.size();
  }
  return host;
}

bool WeightLoader::KeptFp8(const std::string& name) const {
  if (!keep_fp8_) return false;
  if (dummy()) return true;
  return !checkpoint_->Fp8ScaleOf(name).empty() && checkpoint_->Info(name).dtype == DType::kF8E4M3;
}

WeightLoader::HostFp8 WeightLoader::ReadFp8(const std::string& name, const Shape& shape, Range rows,
                                            Range cols) const {
  const std::int64_t r0 = rows.begin, r1 = rows.stop(shape[0]), c0 = cols.begin, c1 = cols.stop(shape[1]);
  HostFp8 host;
  host.shape = Shape{r1 - r0, c1 - c0};
  if (c0 == 0 && c1 == shape[1] && checkpoint_->Info(name).shape == shape)
    host.mapped = static_cast<const std::uint8_t*>(checkpoint_->View(name).data) + r0 * shape[1];
  else
    host.codes = checkpoint_->LoadRaw(name, shape, r0, r1, c0, c1);
  const std::int64_t kb = CeilDiv(shape[1], kFp8Block);
  const Buffer all = checkpoint_->LoadF32(checkpoint_->Fp8ScaleOf(name), Shape{CeilDiv(shape[0], kFp8Block), kb});
  // The blocks the slice covers (its ends are block-aligned or the matrix's ends).
  const std::int64_t b0 = r0 / kFp8Block, b1 = CeilDiv(r1, kFp8Block), g0 = c0 / kFp8Block, g1 = CeilDiv(c1, kFp8Block);
  host.scales = Buffer(DType::kF32, Shape{b1 - b0, g1 - g0});
  for (std::int64_t b = b0; b < b1; ++b)
    std::memcpy(host.scales.ptr<float>() + (b - b0) * (g1 - g0), all.ptr<float>() + b * kb + g0,
                (g1 - g0) * sizeof(float));
  return host;
}

Weight WeightLoader::UploadFp8(const std::vector<const HostFp8*>& parts) {
  const std::int64_t cols = parts[0]->shape[1], scale_cols = parts[0]->scales.tensor().shape[1];
  std::int64_t rows = 0, scale_rows = 0;
  for (const HostFp8* p : parts) {
    FISSION_CHECK(p->shape[1] == cols && p->scales.tensor().shape[1] == scale_cols, "UploadFp8: parts of other widths");
    rows += p->shape[0];
    scale_rows += p->scales.tensor().shape[0];
  }
  Weight w;
  w.format = WeightFormat::Fp8Block128();
  w.values = Buffer(DType::kF8E4M3, Shape{rows, cols}, backend_.allocator());
  Buffer scales(DType::kF32, Shape{scale_rows, scale_cols});
  std::int64_t row = 0, scale_row = 0;
  for (const HostFp8* p : parts) {
    backend_.CopyBytesFromHost(p->Codes(), w.values.tensor().Rows(row, row + p->shape[0]));
    std::memcpy(scales.ptr<float>() + scale_row * scale_cols, p->scales.ptr<float>(), p->scales.tensor().bytes());
    row += p->shape[0];
    scale_row += p->scales.tensor().shape[0];
  }
  w.scales = Buffer(DType::kF32, scales.tensor().shape, backend_.allocator());
  backend_.CopyFromHost(scales.ptr<float>(), w.scales);
  return w;
}

Weight WeightLoader::RandomFp8(const Shape& shape, float scale) {
  // Codes of uniform values over ±448 times bound/448 are uniform over ±bound (up to e4m3
  // rounding): the standard deviation of the other dummy matrices.
  const float bound = scale * std::sqrt(3.0f);
  const std::uint64_t seed = rng_();
  Weight w;
  w.format = WeightFormat::Fp8Block128();
  w.values = Buffer(DType::kF8E4M3, shape, backend_.allocator());
  if (device_fill_) {
    device_fill_(w.values, 448.0f, seed);
  } else {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-448.0f, 448.0f);
    std::vector<float> values(shape.numel());
    for (float& v : values) v = uniform(rng);
    std::vector<std::uint8_t> codes(values.size());
    ConvertFromF32(DType::kF8E4M3, values.data(), codes.data(), shape.numel());
    backend_.CopyBytesFromHost(codes.data(), w.values);
  }
  const Shape scale_shape{CeilDiv(shape[0], kFp8Block), CeilDiv(shape[1], kFp8Block)};
  const std::vector<float> scales(scale_shape.numel(), bound / 448.0f);
  w.scales = Buffer(DType::kF32, scale_shape, backend_.allocator());
  backend_.CopyFromHost(scales.data(), w.scales);
  return w;
}

Weight WeightLoader::Dequantized(const std::string& name, Buffer weight, const std::string& why) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    Log(LogLevel::kWarning, "FP8 weights: ", name, " ", why, " do not align with the 128x128 scale blocks; loaded ",
        "dequantized as ", DTypeName(weight.tensor().dtype), " (said once: other such slices are loaded the same way)");
  return Weight::Plain(std::move(weight));
}

std::optional<WeightFormat> WeightLoader::OnlineFormatOf(const std::string& tensor) const {
  if (online_ == nullptr) return std::nullopt;
  return online_->FormatOf(ModuleOfTensor(tensor));
}

Buffer WeightLoader::HostSlice(const std::string& name, const Shape& shape, Range rows, Range cols) {
  const Shape slice{rows.size(shape[0]), cols.size(shape[1])};
  if (dummy()) return RandomHost(slice, 1.0f / std::sqrt(static_cast<float>(shape[1])));
  if (cols.begin == 0 && cols.stop(shape[1]) == shape[1])
    return checkpoint_->LoadF32Rows(name, shape, rows.begin, rows.stop(shape[0]));
  FISSION_CHECK(rows.begin == 0 && rows.stop(shape[0]) == shape[0], name, ": a slice of rows and columns");
  return checkpoint_->LoadF32Cols(name, shape, cols.begin, cols.stop(shape[1]));
}

Weight WeightLoader::Quantized(const Buffer& host, const WeightFormat& format) {
  const Shape& shape = host.tensor().shape;
  QuantizedMatrix q = QuantizeMatrix(host.ptr<float>(), shape[0], shape[1], format);
  if (backend_.device().type == DeviceType::kCpu) return {std::move(q.codes), std::move(q.scales), format};
  Weight w{Buffer(format.values, shape, backend_.allocator()),
           Buffer(format.scales, q.scales.tensor().shape, backend_.allocator()), format};
  backend_.CopyBytesFromHost(q.codes.ptr<std::uint8_t>(), w.values);
  backend_.CopyBytesFromHost(q.scales.ptr<std::uint8_t>(), w.scales);
  return w;
}

std::optional<WeightFormat> WeightLoader::KeptFormatOf(const std::string& name) const {
  if (std::optional<WeightFormat> online = OnlineFormatOf(name)) return online;
  if (KeptMxfp4(name)) return *kept_mxfp4_experts_;
  if (KeptFp8(name)) return WeightFormat::Fp8Block128();
  return std::nullopt;
}

bool WeightLoader::KeptMxfp4(const std::string& name) const {
  // The routed experts' module (ModuleOfTensor drops ".<e>.<projection>"): "....experts", which a
  // shared expert's ("....shared_experts.w1") is not.
  const std::string module = ModuleOfTensor(name);
  if (!kept_mxfp4_experts_ || !module.ends_with(".experts")) return false;
  return dummy() || checkpoint_->IsMxfp4(name);
}

Weight WeightLoader::UploadMxfp4(io::Checkpoint::Mxfp4Slice host) {
  const WeightFormat format = *kept_mxfp4_experts_;
  if (backend_.device().type == DeviceType::kCpu) return {std::move(host.codes), std::move(host.scales), format};
  Weight w{Buffer(DType::kF4E2M1, host.codes.tensor().shape, backend_.allocator()),
           Buffer(DType::kE8M0, host.scales.tensor().shape, backend_.allocator()), format};
  backend_.CopyBytesFromHost(host.codes.ptr<std::uint8_t>(), w.values);
  backend_.CopyBytesFromHost(host.scales.ptr<std::uint8_t>(), w.scales);
  return w;
}

Weight WeightLoader::RandomMxfp4(const Shape& shape, float scale) {
  const WeightFormat format = *kept_mxfp4_experts_;
  if (!device_fill_) return Quantized(RandomHost(shape, scale), format);
  // Uniform values over ±b · 2^e have the standard deviation of the other dummy matrices when
  // b · 2^e = scale · √3; e is chosen so that b lies in (3, 6], where e2m1's codes spread over the
  // whole range (the rounding moves the deviation by a few percent).
  const float bound = scale * std::sqrt(3.0f);
  const int e = static_cast<int>(std::ceil(std::log2(bound / 6.0f)));
  Weight w{Buffer(DType::kF4E2M1, shape, backend_.allocator()),
           Buffer(DType::kE8M0, Shape{shape[0], CeilDiv(shape[1], 32)}, backend_.allocator()), format};
  device_fill_(w.values, std::min(6.0f, std::ldexp(bound, -e)), rng_());
  const std::vector<std::uint8_t> scales(w.scales.tensor().numel(), static_cast<std::uint8_t>(std::clamp(e + 127, 0, 254)));
  backend_.CopyBytesFromHost(scales.data(), w.scales);
  return w;
}

Weight WeightLoader::LoadLinear(const std::string& name, const Shape& shape, Range rows) {
  if (const auto format = OnlineFormatOf(name)) return Quantized(HostSlice(name, shape, rows, {}), *format);
  if (!KeptFp8(name)) return Weight::Plain(Load(name, shape, rows));
  if (!BlockAligned(rows, shape[0]))
    return Dequantized(name, Load(name, shape, rows), StrCat("rows ", rows.begin, "..", rows.stop(shape[0])));
  if (dummy()) return RandomFp8(Shape{rows.size(shape[0]), shape[1]}, 1.0f / std::sqrt(static_cast<float>(shape[1])));
  const HostFp8 host = ReadFp8(name, shape, rows, {});
  return UploadFp8({&host});
}

Weight WeightLoader::LoadLinearCols(const std::string& name, const Shape& shape, Range cols, bool allow_fp8) {
  if (const auto format = OnlineFormatOf(name)) return Quantized(HostSlice(name, shape, {}, cols), *format);
  if (allow_fp8 && KeptMxfp4(name)) {
    const std::int64_t c0 = cols.begin, c1 = cols.stop(shape[1]);
    if (dummy()) return RandomMxfp4(Shape{shape[0], c1 - c0}, 1.0f / std::sqrt(static_cast<float>(shape[1])));
    if (c0 % 32 == 0 && (c1 % 32 == 0 || c1 == shape[1]))
      return UploadMxfp4(checkpoint_->LoadMxfp4(name, shape, 0, shape[0], c0, c1));
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      Log(LogLevel::kWarning, "MXFP4 experts: ", name, " columns ", c0, "..", c1, " do not align with the 1x32 ",
          "scale groups; quantized again from the decoded values with the slice's own scales (said once)");
    return Quantized(HostSlice(name, shape, {}, cols), *kept_mxfp4_experts_);
  }
  if (!allow_fp8 || !KeptFp8(name)) return Weight::Plain(LoadCols(name, shape, cols));
  if (!BlockAligned(cols, shape[1]))
    return Dequantized(name, LoadCols(name, shape, cols), StrCat("columns ", cols.begin, "..", cols.stop(shape[1])));
  if (dummy()) return RandomFp8(Shape{shape[0], cols.size(shape[1])}, 1.0f / std::sqrt(static_cast<float>(shape[1])));
  const HostFp8 host = ReadFp8(name, shape, {}, cols);
  return UploadFp8({&host});
}

Weight WeightLoader::LoadLinearStacked(const std::string& first, const std::string& second, const Shape& each,
                                       Range rows) {
  const std::vector<StackedPart> parts{{first, each, rows}, {second, each, rows}};
  if (std::optional<Weight> stacked = LoadLinearStacked(parts)) return std::move(*stacked);
  // OnlineQuantPlan::Resolve made gate and up agree, so only FP8 blocks the slice cuts are left.
  if (!KeptFp8(first) || !KeptFp8(second)) return Weight::Plain(LoadStacked(parts));
  return Dequantized(first, LoadStacked(parts),
                     StrCat("(stacked with ", second, ") rows ", rows.begin, "..", rows.stop(each[0])));
}

std::optional<Weight> WeightLoader::LoadLinearStacked(const std::vector<StackedPart>& parts) {
  const Shape stacked = StackedShape(parts);
  const std::optional<WeightFormat> kept = KeptFormatOf(parts[0].name);
  for (const StackedPart& p : parts)
    if (KeptFormatOf(p.name) != kept) return std::nullopt;
  if (const auto format = OnlineFormatOf(parts[0].name)) return Quantized(StackedHost(parts), *format);
  if (KeptMxfp4(parts[0].name)) return StackedMxfp4(parts);
  if (!kept) return Weight::Plain(LoadStacked(parts));
  // Each part must start on a block boundary of the stacked matrix too.
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const StackedPart& p = parts[i];
    if (!BlockAligned(p.rows, p.shape[0]) || (i + 1 < parts.size() && p.size() % kFp8Block != 0)) return std::nullopt;
  }
  if (dummy()) return RandomFp8(stacked, 1.0f / std::sqrt(static_cast<float>(stacked[1])));
  std::vector<HostFp8> host;
  std::vector<const HostFp8*> pointers;
  for (const StackedPart& p : parts) host.push_back(ReadFp8(p.name, p.shape, p.rows, {}));
  for (const HostFp8& h : host) pointers.push_back(&h);
  return UploadFp8(pointers);
}

// Row slices keep whole 1x32 groups; the stacked weight is the codes and the scales stacked.
Weight WeightLoader::StackedMxfp4(const std::vector<StackedPart>& parts) {
  const Shape stacked = StackedShape(parts);
  if (dummy()) return RandomMxfp4(stacked, 1.0f / std::sqrt(static_cast<float>(stacked[1])));
  std::vector<io::Checkpoint::Mxfp4Slice> slices;
  for (const StackedPart& p : parts)
    slices.push_back(checkpoint_->LoadMxfp4(p.name, p.shape, p.rows.begin, p.rows.stop(p.shape[0]), 0, p.shape[1]));
  io::Checkpoint::Mxfp4Slice out{Buffer(DType::kF4E2M1, stacked),
                                 Buffer(DType::kE8M0, Shape{stacked[0], slices[0].scales.tensor().shape[1]})};
  std::size_t codes = 0, scales = 0;
  for (const io::Checkpoint::Mxfp4Slice& slice : slices) {
    std::memcpy(out.codes.ptr<std::uint8_t>() + codes, slice.codes.ptr<std::uint8_t>(), slice.codes.tensor().bytes());
    std::memcpy(out.scales.ptr<std::uint8_t>() + scales, slice.scales.ptr<std::uint8_t>(), slice.scales.tensor().bytes());
    codes += slice.codes.tensor().bytes();
    scales += slice.scales.tensor().bytes();
  }
  return UploadMxfp4(std::move(out));
}

}  // namespace fission::model
