// dense_forward on the CPU against its definition, activation(autocast_matmul(x, W) +
// b.to(x.dtype())) built from the separate ops in the test: outputs and the gradients of x, W and
// b bit for bit, for every fused activation, with and without a bias, rank-2 and rank-3 inputs,
// float32 masters under 16-bit inputs, 16-bit accumulation; the Dense layer against the same
// composition on its own weights; hand-computed values; float64 finite differences; errors.
#include "ops/dense_op.h"

#include <cstring>
#include <string>
#include <vector>

#include "mixprec/layers/dense.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::normal;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

const char* name_of(DenseActivation a) {
  switch (a) {
    case DenseActivation::linear: return "linear";
    case DenseActivation::relu: return "relu";
    case DenseActivation::gelu: return "gelu";
    case DenseActivation::gelu_tanh: return "gelu_tanh";
  }
  return "?";
}

// The definition, written out of public ops.
Tensor composition(const Tensor& x, const Tensor& w, const Tensor& b, DenseActivation act,
                   Accumulation acc) {
  Tensor y = acc == Accumulation::compute_dtype
                 ? matmul(x, w.to(x.dtype()), Transpose::no, Transpose::no, acc)
                 : autocast_matmul(x, w);
  if (b.defined()) y = add(y, b.to(x.dtype()));
  switch (act) {
    case DenseActivation::linear: return y;
    case DenseActivation::relu: return relu(y);
    case DenseActivation::gelu: return gelu(y, GeluApproximation::none);
    case DenseActivation::gelu_tanh: return gelu(y, GeluApproximation::tanh);
  }
  return y;
}

enum class Form { op, composed };
enum class WithBias { no, yes };

struct Result {
  Tensor y, dx, dw, db;
};

// x in `dtype`, W and b as float32 masters (float64 for a float64 x); the gradient of
// sum(y * upstream) so that every output element gets its own weight.
Result run(Form form, const Shape& x_shape, DType dtype, DenseActivation act, WithBias with_bias,
           Accumulation acc = Accumulation::float32) {
  const std::int64_t k = x_shape[x_shape.rank() - 1], n = 19;  // N not a multiple of 8
  const DType master = dtype == DType::float64 ? DType::float64 : DType::float32;
  Tensor x = normal(x_shape, 1).to(dtype);
  Tensor w = normal(Shape{k, n}, 2, DType::float32, 0.3).to(master);
  Tensor b =
      with_bias == WithBias::yes ? normal(Shape{n}, 3, DType::float32, 0.5).to(master) : Tensor();
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  if (b.defined()) b.set_requires_grad(true);
  const Tensor y =
      form == Form::op ? dense_forward(x, w, b, act, acc) : composition(x, w, b, act, acc);
  std::vector<std::int64_t> dims(y.shape().begin(), y.shape().end());
  const Tensor upstream = normal(Shape(dims), 9).to(dtype);
  std::vector<Tensor> inputs = {x, w};
  if (b.defined()) inputs.push_back(b);
  const std::vector<Tensor> g = grad(y, inputs, upstream);
  return {y.detach(), g[0], g[1], b.defined() ? g[2] : Tensor()};
}

void expect_identical(const Shape& x_shape, DType dtype, DenseActivation act, WithBias with_bias,
                      Accumulation acc = Accumulation::float32) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + name_of(act) + " x " + x_shape.to_string() +
               (with_bias == WithBias::yes ? " with bias" : " no bias") +
               (acc == Accumulation::compute_dtype ? " 16-bit accumulation" : ""));
  const Result op = run(Form::op, x_shape, dtype, act, with_bias, acc);
  const Result ref = run(Form::composed, x_shape, dtype, act, with_bias, acc);
  EXPECT_EQ(op.y.dtype(), dtype);
  EXPECT_TRUE(same_bits(op.y, ref.y)) << "forward";
  EXPECT_TRUE(same_bits(op.dx, ref.dx)) << "dx";
  EXPECT_TRUE(same_bits(op.dw, ref.dw)) << "dW";
  EXPECT_TRUE(same_bits(op.db, ref.db)) << "db";
}

const DenseActivation kActivations[] = {DenseActivation::linear, DenseActivation::relu,
                                        DenseActivation::gelu, DenseActivation::gelu_tanh};

TEST(DenseOp, BitIdenticalToTheCompositionInEveryDtype) {
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
    for (DenseActivation act : kActivations) {
      for (WithBias with_bias : {WithBias::yes, WithBias::no}) {
        expect_identical(Shape{13, 21}, dtype, act, with_bias);
      }
    }
  }
}

TEST(DenseOp, ConvertedBfloat16PathIsBitIdentical) {
  testing::Bf16PathGuard guard(cpu::Bf16Path::convert_to_float32);
  expect_identical(Shape{13, 21}, DType::bfloat16, DenseActivation::relu, WithBias::yes);
}

TEST(DenseOp, RankThreeInputsAreBitIdentical) {
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16}) {
    expect_identical(Shape{3, 5, 11}, dtype, DenseActivation::relu, WithBias::yes);
    expect_identical(Shape{2, 7, 9}, dtype, DenseActivation::gelu, WithBias::no);
  }
}

TEST(DenseOp, SixteenBitAccumulationIsBitIdentical) {
  expect_identical(Shape{9, 40}, DType::float16, DenseActivation::relu, WithBias::yes,
                   Accumulation::compute_dtype);
  expect_identical(Shape{9, 40}, DType::bfloat16, DenseActivation::linear, WithBias::yes,
                   Accumulation::compute_dtype);
}

