// The "no GPU" verdict of the GPU tests (support/gpu_requirement.h): skipped by default, failed
// where MIXPREC_REQUIRE_GPU=1 says the machine has a GPU.
#include "support/gpu_requirement.h"

#include <gtest/gtest.h>

namespace mixprec::testing {
namespace {

TEST(GpuRequirementTest, OnlyAnExplicitOneTurnsASkipIntoAFailure) {
  EXPECT_EQ(no_gpu_verdict(nullptr), NoGpuVerdict::skip);
  EXPECT_EQ(no_gpu_verdict(""), NoGpuVerdict::skip);
  EXPECT_EQ(no_gpu_verdict("0"), NoGpuVerdict::skip);
  EXPECT_EQ(no_gpu_verdict("true"), NoGpuVerdict::skip);
  EXPECT_EQ(no_gpu_verdict("1"), NoGpuVerdict::fail);
}

}  // namespace
}  // namespace mixprec::testing
