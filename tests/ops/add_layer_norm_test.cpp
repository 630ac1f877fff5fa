// The fused residual step (ops/add_layer_norm.h): add_layer_norm / add_rms_norm against add then
// layer_norm / rms_norm, bit for bit, forward (the sum, y) and backward (the gradients of a, b,
// gamma and beta when both the sum and y feed the loss, as in a pre-norm block), in float32,
// float64 and with 16-bit inputs and float32 parameters (the mixed policies); rows that the CPU
// kernel splits over threads, rows of one feature, strided inputs, no parameters; the autograd
// nodes; a float64 gradcheck; and the errors.
#include "ops/add_layer_norm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mixprec/mixprec.h"
#include "mixprec/transformer_ops.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::gradcheck;
using testing::normal;

constexpr double kEps = 1e-5;

void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!got.defined()) return;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor g = got.detach().contiguous(), w = want.detach().contiguous();
  ASSERT_EQ(std::memcmp(g.data_ptr(), w.data_ptr(), g.nbytes()), 0) << what;
}

std::string node_name(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "leaf"; }

struct Case {
  Shape shape;
  bool params = true;
  bool strided = false;  // a is a transposed view
};

struct Leaves {
  Tensor a, b, gamma, beta;
};

// Fresh leaves (requiring grad) holding the same values for each run.
Leaves leaves(const Case& c, DType dtype, DType param) {
  const std::int64_t features = c.shape[c.shape.rank() - 1];
  Leaves l;
  if (c.strided) {
    // (rows, C) as the transpose of a (C, rows) tensor: not contiguous.
    const Tensor t = normal(Shape{features, c.shape.numel() / features}, 31, 1.0, 2.0, dtype);
    l.a = t.transpose(0, 1).reshape(c.shape);
  } else {
    l.a = normal(c.shape, 31, 1.0, 2.0, dtype);  // off-centre rows
  }
  l.b = normal(c.shape, 32, 0.0, 1.0, dtype);
  l.a = l.a.detach().set_requires_grad(true);
  l.b = l.b.set_requires_grad(true);
  if (c.params) {
    l.gamma = normal({features}, 33, 1.0, 0.5, param).set_requires_grad(true);
    l.beta = normal({features}, 34, 0.0, 0.5, param).set_requires_grad(true);
  }
  return l;
}

// sum, y, then the gradients of sum(y * dy) + sum(sum * ds) for a, b, gamma, beta.
std::vector<Tensor> run(const Case& c, DType dtype, DType param, bool rms, bool fused) {
  const Leaves l = leaves(c, dtype, param);
  Tensor s, y;
  if (fused) {
    ops::AddNormOutput out = rms ? ops::add_rms_norm(l.a, l.b, l.gamma, kEps)
                                 : ops::add_layer_norm(l.a, l.b, l.gamma, l.beta, kEps);
    EXPECT_EQ(node_name(out.sum), "AddNormSumBackward");
    EXPECT_EQ(node_name(out.y), rms ? "RmsNormBackward" : "LayerNormBackward");
    s = out.sum, y = out.y;
  } else {
    s = add(l.a, l.b);
    y = rms ? rms_norm(s, l.gamma, kEps) : layer_norm(s, l.gamma, l.beta, kEps);
  }
  const Tensor dy = normal(c.shape, 35, 0.0, 1.0, dtype);
  const Tensor ds = normal(c.shape, 36, 0.0, 1.0, dtype);
  std::vector<Tensor> wrt{l.a, l.b};
  if (c.params) {
    wrt.push_back(l.gamma);
    if (!rms) wrt.push_back(l.beta);
  }
  const std::vector<Tensor> g = grad(add(sum(mul(y, dy)), sum(mul(s, ds))), wrt);
  std::vector<Tensor> out{s, y};
  out.insert(out.end(), g.begin(), g.end());
  return out;
}

