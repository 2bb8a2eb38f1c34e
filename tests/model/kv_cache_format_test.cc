// The latent cache's entry per format on DeepSeek-V3's real dimensions: FP8 (FlashMLA's layout)
// against bf16, i.e. how many more tokens the same memory holds with --kv-cache-dtype fp8_e4m3.
#include <gtest/gtest.h>

#include <numeric>

#include "io/model_config.h"
#include "model/layers/mla_attention.h"

namespace fission::model {
namespace {

std::size_t EntryBytes(const std::vector<CacheField>& fields) {
  return std::accumulate(fields.begin(), fields.end(), std::size_t{0},
                         [](std::size_t sum, const CacheField& f) { return sum + f.bytes(); });
}

TEST(KvCacheFormat, Fp8LatentsHoldAlmostTwiceTheTokens) {
  const io::ModelConfig c = io::LoadModelConfig(std::string(FISSION_SOURCE_DIR) + "/bench/configs/deepseek-v3");
  const std::size_t bf16 = EntryBytes(MlaAttention::LatentFields(c, kernels::LatentFormat::kExact, DType::kBF16));
  const std::size_t fp8 = EntryBytes(MlaAttention::LatentFields(c, kernels::LatentFormat::kFp8, DType::kBF16));
  EXPECT_EQ(bf16, 1152u);  // 576 bf16 values
  EXPECT_EQ(fp8, 656u);    // 512 e4m3 codes, 4 fp32 scales, 64 bf16 rope values
  EXPECT_NEAR(static_cast<double>(bf16) / static_cast<double>(fp8), 1.756, 1e-3);
}

}  // namespace
}  // namespace fission::model
