// The operation table on the CUDA backend (testing/op_cases.h): every case against the CPU
// reference on fresh random inputs, at the test size and twice it, within each case's device
// bound.
#include <gtest/gtest.h>

#include "kernels_cuda/cuda_testlib.h"
#include "testing/op_cases.h"

namespace fission::kernels::cuda::testing {
namespace {

using fission::testing::CompareOutputs;
using fission::testing::OpCase;
using fission::testing::OpCases;
using fission::testing::RunCase;
using fission::testing::Tensors;

TEST(CudaOpTable, EveryCaseMatchesTheCpu) {
  FISSION_REQUIRE_GPU();
  for (const OpCase& c : OpCases()) {
    SCOPED_TRACE(c.name);
    for (int scale : {1, 2}) {
      std::mt19937_64 rng(100 + scale);
      const Tensors in = c.inputs(rng, scale);
      const Tensors want = RunCase(c, Cpu(), in);
      const Tensors got = RunCase(c, Gpu(), in);
      EXPECT_EQ(CompareOutputs(c, got, want, c.device_tolerance), "") << "scale " << scale;
    }
  }
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
