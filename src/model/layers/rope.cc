#include "model/layers/rope.h"

#include <algorithm>
#include <cmath>

namespace fission::model {
namespace {

double YarnMscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// The dimension index at which a frequency completes `rotations` turns over the original context.
double CorrectionDim(double rotations, double dim, double base, double max_positions) {
  return dim * std::log(max_positions / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

}  // namespace

RopeTables ComputeRope(const io::ModelConfig& config) { return ComputeRope(config.rope, config.qk_rope_head_dim); }

RopeTables ComputeRope(const io::RopeConfig& rope, std::int64_t dim) {
  const std::int64_t half = dim / 2;
  RopeTables tables;
  tables.inv_freq.resize(half);
  std::vector<float> extrapolation(half), interpolation(half);
  for (std::int64_t i = 0; i < half; ++i) {
    // Same float32 arithmetic as the reference: base ** (2i / dim), then reciprocals.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float pos_freq = std::pow(static_cast<float>(rope.theta), exponent);
    extrapolation[i] = 1.0f / pos_freq;
    interpolation[i] = 1.0f / (static_cast<float>(rope.factor) * pos_freq);
  }
  if (rope.type != "yarn") {
    tables.inv_freq = extrapolation;
    return tables;
  }
  double low = CorrectionDim(rope.beta_fast, dim, rope.theta, rope.original_max_position_embeddings);
  double high = CorrectionDim(rope.beta_slow, dim, rope.theta, rope.original_max_position_embeddings);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  for (std::int64_t i = 0; i < half; ++i) {
    const float ramp = std::clamp((static_cast<float>(i) - static_cast<float>(low)) /
                                      (static_cast<float>(high) - static_cast<float>(low)), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    tables.inv_freq[i] = interpolation[i] * (1.0f - extrapolation_factor) + extrapolation[i] * extrapolation_factor;
  }
  if (rope.attention_factor) {
    tables.attention_scaling = static_cast<float>(*rope.attention_factor);
  } else if (rope.mscale != 0.0 && rope.mscale_all_dim != 0.0) {
    tables.attention_scaling =
        static_cast<float>(YarnMscale(rope.factor, rope.mscale) / YarnMscale(rope.factor, rope.mscale_all_dim));
  } else {
    tables.attention_scaling = static_cast<float>(YarnMscale(rope.factor, 1.0));
  }
  return tables;
}

float MlaSoftmaxScale(const io::ModelConfig& config) {
  double scale = 1.0 / std::sqrt(static_cast<double>(config.qk_head_dim()));
  if (config.rope.type == "yarn" && config.rope.mscale_all_dim != 0.0) {
    const double m = YarnMscale(config.rope.factor, config.rope.mscale_all_dim);
    scale = scale * m * m;
  }
  return static_cast<float>(scale);
}

Buffer UploadInvFreq(const RopeTables& rope, kernels::Backend& backend) {
  Buffer host = MakeF32Buffer(Shape{static_cast<std::int64_t>(rope.inv_freq.size())}, rope.inv_freq);
  Buffer device(DType::kF32, host.tensor().shape, backend.allocator());
  backend.CopyFromHost(host.ptr<float>(), device);
  return device;
}

}  // namespace fission::model