void expect_fused_equals_composed(DType dtype, DType param) {
  const Case cases[] = {
      {Shape{4, 7, 96}},           // one thread
      {Shape{64, 9, 72}},          // rows over threads (>= 2^15 elements)
      {Shape{3, 300}},             // rows wider than the CUDA block
      {Shape{5, 4, 1}},            // one feature: y = beta
      {Shape{6, 40}, false},       // no gamma, no beta
      {Shape{12, 24}, true, true}  // a strided view
  };
  const char* names[] = {"sum", "y", "da", "db", "dgamma", "dbeta"};
  for (const bool rms : {false, true}) {
    for (const Case& c : cases) {
      const std::string what = std::string(dtype_name(dtype)) + (rms ? " rms " : " layer ") +
                               c.shape.to_string() + (c.params ? "" : " no params") +
                               (c.strided ? " strided" : "");
      const std::vector<Tensor> fused = run(c, dtype, param, rms, true);
      const std::vector<Tensor> plain = run(c, dtype, param, rms, false);
      ASSERT_EQ(fused.size(), plain.size()) << what;
      for (std::size_t i = 0; i < fused.size(); ++i) {
        expect_same_bits(fused[i], plain[i], what + " " + names[i]);
      }
    }
  }
}

TEST(AddLayerNormTest, Float32EqualsAddThenNormBitForBit) {
  expect_fused_equals_composed(DType::float32, DType::float32);
}

TEST(AddLayerNormTest, MixedFloat16EqualsAddThenNormBitForBit) {
  expect_fused_equals_composed(DType::float16, DType::float32);
}

TEST(AddLayerNormTest, MixedBFloat16EqualsAddThenNormBitForBit) {
  expect_fused_equals_composed(DType::bfloat16, DType::float32);
}

TEST(AddLayerNormTest, Float64EqualsAddThenNormBitForBit) {
  expect_fused_equals_composed(DType::float64, DType::float64);
}

TEST(AddLayerNormTest, SixteenBitParameters) {
  // gamma and beta in x's own 16-bit dtype (layer_norm accepts them too).
  expect_fused_equals_composed(DType::bfloat16, DType::bfloat16);
}

TEST(AddLayerNormTest, WithoutAutogradNothingIsRecorded) {
  const Tensor a = normal({3, 16}, 1, 0.0, 1.0, DType::float16);
  const Tensor b = normal({3, 16}, 2, 0.0, 1.0, DType::float16);
  const Tensor gamma = normal({16}, 3, 1.0, 0.1, DType::float32);
  const ops::AddNormOutput out = ops::add_layer_norm(a, b, gamma, Tensor(), kEps);
  EXPECT_FALSE(out.sum.grad_fn());
  EXPECT_FALSE(out.y.grad_fn());
  expect_same_bits(out.sum, add(a, b), "sum");
  expect_same_bits(out.y, layer_norm(add(a, b), gamma, Tensor(), kEps), "y");
}

TEST(AddLayerNormTest, GradcheckFloat64) {
  for (const bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "rms" : "layer");
    const std::vector<Tensor> in{normal({3, 2, 5}, 41, 0.5, 1.0, DType::float64),
                                 normal({3, 2, 5}, 42, 0.0, 1.0, DType::float64),
                                 normal({5}, 43, 1.0, 0.3, DType::float64),
                                 normal({5}, 44, 0.0, 0.3, DType::float64)};
    // Both outputs feed the result (the sum also squared): the gradient reaching the sum is the
    // normalization's plus the other reader's.
    EXPECT_TRUE(gradcheck(
        [rms](const std::vector<Tensor>& x) {
          const ops::AddNormOutput out = rms ? ops::add_rms_norm(x[0], x[1], x[2], kEps)
                                             : ops::add_layer_norm(x[0], x[1], x[2], x[3], kEps);
          return add(out.y, mul(out.sum, out.sum));
        },
        in));
  }
}

TEST(AddLayerNormTest, Errors) {
  const Tensor a = ones({2, 3});
  const Tensor g = ones({3});
  EXPECT_THROW(ops::add_layer_norm(a, ones({3}), g, g, kEps), ShapeError);  // no broadcast
  EXPECT_THROW(ops::add_layer_norm(a, ones({2, 3}, {.dtype = DType::float16}), g, g, kEps),
               DTypeError);
  EXPECT_THROW(ops::add_layer_norm(a, a, ones({4}), g, kEps), ShapeError);
  EXPECT_THROW(ops::add_layer_norm(a, a, g, g, 0.0), ValueError);
  EXPECT_THROW(ops::add_rms_norm(ones({2}, {.dtype = DType::int32}),
                                 ones({2}, {.dtype = DType::int32}), Tensor(), kEps),
               DTypeError);
  try {
    ops::add_layer_norm(a, ones({3}), g, g, kEps);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("add_layer_norm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec
