// Conv2D + bias + relu / relu6 as one op (ops/conv_activation.h): the same values and gradients as
// the composition relu(conv2d(...)) bit for bit in every dtype and on each convolution path
// (oneDNN, the matmul paths, the reference loops), NaN kept, the in-place kernel alone, and the
// Conv2D layer using it.
#include "ops/conv_activation.h"

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/node.h"
#include "backend/cpu/activation_in_place.h"
#include "backend/cpu/conv.h"
#include "mixprec/mixprec.h"
#include "ops/batch_norm_activation.h"
#include "support/expect_error.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::normal;

struct Result {
  Tensor y, dx, dw, db;
};

Result run(bool fused, UnaryOp act, const Tensor& x0, const Tensor& w0, const Tensor& b0,
           const Conv2dOptions& options) {
  Tensor x = x0.detach(), w = w0.detach(), b = b0.detach();
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  const Tensor y = fused ? ops::conv2d_activation(x, w, b, options, act)
                         : testing::activation(act, conv2d(x, w, b, options));
  const Tensor dy = normal(y.shape(), 91, y.dtype());
  const auto g = grad(sum(mul(y, dy)), {x, w, b});
  return {y, g[0], g[1], g[2]};
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  const auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  ASSERT_EQ(va.size(), vb.size()) << what;
  for (std::size_t i = 0; i < va.size(); ++i) {
    const bool same = va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i]));
    ASSERT_TRUE(same) << what << " element " << i << ": " << va[i] << " vs " << vb[i];
  }
}

TEST(ConvActivation, SameBitsAsTheCompositionOnEveryPath) {
  struct Geometry {
    Shape x, w;
    Conv2dOptions options;
  };
  const std::vector<Geometry> geometries = {
      {{2, 9, 9, 3}, {3, 3, 3, 8}, {.padding = Padding::same}},  // oneDNN
      {{2, 5, 5, 16}, {1, 1, 16, 12}, {}},                       // pointwise matmul
      {{2, 4, 4, 6}, {3, 3, 6, 5}, {.padding = Padding::same}},  // im2col
      {{1, 7, 6, 4}, {2, 3, 4, 6}, {.strides = {2, 1}}},         // oneDNN, strided
  };
  for (UnaryOp act : {UnaryOp::relu, UnaryOp::relu6}) {
    for (DType dtype : {DType::float32, DType::bfloat16, DType::float16, DType::float64}) {
      for (const Geometry& geo : geometries) {
        // Values around the kinks at 0 and 6: weights large enough to reach past 6.
        const Tensor x = normal(geo.x, 90, dtype), w = normal(geo.w, 92, dtype, 2.0);
        const Tensor b = normal(Shape{geo.w[3]}, 93, dtype);
        const Result fused = run(true, act, x, w, b, geo.options);
        const Result plain = run(false, act, x, w, b, geo.options);
        const std::string what = std::string(op_name(act)) + " " + std::string(dtype_name(dtype)) +
                                 " " + geo.x.to_string() + " * " + geo.w.to_string();
        expect_same_bits(fused.y, plain.y, what + " y");
        expect_same_bits(fused.dx, plain.dx, what + " dx");
        expect_same_bits(fused.dw, plain.dw, what + " dw");
        expect_same_bits(fused.db, plain.db, what + " db");
        if (act == UnaryOp::relu6) {
          const auto v = fused.y.to_vector<double>();
          bool clipped = false;
          for (double e : v) clipped = clipped || e == 6.0;
          EXPECT_TRUE(clipped) << what << ": no value reached the relu6 kink";
        }
      }
    }
  }
}

TEST(ConvActivation, NanStaysNan) {
  std::vector<float> xs(2 * 3 * 3 * 2, 1.0f);
  xs[4] = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = from_vector(xs, {2, 3, 3, 2});
  const Tensor w = full({1, 1, 2, 3}, -1.0);  // every finite output negative: relu gives 0
  for (UnaryOp act : {UnaryOp::relu, UnaryOp::relu6}) {
    const auto y = ops::conv2d_activation(x, w, Tensor(), {}, act).to_vector<float>();
    EXPECT_TRUE(std::isnan(y[6]) && std::isnan(y[7]) && std::isnan(y[8])) << op_name(act);
    EXPECT_EQ(y[0], 0.0f);
  }
}

TEST(ConvActivation, InPlaceKernelMatchesTheUnaryOps) {
  for (DType dtype : {DType::float32, DType::bfloat16, DType::float16, DType::float64}) {
    const Tensor x = normal({70001}, 94, dtype, 5.0);  // parallel, with a tail
    for (UnaryOp act : {UnaryOp::relu, UnaryOp::relu6}) {
      Tensor y = add(x, zeros(x.shape(), {.dtype = dtype}));  // a fresh copy
      cpu::activation_in_place(y, act);
      expect_same_bits(y, testing::activation(act, x), std::string(dtype_name(dtype)));
    }
  }
  testing::expect_error<Error>([] { cpu::activation_in_place(zeros({4}), UnaryOp::sigmoid); },
                               {"relu or relu6 only", "sigmoid"});
  testing::expect_error<ValueError>(
      [] {
        ops::conv2d_activation(zeros({1, 3, 3, 1}), zeros({1, 1, 1, 1}), Tensor(), {},
                               UnaryOp::tanh);
      },
      {"relu or relu6 only"});
}

// The Conv2D layer takes the fused op for relu (one autograd node) and, with fusion off, the
// composition (two); the outputs agree bit for bit.
TEST(ConvActivation, Conv2DLayerUsesTheFusedOp) {
  const Tensor x = normal({2, 6, 6, 3}, 95, DType::float32);
  Tensor outputs[2];
  std::string names[2];
  for (bool fusion : {true, false}) {
    ops::set_batch_norm_activation_fusion(fusion);
    set_seed(7);
    layers::Conv2D conv(4, 3, {.activation = "relu"});
    const Tensor y = conv(x);
    outputs[fusion] = y;
    names[fusion] = y.grad_fn() ? y.grad_fn()->name() : std::string("none");
  }
  ops::set_batch_norm_activation_fusion(std::nullopt);
  expect_same_bits(outputs[1], outputs[0], "layer output");
  EXPECT_EQ(names[1], "Conv2dreluBackward");
  EXPECT_EQ(names[0], "reluBackward");
}

}  // namespace
}  // namespace mixprec
