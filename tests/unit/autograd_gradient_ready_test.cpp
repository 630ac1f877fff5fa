// The gradient-ready hook of the backward engine (src/autograd/gradient_ready.h): each requested
// input's gradient is reported once, as soon as it is final, equal to what grad() returns, as a
// tensor that nothing else shares (the hook may overwrite it while the pass goes on).
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "autograd/gradient_ready.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

using autograd::grad_reporting_ready;

Tensor leaf(std::vector<float> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return from_vector(values, Shape{n}, {.device = Device::cpu(), .requires_grad = true});
}

struct Report {
  std::size_t index;
  std::vector<float> values;  // at the moment of the report
};

// w feeds two branches (tanh(w * a) and w * b), a feeds one, b both the second branch and the
// output: loss = sum(tanh(w * a) * c) + sum(w * b) + sum(b * b).
struct Graph {
  Tensor w = leaf({0.5f, -1.0f, 2.0f});
  Tensor a = leaf({1.5f, 0.25f, -0.5f});
  Tensor b = leaf({-2.0f, 1.0f, 0.75f});
  Tensor c = leaf({1.0f, 2.0f, 3.0f});
  Tensor loss() const {
    return add(add(sum(mul(tanh(mul(w, a)), c)), sum(mul(w, b))), sum(mul(b, b)));
  }
  std::vector<Tensor> inputs() const { return {w, a, b, c}; }
};

TEST(GradientReadyHook, EachGradientReportedOnceWithGradsValue) {
  const Graph g;
  const std::vector<Tensor> expected = grad(g.loss(), g.inputs());
  std::vector<Report> reports;
  std::vector<Tensor> handed;
  const std::vector<Tensor> result =
      grad_reporting_ready(g.loss(), g.inputs(), [&](std::size_t i, const Tensor& t) {
        reports.push_back({i, t.to_vector<float>()});
        handed.push_back(t);
      });
  ASSERT_EQ(reports.size(), 4u);
  std::vector<int> seen(4, 0);
  for (const Report& r : reports) {
    ASSERT_LT(r.index, 4u);
    ++seen[r.index];
    // Final when reported: the value grad() computes.
    EXPECT_EQ(r.values, expected[r.index].to_vector<float>()) << "input " << r.index;
  }
  EXPECT_EQ(seen, (std::vector<int>{1, 1, 1, 1}));
  for (std::size_t k = 0; k < reports.size(); ++k) {
    // The reported tensor is the very tensor returned.
    EXPECT_EQ(handed[k].data_ptr(), result[reports[k].index].data_ptr());
    EXPECT_EQ(result[k].to_vector<float>(), expected[k].to_vector<float>());
  }
}

TEST(GradientReadyHook, LastLayerFirst) {
  // A chain x -> dense(w1) -> tanh -> dense(w2) -> loss: w2's gradient is final before the pass
  // reaches w1.
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  const Tensor w1 = ones(Shape{3, 4}, {.device = Device::cpu(), .requires_grad = true});
  const Tensor w2 = full(Shape{4, 2}, 0.5, {.device = Device::cpu(), .requires_grad = true});
  const Tensor loss = sum(matmul(tanh(matmul(x, w1)), w2));
  std::vector<std::size_t> order;
  grad_reporting_ready(loss, {w1, w2}, [&](std::size_t i, const Tensor&) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<std::size_t>{1, 0}));
}

// Overwriting each gradient in the hook changes nothing else: not another input's gradient (add's
// backward hands one tensor to both operands), not the pass through an inner node requested as an
// input, not the caller's output gradient.
TEST(GradientReadyHook, ReportedTensorsAreExclusive) {
  const Tensor p = leaf({1.0f, 2.0f});
  const Tensor q = leaf({3.0f, 4.0f});
  const Tensor inner = mul(p, q);
  const Tensor out = add(add(inner, p), q);  // d/dp = q + 1, d/dq = p + 1, d/dinner = 1
  const Tensor seed = from_vector(std::vector<float>{1.0f, 1.0f}, Shape{2});
  std::vector<std::vector<float>> at_report(4);
  const std::vector<Tensor> result = grad_reporting_ready(
      out, {p, q, inner, p},
      [&](std::size_t i, const Tensor& t) {
        at_report[i] = t.to_vector<float>();
        t.assign(full(t.shape(), -100.0, {.device = Device::cpu()}));
      },
      seed, RetainGraph::yes);
  EXPECT_EQ(at_report[0], (std::vector<float>{4.0f, 5.0f}));
  EXPECT_EQ(at_report[1], (std::vector<float>{2.0f, 3.0f}));
  EXPECT_EQ(at_report[2], (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(at_report[3], (std::vector<float>{4.0f, 5.0f}));  // the same input twice
  EXPECT_EQ(seed.to_vector<float>(), (std::vector<float>{1.0f, 1.0f}));
  for (const Tensor& r : result) EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{-100, -100}));
}

TEST(GradientReadyHook, UnreachedInputsReportedAsZerosAtTheEnd) {
  const Tensor w = leaf({1.0f, 2.0f});
  const Tensor unused = leaf({5.0f});
  const Tensor constant = from_vector(std::vector<float>{7.0f}, Shape{1});
  std::vector<std::size_t> order;
  std::vector<std::vector<float>> values(3);
  grad_reporting_ready(sum(mul(w, w)), {unused, w, constant}, [&](std::size_t i, const Tensor& t) {
    order.push_back(i);
    values[i] = t.to_vector<float>();
  });
  EXPECT_EQ(order, (std::vector<std::size_t>{1, 0, 2}));
  EXPECT_EQ(values[0], (std::vector<float>{0.0f}));
  EXPECT_EQ(values[1], (std::vector<float>{2.0f, 4.0f}));
  EXPECT_EQ(values[2], (std::vector<float>{0.0f}));
}

TEST(GradientReadyHook, EmptyHookIsGradAndHookErrorsPropagate) {
  const Graph g;
  const std::vector<Tensor> expected = grad(g.loss(), g.inputs());
  const std::vector<Tensor> plain = grad_reporting_ready(g.loss(), g.inputs(), {});
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(plain[i].to_vector<float>(), expected[i].to_vector<float>());
  }
  EXPECT_THROW(grad_reporting_ready(g.loss(), g.inputs(),
                                    [](std::size_t, const Tensor&) { throw ValueError("hook"); }),
               ValueError);
}

}  // namespace
}  // namespace mixprec
