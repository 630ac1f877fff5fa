// SyncBatchNormalization under mpirun (run with 2 processes): every rank holds the same global
// batch and takes its own rows of it; the synchronized layer on the shards must give what an
// ordinary BatchNormalization gives in one process on the whole batch: the shard's rows of y,
// the shard's rows of the input gradient, the moving statistics, and gamma/beta gradients whose
// sum over the ranks is the whole batch's. The loss is sum(y * w) with a fixed weighting w, so the
// ranks' losses add up to the one-process loss. Uneven shards (7 rows over 2 ranks) check that
// the statistics weigh ranks by their rows.
//
// Tolerance: rtol 2e-5, atol 2e-5 (float32). The two sides differ only in float32 summation
// order: the one-process layer uses the fused kernel over all rows; the synchronized one sums
// each rank's rows, adds the partial sums in the all-reduce, and composes the normalisation from
// elementwise ops (centred variance in a second pass). Each is within a few ulps of the exact
// value for these sizes (tens of rows, values O(1..10)), so 2e-5 leaves a wide margin while still
// catching any missing or double-counted rank (errors of order 1).
#include <gtest/gtest.h>

#include <vector>

#include "mixprec/layers/sync_batch_normalization.h"
#include "mixprec/mixprec.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::all_close;

constexpr testing::Tolerance kTol{2e-5, 2e-5};

struct Result {
  Tensor y, dx, dgamma, dbeta, moving_mean, moving_variance;
};

// Two training steps (the second from updated moving statistics) of `bn` on x, loss sum(y * w);
// the second step's outputs and gradients.
Result two_steps(layers::BatchNormalization bn, const Tensor& x, const Tensor& w) {
  Result r;
  for (int step = 0; step < 2; ++step) {
    const Tensor xs = x.detach().set_requires_grad(true);
    r.y = bn(xs, {.training = true});
    const auto g = grad(sum(mul(r.y.to(kFloat32), w)), {xs, bn.gamma(), bn.beta()});
    r.dx = g[0], r.dgamma = g[1], r.dbeta = g[2];
  }
  r.moving_mean = bn.moving_mean();
  r.moving_variance = bn.moving_variance();
  return r;
}

void check_against_one_process(const Shape& shape, const char* policy) {
  SCOPED_TRACE(policy);
  testing::PolicyGuard guard(policy);
  const int rank = distributed::rank(), world = distributed::world_size();
  set_seed(21);  // the same global batch on every rank
  const Tensor x = random_normal(shape, 2.0, 3.0);
  const Tensor w = random_normal(shape);
  const std::int64_t n = shape[0];
  const std::int64_t start = rank * n / world, stop = (rank + 1) * n / world;

  const Result whole = two_steps(layers::BatchNormalization({.momentum = 0.7}), x, w);
  const Result part = two_steps(layers::SyncBatchNormalization({.momentum = 0.7}),
                                x.slice(0, start, stop), w.slice(0, start, stop));
  EXPECT_TRUE(all_close(part.y, whole.y.slice(0, start, stop), kTol)) << "y";
  EXPECT_TRUE(all_close(part.dx, whole.dx.slice(0, start, stop), kTol)) << "dx";
  Tensor dgamma = part.dgamma.contiguous(), dbeta = part.dbeta.contiguous();
  distributed::all_reduce(dgamma);
  distributed::all_reduce(dbeta);
  EXPECT_TRUE(all_close(dgamma, whole.dgamma, kTol)) << "dgamma summed over the ranks";
  EXPECT_TRUE(all_close(dbeta, whole.dbeta, kTol)) << "dbeta summed over the ranks";
  EXPECT_TRUE(all_close(part.moving_mean, whole.moving_mean, kTol)) << "moving_mean";
  EXPECT_TRUE(all_close(part.moving_variance, whole.moving_variance, kTol)) << "moving_variance";
}

class SyncBatchNormMpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    distributed::initialize();
    if (distributed::world_size() < 2) GTEST_SKIP() << "run under mpirun -np 2";
  }
};

TEST_F(SyncBatchNormMpiTest, HalfBatchesGiveTheWholeBatchResultFloat32) {
  check_against_one_process({8, 3, 3, 4}, "float32");
}

TEST_F(SyncBatchNormMpiTest, UnevenShardsAreWeightedByTheirRows) {
  check_against_one_process({7, 5}, "float32");
}

TEST_F(SyncBatchNormMpiTest, InferenceUsesTheSharedMovingStatisticsOnEveryRank) {
  set_seed(22);
  const Tensor x = random_normal({6, 3}, 1.0, 2.0);
  const int rank = distributed::rank(), world = distributed::world_size();
  layers::SyncBatchNormalization bn;
  bn(x.slice(0, rank * 6 / world, (rank + 1) * 6 / world), {.training = true});
  Tensor mean = bn.moving_mean().contiguous();
  Tensor max_mean = mean.to(kFloat32);
  distributed::all_reduce(max_mean, distributed::ReduceOp::max);
  Tensor min_mean = mean.to(kFloat32);
  distributed::all_reduce(min_mean, distributed::ReduceOp::min);
  EXPECT_EQ(max_mean.to_vector<float>(), min_mean.to_vector<float>())
      << "every rank holds the same (global) moving mean";
}

}  // namespace
}  // namespace mixprec
