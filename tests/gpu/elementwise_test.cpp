// Elementwise ops on CUDA against the CPU backend, forward and backward, in float32, float16,
// bfloat16 and float64: every unary op, every binary op with and without broadcasting, comparisons,
// where, finiteness; contiguous (vectorised kernels), transposed, broadcast and misaligned
// (strided kernels) operands.
#include <cmath>
#include <limits>

#include "gpu/op_harness.h"
#include "ops/add_relu.h"

namespace mixprec::testing {
namespace {

std::vector<OpCase> unary_cases() {
  const Shape s{37, 53};  // odd sizes: the vector kernels' tails run too
  const auto u = [](Tensor (*op)(const Tensor&)) {
    return [op](const std::vector<Tensor>& x) { return op(x[0]); };
  };
  return {
      {"neg", u(neg), {{s}}},
      {"exp", u(exp), {{s, -4, 4}}},
      {"log", u(log), {{s, 0.1, 10}}},
      {"sqrt", u(sqrt), {{s, 0.1, 10}}},
      {"rsqrt", u(rsqrt), {{s, 0.1, 10}}},
      {"abs", u(abs), {{s}}},
      {"relu", u(relu), {{s}}},
      {"relu6", u(relu6), {{s, -3, 9}}},
      {"sigmoid", u(sigmoid), {{s, -8, 8}}},
      {"tanh", u(tanh), {{s, -4, 4}}},
      {"gelu", [](const std::vector<Tensor>& x) { return gelu(x[0]); }, {{s, -4, 4}}},
      {"gelu_tanh",
       [](const std::vector<Tensor>& x) { return gelu(x[0], GeluApproximation::tanh); },
       {{s, -4, 4}}},
      {"silu", u(silu), {{s, -6, 6}}},
  };
}

TEST(GpuElementwiseTest, UnaryOpsMatchTheCpuForwardAndBackward) {
  MIXPREC_REQUIRE_GPU();
  for (const OpCase& c : unary_cases()) {
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
}

TEST(GpuElementwiseTest, UnaryOpsOnViewsUseTheStridedKernel) {
  MIXPREC_REQUIRE_GPU();
  for (const OpCase& base : unary_cases()) {
    OpCase c = base;
    c.name += " (transposed)";
    c.f = [f = base.f](const std::vector<Tensor>& x) { return f({x[0].transpose(0, 1)}); };
    for (DType dtype : {DType::float32, DType::float16}) expect_same_on_gpu(c, dtype);
    c = base;
    c.name += " (offset by one element: not 16-byte aligned)";
    c.f = [f = base.f](const std::vector<Tensor>& x) {
      return f({x[0].reshape({-1}).slice(0, 1, x[0].numel())});
    };
    for (DType dtype : {DType::float32, DType::bfloat16}) expect_same_on_gpu(c, dtype);
  }
}

std::vector<OpCase> binary_cases(const Shape& a, const Shape& b) {
  const auto op = [](Tensor (*f)(const Tensor&, const Tensor&)) {
    return [f](const std::vector<Tensor>& x) { return f(x[0], x[1]); };
  };
  return {
      {"add", op(add), {{a}, {b}}},
      {"sub", op(sub), {{a}, {b}}},
      {"mul", op(mul), {{a}, {b}}},
      {"div", op(div), {{a}, {b, 0.5, 2}}, 4.0},
      {"pow",
       [](const std::vector<Tensor>& x) { return pow(x[0], x[1]); },
       {{a, 0.5, 2}, {b, -2, 2}},
       4.0},
      {"maximum", op(maximum), {{a}, {b}}},
      {"minimum", op(minimum), {{a}, {b}}},
  };
}

TEST(GpuElementwiseTest, BinaryOpsMatchTheCpuForwardAndBackward) {
  MIXPREC_REQUIRE_GPU();
  for (const OpCase& c : binary_cases({24, 33}, {24, 33})) {
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
}

TEST(GpuElementwiseTest, BinaryOpsBroadcastLikeTheCpu) {
  MIXPREC_REQUIRE_GPU();
  // A bias row, a column, a scalar and a two-sided broadcast; the gradients are reduced back to
  // each operand's shape (sum_to).
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{16, 40}, {40}}, {{16, 40}, {16, 1}}, {{5, 7, 9}, {}}, {{5, 1, 9}, {7, 1}}};
  // mul's gradient of a broadcast operand: sums of float32 products in each device's order, rounded
  // once (the per-channel (40) row: both devices' channel_gate_backward; the other broadcasts: the
  // op layer's float32 composition on CUDA), compared with the float32 summation bound. (Before the
  // op layer widened 16-bit products, CUDA rounded each to 16 bits: float16 -0.0328369 vs
  // -0.0334778, exact -0.0334684, on the first H100 run.)
  for (const auto& [a, b] : shapes) {
    for (OpCase c : binary_cases(a, b)) {
      if (c.name == "mul") c.summed_gradients = true;
      for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
    }
  }
}

// ops::add_relu (TensorKernels::add_relu): the one-pass kernel on contiguous operands of one
// shape (odd sizes: the vector kernel's tail; a misaligned view: the scalar kernel) and the
// composition for broadcasts; one rounding of relu(a + b) equals relu(round(a + b)), so CUDA and
// the CPU agree to the dtype's tolerance as every binary op does.
TEST(GpuElementwiseTest, AddReluMatchesTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const auto fused = [](const std::vector<Tensor>& x) { return ops::add_relu(x[0], x[1]); };
  const auto misaligned = [](const std::vector<Tensor>& x) {
    return ops::add_relu(x[0].slice(0, 1, 37), x[1].slice(0, 1, 37));
  };
  const std::vector<OpCase> cases = {
      {"add_relu", fused, {{{37, 53}}, {{37, 53}}}},
      {"add_relu broadcast", fused, {{{16, 40}}, {{40}}}},
      {"add_relu misaligned view", misaligned, {{{37 * 3 + 1}}, {{37 * 3 + 1}}}},
  };
  for (const OpCase& c : cases) {
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
}

TEST(GpuElementwiseTest, ComparisonsWhereAndFiniteness) {
  MIXPREC_REQUIRE_GPU();
  using Cmp = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<std::string, Cmp>> cmps = {
      {"equal", equal},           {"not_equal", not_equal}, {"less", less},
      {"less_equal", less_equal}, {"greater", greater},     {"greater_equal", greater_equal}};
  for (const auto& [name, f] : cmps) {
    // Integer values, so that equal operands occur often.
    OpCase c{name,
             [f = f](const std::vector<Tensor>& x) { return f(x[0], x[1]); },
             {{{12, 10}, -3, 3, true}, {{10}, -3, 3, true}}};
    c.differentiable = false;
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
  // cond (8, 1) from comparing two inputs; a (8, 6) and b (6) broadcast against it.
  const OpCase where_case{
      "where",
      [](const std::vector<Tensor>& x) { return where(greater(x[0], x[3]), x[1], x[2]); },
      {{{8, 1}}, {{8, 6}}, {{6}}, {{8, 1}}}};
  for (DType dtype : float_dtypes()) expect_same_on_gpu(where_case, dtype);

  // Integer comparisons on the GPU too.
  const Tensor ai = from_vector(std::vector<std::int64_t>{1, 5, -3, 7}, {4});
  const Tensor bi = from_vector(std::vector<std::int64_t>{1, 4, -2, 7}, {4});
  EXPECT_TRUE(matches(greater_equal(on_gpu(ai), on_gpu(bi)), greater_equal(ai, bi), {0, 0}));
}

TEST(GpuElementwiseTest, IsFiniteAndAllFiniteSeeInfAndNaN) {
  MIXPREC_REQUIRE_GPU();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dtype : float_dtypes()) {
    const Tensor x =
        from_vector(std::vector<float>{1.0f, inf, -inf, nan, 0.0f, -2.5f}, {6}).to(dtype);
    EXPECT_TRUE(matches(is_finite(on_gpu(x)), is_finite(x), {0, 0}));
    EXPECT_FALSE(all_finite(on_gpu(x)));
    EXPECT_FALSE(all_finite(on_gpu(x.slice(0, 3, 4))));  // NaN alone
    EXPECT_TRUE(all_finite(on_gpu(x.slice(0, 4, 6))));
    // A large tensor with one Inf near the end (many blocks; one must clear the flag).
    Tensor big = zeros({1 << 20}, {.dtype = dtype});
    EXPECT_TRUE(all_finite(on_gpu(big)));
    const Tensor with_inf = concat(
        {big.slice(0, 0, (1 << 20) - 3), from_vector(std::vector<float>{0, inf, 0}, {3}).to(dtype)},
        0);
    EXPECT_FALSE(all_finite(on_gpu(with_inf)));
  }
}

// Special values go through every unary op identically (NaN stays NaN, relu keeps NaN, exp
// overflows to inf, log(0) = -inf).
TEST(GpuElementwiseTest, SpecialValuesMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x =
      from_vector(std::vector<float>{0.0f, -0.0f, inf, -inf, nan, 100.0f, -100.0f, 1e-30f}, {8});
  for (const OpCase& c : unary_cases()) {
    for (DType dtype : float_dtypes()) {
      SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
      const Tensor xc = x.to(dtype);
      EXPECT_TRUE(matches(c.f({on_gpu(xc)}), c.f({xc}), tolerance_for(dtype)));
    }
  }
}

}  // namespace
}  // namespace mixprec::testing
