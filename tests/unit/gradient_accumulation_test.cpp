// The residual add's backward and autograd's gradient accumulation: the add hands the one incoming
// gradient to both inputs (no copy); a fan-out's sum is written in place into a gradient that
// nothing else holds (the CPU's accumulate_gradient), and never into one that the other input of
// an add can still read; a mean's gradient travels as a broadcast view, added in place without
// being made dense, and dense wherever a node or a caller receives it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "mixprec/layers/merge.h"
#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

TEST(GradientAccumulationTest, AddPassesTheSameGradientToBothInputs) {
  Tensor x1 = from_vector(std::vector<double>{1, 2, 3}, {3}), x2 = ones({3});
  x1.set_requires_grad(true);
  x2.set_requires_grad(true);
  const Tensor y = layers::Add()({mul(x1, 2.0), mul(x2, 3.0)})[0];
  const Tensor g = from_vector(std::vector<double>{0.5, -1, 2}, {3});
  const std::vector<Tensor> grads = autograd::edge_to(y)->backward(g);
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads[0].data_ptr(), g.data_ptr());
  EXPECT_EQ(grads[1].data_ptr(), g.data_ptr());
}

// s = a + b with a and b also used alone: a's gradient is the add's g plus v, b's is g plus u.
// Summing into the shared g in place would hand each the other's term as well.
TEST(GradientAccumulationTest, FanOutSumDoesNotReachTheOtherInputOfAnAdd) {
  for (DType dtype : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Tensor x1 = from_vector(std::vector<double>{1, 2, 3, 4}, {4}, {.dtype = dtype});
    Tensor x2 = from_vector(std::vector<double>{-1, 0, 1, 2}, {4}, {.dtype = dtype});
    x1.set_requires_grad(true);
    x2.set_requires_grad(true);
    const Tensor w = from_vector(std::vector<double>{1, 2, 3, 4}, {4}, {.dtype = dtype});
    const Tensor v = from_vector(std::vector<double>{10, 20, 30, 40}, {4}, {.dtype = dtype});
    const Tensor u = from_vector(std::vector<double>{0.5, 1, 1.5, 2}, {4}, {.dtype = dtype});
    // Both orders of the two terms, so that either contribution to a's gradient comes first.
    for (bool add_term_first : {true, false}) {
      const Tensor a = mul(x1, 2.0), b = mul(x2, 3.0);
      const Tensor through_add = sum(mul(add(a, b), w));
      const Tensor alone = add(sum(mul(a, v)), sum(mul(b, u)));
      const Tensor loss = add_term_first ? add(through_add, alone) : add(alone, through_add);
      const auto g = grad(loss, {x1, x2});
      EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{22, 44, 66, 88}));    // 2 (w + v)
      EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{4.5, 9, 13.5, 18}));  // 3 (w + u)
    }
  }
}

// A node that returns a new gradient of `value` for its input and remembers where it lives.
struct FreshGradient final : autograd::Node {
  double value = 0;
  const void** address = nullptr;
  std::vector<Tensor> backward(const Tensor& g) override {
    Tensor r = full(g.shape(), value, {.dtype = g.dtype()});
    *address = r.data_ptr();
    return {r};
  }
  std::string name() const override { return "FreshGradient"; }
};

// The end of the fan-out: records the gradient it receives.
struct Probe final : autograd::Node {
  const void** address = nullptr;
  std::vector<double>* values = nullptr;
  std::vector<Tensor> backward(const Tensor& g) override {
    *address = g.data_ptr();
    *values = g.to_vector<double>();
    return {Tensor()};
  }
  std::string name() const override { return "Probe"; }
};

TEST(GradientAccumulationTest, FanOutSumIsWrittenIntoAGradientNothingElseHolds) {
  for (DType dtype : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Tensor x = zeros({5}, {.dtype = dtype});
    x.set_requires_grad(true);
    const void* probe_address = nullptr;
    std::vector<double> probe_values;
    auto probe = std::make_shared<Probe>();
    probe->address = &probe_address;
    probe->values = &probe_values;
    const Tensor p = autograd::record(zeros({5}, {.dtype = dtype}), probe, {x});
    const void* addresses[2] = {nullptr, nullptr};
    std::vector<Tensor> branches;
    for (int k = 0; k < 2; ++k) {
      auto node = std::make_shared<FreshGradient>();
      node->value = k == 0 ? 1.5 : 0.25;
      node->address = &addresses[k];
      branches.push_back(autograd::record(zeros({5}, {.dtype = dtype}), node, {p}));
    }
    sum(add(branches[0], branches[1])).backward();
    EXPECT_EQ(probe_values, std::vector<double>(5, 1.75));
    // The first branch's gradient received the second in place (whichever ran first).
    EXPECT_TRUE(probe_address == addresses[0] || probe_address == addresses[1]);
  }
}

TEST(GradientAccumulationTest, CpuKernelAddsInPlaceInEveryFloatingDtype) {
  const auto accumulate = backend_for(Device::cpu()).nn->accumulate_gradient;
  ASSERT_NE(accumulate, nullptr);
  constexpr std::int64_t n = 70001;  // several chunks, the parallel path and a ragged tail
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor acc = arange(0.0, static_cast<double>(n), 1.0, {.dtype = kFloat32}).to(dtype);
    const Tensor g = full({n}, 0.5, {.dtype = dtype});
    const void* before = acc.data_ptr();
    const Tensor expected = add(acc, g);
    accumulate(acc, g);
    EXPECT_EQ(acc.data_ptr(), before);
    EXPECT_EQ(acc.to_vector<double>(), expected.to_vector<double>());
  }
}