TEST(DenseOp, HandComputedValuesAndGradients) {
  // x (1, 2), W (2, 2), b (2,): z = [1*1 + 2*0.5 + 0.5, 1*(-1) + 2*2 - 10] = [2.5, -7].
  Tensor x = from_vector(std::vector<double>{1, 2}, {1, 2});
  Tensor w = from_vector(std::vector<double>{1, -1, 0.5, 2}, {2, 2});
  Tensor b = from_vector(std::vector<double>{0.5, -10}, {2});
  for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
  const Tensor y = dense_forward(x, w, b, DenseActivation::relu);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{2.5, 0}));
  // d sum(y): dz = [1, 0]; dx = dz W^T = [1, 0.5]; dW = x^T dz = [[1, 0], [2, 0]]; db = [1, 0].
  const auto g = grad(sum(y), {x, w, b});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{1, 0.5}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{1, 0, 2, 0}));
  EXPECT_EQ(g[2].to_vector<double>(), (std::vector<double>{1, 0}));
}

TEST(DenseOp, Float64FiniteDifferences) {
  for (DenseActivation act : kActivations) {
    SCOPED_TRACE(name_of(act));
    // Biased so that no pre-activation sits at relu's kink.
    const Tensor x = normal(Shape{2, 3, 4}, 4, DType::float64);
    const Tensor w = normal(Shape{4, 5}, 5, DType::float64, 0.5);
    const Tensor b = normal(Shape{5}, 6, DType::float64, 0.5);
    EXPECT_TRUE(testing::gradcheck(
        [act](const std::vector<Tensor>& in) { return dense_forward(in[0], in[1], in[2], act); },
        {x, w, b}));
    EXPECT_TRUE(testing::gradcheck(
        [act](const std::vector<Tensor>& in) { return dense_forward(in[0], in[1], Tensor(), act); },
        {x, w}));
  }
}

TEST(DenseOp, ActivationNames) {
  EXPECT_EQ(dense_activation_from_name(""), DenseActivation::linear);
  EXPECT_EQ(dense_activation_from_name("linear"), DenseActivation::linear);
  EXPECT_EQ(dense_activation_from_name("relu"), DenseActivation::relu);
  EXPECT_EQ(dense_activation_from_name("gelu"), DenseActivation::gelu);  // exact erf gelu
  EXPECT_FALSE(dense_activation_from_name("sigmoid").has_value());
  EXPECT_FALSE(dense_activation_from_name("softmax").has_value());
}

// The Dense layer through the op against the composition on the layer's own weights: the same
// bits as before the op existed, for the forward and the gradients of x, kernel and bias.
void expect_dense_layer_identical(const char* policy, const std::string& activation,
                                  const Shape& x_shape, bool use_bias) {
  SCOPED_TRACE(std::string(policy) + " " + activation + " x " + x_shape.to_string());
  testing::PolicyGuard guard(policy);
  set_seed(21);
  layers::Dense d(
      17, {.activation = activation, .use_bias = use_bias, .bias_initializer = "random_normal"});
  Tensor x = normal(x_shape, 7);
  x.set_requires_grad(true);
  const Tensor y = d(x);
  const DType dtype = y.dtype();
  const Tensor upstream = normal(y.shape(), 8).to(dtype);
  std::vector<Tensor> vars = {x, d.kernel()};
  if (use_bias) vars.push_back(d.bias());
  const std::vector<Tensor> g = grad(y, vars, upstream);

  const Tensor xc = x.to(dtype);  // the layer's autocast of its input
  Tensor z = autocast_matmul(xc, d.kernel());
  if (use_bias) z = add(z, d.bias().to(dtype));
  const Tensor y_ref = apply_activation(activation, z);
  const std::vector<Tensor> g_ref = grad(y_ref, vars, upstream);
  EXPECT_TRUE(same_bits(y, y_ref)) << "forward";
  for (std::size_t i = 0; i < g.size(); ++i) EXPECT_TRUE(same_bits(g[i], g_ref[i])) << "grad " << i;
}

TEST(DenseOp, DenseLayerIsBitIdenticalToTheComposition) {
  expect_dense_layer_identical("float32", "relu", Shape{6, 10}, true);
  expect_dense_layer_identical("mixed_float16", "relu", Shape{6, 10}, true);
  expect_dense_layer_identical("mixed_bfloat16", "gelu", Shape{2, 3, 10}, true);
  expect_dense_layer_identical("mixed_float16", "linear", Shape{6, 10}, false);
  expect_dense_layer_identical("mixed_float16", "sigmoid", Shape{6, 10}, true);  // not fused
}

TEST(DenseOp, Errors) {
  const Tensor x = normal(Shape{4, 6}, 1);
  const Tensor w = normal(Shape{6, 3}, 2);
  testing::expect_error<ShapeError>(
      [&] {
        dense_forward(x, normal(Shape{5, 3}, 2), Tensor(), DenseActivation::relu);
      },
      {"kernel (K, N)", "(5, 3)"});
  testing::expect_error<ShapeError>(
      [&] { dense_forward(x, w, normal(Shape{4}, 3), DenseActivation::relu); },
      {"bias of shape (3,)"});
  testing::expect_error<ShapeError>(
      [&] { dense_forward(normal(Shape{6}, 1), w, Tensor(), DenseActivation::linear); },
      {"(batch, ..., K)"});
  testing::expect_error<DTypeError>(
      [&] {
        dense_forward(zeros(Shape{4, 6}, {.dtype = DType::int32}), w, Tensor(),
                      DenseActivation::linear);
      },
      {"int32"});
}

}  // namespace
}  // namespace mixprec
