// The gradient all-reduce overlapped with the backward pass (src/distributed/overlapped_reducer.h)
// and DataParallel::device(). Written for `mpirun -np 2` and a group of one: the reverse bucket
// plan, the weighted sum whatever order each rank reports its gradients in, and a backward pass
// that throws (on every rank, or on one only) reaching the caller on every rank without a hang,
// the group still usable after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "autograd/gradient_ready.h"
#include "autograd/node.h"
#include "distributed/overlapped_reducer.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using distributed::detail::OverlappedReducer;
using distributed::detail::plan_reverse_buckets;
using Plan = std::vector<std::vector<std::size_t>>;

TEST(OverlappedReducer, BucketsInReverseOrderUpToTheBucketSize) {
  // 4-byte elements: 10, 20, 30 elements = 40, 80, 120 bytes.
  const std::vector<std::int64_t> numels{10, 20, 30};
  EXPECT_EQ(plan_reverse_buckets(numels, 1 << 20), (Plan{{2, 1, 0}}));
  EXPECT_EQ(plan_reverse_buckets(numels, 200), (Plan{{2, 1}, {0}}));
  EXPECT_EQ(plan_reverse_buckets(numels, 199), (Plan{{2}, {1, 0}}));
  EXPECT_EQ(plan_reverse_buckets(numels, 1), (Plan{{2}, {1}, {0}}));
  EXPECT_TRUE(plan_reverse_buckets({}, 8).empty());
}

TEST(DataParallel, DeviceIsThisRanksGpuOrTheCpu) {
  distributed::DataParallel dp;
  dp.initialize();
  const int gpus = cuda::device_count();
  if (gpus == 0) {
    EXPECT_EQ(dp.device(), Device::cpu());
  } else {
    EXPECT_EQ(dp.device(), Device::cuda(distributed::local_rank() % gpus));
  }
}

std::vector<Tensor> variables_of(const std::vector<std::int64_t>& sizes) {
  std::vector<Tensor> v;
  for (std::int64_t n : sizes) v.push_back(zeros(Shape{n}, {.device = Device::cpu()}));
  return v;
}

// Rank r's gradient i: (r + 1) * (i + 1) * (k + 1) at element k.
Tensor rank_gradient(std::size_t i, std::int64_t n) {
  std::vector<float> values(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) {
    values[k] = static_cast<float>((distributed::rank() + 1) * (i + 1) * (k + 1));
  }
  return from_vector(values, Shape{n});
}

TEST(OverlappedReducer, WeightedSumWhateverOrderEachRankReports) {
  distributed::initialize();
  const int world = distributed::world_size();
  const std::vector<std::int64_t> sizes{3, 5, 2, 7};
  OverlappedReducer reducer;
  for (int step = 0; step < 2; ++step) {  // the plan and buffers are reused by the second step
    reducer.begin(variables_of(sizes), 1.0 / world, 4 * 8);  // buckets {3}, {2, 1}, {0}
    std::vector<Tensor> grads;
    for (std::size_t i = 0; i < sizes.size(); ++i) grads.push_back(rank_gradient(i, sizes[i]));
    // Rank 0 reports first to last, the others last to first.
    std::vector<std::size_t> order{0, 1, 2, 3};
    if (distributed::rank() != 0) std::reverse(order.begin(), order.end());
    for (std::size_t i : order) reducer.ready(i, grads[i]);
    reducer.finish();
    // The mean over the ranks of (r + 1): (world + 1) / 2.
    const double factor = (world + 1) / 2.0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::vector<float> got = grads[i].to_vector<float>();
      for (std::int64_t k = 0; k < sizes[i]; ++k) {
        EXPECT_FLOAT_EQ(got[k], static_cast<float>(factor * (i + 1) * (k + 1)))
            << "step " << step << " gradient " << i << " element " << k;
      }
    }
  }
  EXPECT_THROW(reducer.begin({zeros(Shape{2}, {.dtype = DType::float16})}, 1.0, 64), DTypeError);
}

// An op whose backward throws on the ranks `throws_on` selects (identity forward).
class ThrowingNode final : public autograd::Node {
 public:
  explicit ThrowingNode(bool throws) : throws_(throws) {}
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    if (throws_)
      throw ValueError("ThrowingNode: backward failed on rank " +
                       std::to_string(distributed::rank()));
    return {grad_output};
  }
  std::string name() const override { return "ThrowingNode"; }

 private:
  bool throws_;
};

Tensor throwing_identity(const Tensor& x, bool throws) {
  Tensor out;
  {
    NoGradScope no_grad;
    out = mul(x, 1.0);
  }
  return autograd::record(out, std::make_shared<ThrowingNode>(throws), {x});
}

// One step as train_step runs it: loss = sum(throwing(w1) * w2); w2's gradient is final (and its
// bucket launched) before the pass reaches the throwing node. Returns what the step threw.
std::string failing_step(OverlappedReducer& reducer, bool throws) {
  const Tensor w1 = full(Shape{4}, 1.0, {.device = Device::cpu(), .requires_grad = true});
  const Tensor w2 = full(Shape{4}, 2.0, {.device = Device::cpu(), .requires_grad = true});
  reducer.begin({w1, w2}, 1.0, 4);  // one bucket per gradient: {w2}, {w1}
  std::size_t reported = 0;
  try {
    try {
      autograd::grad_reporting_ready(sum(mul(throwing_identity(w1, throws), w2)), {w1, w2},
                                     [&](std::size_t i, const Tensor& g) {
                                       ++reported;
                                       reducer.ready(i, g);
                                     });
    } catch (...) {
      EXPECT_EQ(reported, 1u) << "w2's bucket was launched before the throw";
      reducer.abandon();
      throw;
    }
    reducer.finish();
  } catch (const distributed::DistributedError&) {
    return "DistributedError";
  } catch (const ValueError&) {
    return "ValueError";
  }
  return "nothing";
}

TEST(OverlappedReducer, BackwardThrowingOnEveryRankReachesEveryCaller) {
  distributed::initialize();
  OverlappedReducer reducer;
  EXPECT_EQ(failing_step(reducer, true), "ValueError");
  // The ranks are in step: a collective after it works, and so does the next overlapped step.
  EXPECT_EQ(distributed::all_reduce(1.0), distributed::world_size());
  EXPECT_EQ(failing_step(reducer, false), "nothing");
}

TEST(OverlappedReducer, BackwardThrowingOnOneRankFailsTheOthersInsteadOfHanging) {
  distributed::initialize();
  const bool last = distributed::rank() == distributed::world_size() - 1;
  OverlappedReducer reducer;
  // The last rank gets its own error; the others fail the call check of their next bucket.
  EXPECT_EQ(failing_step(reducer, last), last ? "ValueError" : "DistributedError");
  EXPECT_EQ(distributed::all_reduce(1.0), distributed::world_size());
  EXPECT_EQ(failing_step(reducer, false), "nothing");
}

}  // namespace
}  // namespace mixprec
