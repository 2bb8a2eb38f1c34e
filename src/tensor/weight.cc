#include "tensor/weight.h"

#include "base/error.h"

namespace fission {

std::string WeightFormat::Name() const {
  std::string name(DTypeName(values));
  if (!quantized()) return name;
  const std::string cols = block_cols == kWholeRow ? std::string("row") : std::to_string(block_cols);
  name = StrCat(name, " ", block_rows, "x", cols, " ", DTypeName(scales), " scales");
  if (e4m3_act_block > 0) name = StrCat(name, ", e4m3 1x", e4m3_act_block, " activations");
  return name;
}

void WeightView::Check(const char* what) const {
  if (values.rank() != 2 || values.dtype != format.values)
    Fail(what, ": weight of shape ", values.shape.ToString(), " and dtype ", DTypeName(values.dtype),
         " does not match its format ", format.Name());
  if (!format.quantized()) {
    if (scales.data != nullptr) Fail(what, ": a plain ", format.Name(), " weight has scales");
    return;
  }
  const Shape grid{(rows() + format.block_rows - 1) / format.block_rows,
                   (cols() + format.block_cols - 1) / format.block_cols};
  if (scales.dtype != format.scales || !(scales.shape == grid))
    Fail(what, ": scales of shape ", scales.shape.ToString(), " and dtype ", DTypeName(scales.dtype), " for a ",
         values.shape.ToString(), " weight of format ", format.Name(), " (expected ", grid.ToString(), ")");
}

WeightFormat CommonFormat(std::span<const WeightView> a, std::span<const WeightView> b, const char* what) {
  if (a.empty()) Fail(what, ": no weights");
  const WeightFormat format = a[0].format;
  for (std::span<const WeightView> set : {a, b})
    for (std::size_t i = 0; i < set.size(); ++i)
      if (!(set[i].format == format))
        Fail(what, ": weight ", i, " is ", set[i].format.Name(), " where the first is ", format.Name(),
             "; one operation takes weights of one format");
  return format;
}

std::vector<Tensor> ValuesOf(std::span<const WeightView> weights) {
  std::vector<Tensor> out;
  out.reserve(weights.size());
  for (const WeightView& w : weights) out.push_back(w.values);
  return out;
}

std::vector<Tensor> ScalesOf(std::span<const WeightView> weights) {
  std::vector<Tensor> out;
  out.reserve(weights.size());
  for (const WeightView& w : weights) out.push_back(w.scales);
  return out;
}

}  // namespace fission