// The squeeze-and-excitation pattern: x feeds a spatial mean (the squeeze) and a product with a
// per-channel gate. x's gradient is the product's gradient plus the mean's broadcast one: against
// the same sum computed by hand, in every floating dtype, whichever term arrives first.
TEST(GradientAccumulationTest, MeanGradientIsAddedAsABroadcast) {
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    Generator gen(7);
    const Tensor x0 = random_normal({2, 3, 4, 5}, 0.0, 1.0, {.dtype = dtype}, gen);
    const Tensor gate = random_uniform({2, 1, 1, 5}, 0.0, 1.0, {.dtype = dtype}, gen);
    const Tensor w = random_normal({2, 3, 4, 5}, 0.0, 1.0, {.dtype = dtype}, gen);
    const Tensor v = random_normal({2, 1, 1, 5}, 0.0, 1.0, {.dtype = dtype}, gen);
    for (bool mean_first : {true, false}) {
      Tensor x = x0.detach();
      x.set_requires_grad(true);
      const Tensor gated = sum(mul(mul(x, gate), w));
      const Tensor squeezed = sum(mul(mean(x, {1, 2}, KeepDims::yes), v));
      const Tensor loss = mean_first ? add(squeezed, gated) : add(gated, squeezed);
      const Tensor g = grad(loss, {x})[0];
      EXPECT_TRUE(g.is_contiguous());
      // gate * w + v / 12 per element, each term rounded as the ops round it.
      const Tensor expected = add(mul(w, gate), broadcast_to(mul(v, 1.0 / 12.0), x.shape()));
      // One rounding of the sum in the 16-bit dtypes, whose terms the reference rounds too.
      const double tol = dtype == kFloat32 || dtype == kFloat64 ? 1e-6 : 1e-2;
      EXPECT_TRUE(testing::all_close(g, expected, {tol, tol}));
    }
  }
}

// Passes its gradient through to its input and records whether it arrived dense.
struct ContiguityProbe final : autograd::Node {
  bool* contiguous = nullptr;
  std::vector<Tensor> backward(const Tensor& g) override {
    *contiguous = g.is_contiguous();
    return {g};
  }
  std::string name() const override { return "ContiguityProbe"; }
};

// A mean's gradient that reaches a node (or the caller) alone is dense there.
TEST(GradientAccumulationTest, AMeanGradientReceivedAloneIsDense) {
  Generator gen(3);
  Tensor x = random_normal({2, 3, 4, 5}, 0.0, 1.0, {}, gen);
  x.set_requires_grad(true);
  const Tensor g = grad(sum(mean(x, {1, 2}, KeepDims::yes)), {x})[0];
  EXPECT_TRUE(g.is_contiguous());
  EXPECT_EQ(g.to_vector<double>(), std::vector<double>(120, static_cast<float>(1.0 / 12.0)));
  // A node receives it dense: a pass-through node records what reaches it.
  Tensor y = zeros({3, 4});
  y.set_requires_grad(true);
  bool received_dense = false;
  auto node = std::make_shared<ContiguityProbe>();
  node->contiguous = &received_dense;
  const Tensor through = autograd::record(zeros({3, 4}), node, {y});
  const Tensor gy = grad(sum(mean(through, {0})), {y})[0];
  EXPECT_TRUE(received_dense);
  EXPECT_EQ(gy.to_vector<double>(), std::vector<double>(12, static_cast<float>(1.0 / 3.0)));
  // A leaf's .grad() is dense too.
  Tensor z = zeros({4, 6});
  z.set_requires_grad(true);
  sum(mean(z, {0})).backward();
  EXPECT_TRUE(z.grad().is_contiguous());
  EXPECT_EQ(z.grad().to_vector<double>(), std::vector<double>(24, 0.25));
}

// The CPU kernel adds a broadcast view in place: per channel (the gate's shape) and along other
// axes (the strided loop).
TEST(GradientAccumulationTest, CpuKernelAddsABroadcastViewInPlace) {
  const auto accumulate = backend_for(Device::cpu()).nn->accumulate_gradient;
  ASSERT_NE(accumulate, nullptr);
  for (DType dtype : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    for (const Shape& small : {Shape{2, 1, 1, 40}, Shape{2, 7, 1, 1}, Shape{1, 7, 9, 1}}) {
      const Tensor acc =
          arange(0.0, 2.0 * 7 * 9 * 40, 1.0, {.dtype = kFloat32}).to(dtype).reshape({2, 7, 9, 40});
      const Tensor part = arange(0.0, static_cast<double>(small.numel()), 1.0).to(dtype);
      const Tensor g = broadcast_to(part.reshape(small), acc.shape());
      ASSERT_FALSE(g.is_contiguous());
      const Tensor expected = add(acc, g);
      const void* before = acc.data_ptr();
      accumulate(acc, g);
      EXPECT_EQ(acc.data_ptr(), before);
      EXPECT_EQ(acc.to_vector<double>(), expected.to_vector<double>()) << small.to_string();
    }
  }
}

}  // namespace
}  // namespace mixprec
