// The gradient buckets of data-parallel training (src/distributed/gradient_buckets.h): which
// gradients share one all-reduce, and the argument checks of DataParallel's gradient reduction.
#include <gtest/gtest.h>

#include <vector>

#include "distributed/gradient_buckets.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using distributed::detail::plan_buckets;
using Plan = std::vector<std::vector<std::size_t>>;

TEST(GradientBuckets, ConsecutiveGradientsUpToTheBucketSize) {
  // 4-byte elements: 10, 20, 30 elements = 40, 80, 120 bytes.
  const std::vector<Tensor> grads{zeros(Shape{10}), zeros(Shape{4, 5}), zeros(Shape{30})};
  EXPECT_EQ(plan_buckets(grads, 1 << 20), (Plan{{0, 1, 2}}));
  EXPECT_EQ(plan_buckets(grads, 120), (Plan{{0, 1}, {2}}));
  EXPECT_EQ(plan_buckets(grads, 119), (Plan{{0}, {1}, {2}}));  // 40 + 80 > 119; 120 alone
  EXPECT_EQ(plan_buckets(grads, 40), (Plan{{0}, {1}, {2}}));
  EXPECT_EQ(plan_buckets(grads, 1), (Plan{{0}, {1}, {2}}));
}

TEST(GradientBuckets, UndefinedGradientsAreLeftOut) {
  const std::vector<Tensor> grads{Tensor(), zeros(Shape{2}), Tensor(), zeros(Shape{3})};
  EXPECT_EQ(plan_buckets(grads, 1 << 20), (Plan{{1, 3}}));
  EXPECT_TRUE(plan_buckets({Tensor()}, 8).empty());
}

TEST(GradientBuckets, BadArgumentsAreClearErrors) {
  distributed::DataParallel dp{.bucket_bytes = 0};
  EXPECT_THROW(dp.all_reduce_gradients({zeros(Shape{2})}, 1.0), ValueError);
  if (distributed::world_size() > 1) {
    distributed::DataParallel ok;
    EXPECT_THROW(ok.all_reduce_gradients({zeros(Shape{2}, {.dtype = DType::float16})}, 1.0),
                 DTypeError);
  }
}

TEST(GradientBuckets, ReduceIsTheWeightedSumOverTheRanks) {
  distributed::DataParallel dp{.bucket_bytes = 8};  // one bucket per gradient, and a shared one
  dp.initialize();
  const int world = distributed::world_size();
  const float r = static_cast<float>(distributed::rank());
  Tensor a = from_vector(std::vector<float>{r, 1.0f}, Shape{2});
  Tensor b = from_vector(std::vector<float>{2.0f * r, 3.0f, 4.0f}, Shape{3});
  Tensor c = from_vector(std::vector<float>{5.0f}, Shape{1});
  dp.all_reduce_gradients({a, Tensor(), b, c}, 0.5);
  // Sum over ranks of 0.5 * values (a group of one reduces nothing: the values stay).
  const float ranks = static_cast<float>(world * (world - 1) / 2);
  if (world == 1) {
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0.0f, 1.0f}));
  } else {
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0.5f * ranks, 0.5f * world}));
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{ranks, 1.5f * world, 2.0f * world}));
    EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{2.5f * world}));
  }
}

}  // namespace
}  // namespace mixprec
