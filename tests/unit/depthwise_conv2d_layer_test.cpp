// DepthwiseConv2D: forward against naive loops written here (channel c * M + m
// reads input channel c), strides/same padding, Keras parameter counts, dtype
// under mixed policies, parity, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/layers/depthwise_conv2d.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::PolicyGuard;

// x (N, H, W, C), k (KH, KW, C, M), b (C * M) -> (N, OH, OW, C * M), TensorFlow
// padding rules.
Tensor naive_depthwise(const Tensor& x_t, const Tensor& k_t, const Tensor& b_t, int stride,
                       bool same, int dilation = 1) {
  const auto x = x_t.to_vector<double>(), k = k_t.to_vector<double>();
  const std::vector<double> b = b_t.defined() ? b_t.to_vector<double>() : std::vector<double>{};
  const std::int64_t N = x_t.dim(0), H = x_t.dim(1), W = x_t.dim(2), C = x_t.dim(3);
  const std::int64_t KH = k_t.dim(0), KW = k_t.dim(1), M = k_t.dim(3);
  const std::int64_t wh = dilation * (KH - 1) + 1, ww = dilation * (KW - 1) + 1;
  std::int64_t OH, OW, top = 0, left = 0;
  if (same) {
    OH = (H + stride - 1) / stride;
    OW = (W + stride - 1) / stride;
    top = std::max<std::int64_t>((OH - 1) * stride + wh - H, 0) / 2;
    left = std::max<std::int64_t>((OW - 1) * stride + ww - W, 0) / 2;
  } else {
    OH = (H - wh) / stride + 1;
    OW = (W - ww) / stride + 1;
  }
  std::vector<double> y(static_cast<std::size_t>(N * OH * OW * C * M));
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow)
        for (std::int64_t c = 0; c < C; ++c)
          for (std::int64_t m = 0; m < M; ++m) {
            double acc = b.empty() ? 0.0 : b[static_cast<std::size_t>(c * M + m)];
            for (std::int64_t kh = 0; kh < KH; ++kh)
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const std::int64_t ih = oh * stride - top + kh * dilation;
                const std::int64_t iw = ow * stride - left + kw * dilation;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x[static_cast<std::size_t>(((n * H + ih) * W + iw) * C + c)] *
                       k[static_cast<std::size_t>(((kh * KW + kw) * C + c) * M + m)];
              }
            y[static_cast<std::size_t>(((n * OH + oh) * OW + ow) * C * M + c * M + m)] = acc;
          }
  return from_vector(y, {N, OH, OW, C * M}, {.dtype = kFloat64});
}

TEST(DepthwiseConv2DLayerTest, MultiplierTwoStrideTwoSameMatchesNaiveLoops) {
  set_seed(21);
  layers::DepthwiseConv2D dw(3, {.strides = 2,
                                 .padding = "same",
                                 .depth_multiplier = 2,
                                 .bias_initializer = "random_normal"});
  const Tensor x = random_normal({2, 7, 6, 3});
  const Tensor y = dw(x);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 3, 6}));
  ASSERT_EQ(dw.depthwise_kernel().shape(), (Shape{3, 3, 3, 2}));
  ASSERT_EQ(dw.bias().shape(), (Shape{6}));
  EXPECT_TRUE(
      all_close(y, naive_depthwise(x, dw.depthwise_kernel(), dw.bias(), 2, true), {1e-5, 1e-5}));
}

TEST(DepthwiseConv2DLayerTest, ValidDilatedNoBiasWithActivation) {
  set_seed(22);
  layers::DepthwiseConv2D dw({3, 3},
                             {.dilation_rate = 2, .activation = "relu6", .use_bias = false});
  const Tensor x = random_normal({1, 7, 7, 4}, 0, 3);
  const Tensor y = dw(x);
  ASSERT_EQ(y.shape(), (Shape{1, 3, 3, 4}));
  std::vector<double> e =
      naive_depthwise(x, dw.depthwise_kernel(), Tensor(), 1, false, 2).to_vector<double>();
  for (double& v : e) v = std::clamp(v, 0.0, 6.0);
  EXPECT_TRUE(all_close(y, from_vector(e, {1, 3, 3, 4}), {1e-5, 1e-5}));
  EXPECT_EQ(dw.variables().size(), 1u);
}

TEST(DepthwiseConv2DLayerTest, KerasParameterCounts) {
  // Keras: DepthwiseConv2D(3) on 32 channels: 3*3*32 + 32 = 320;
  // depth_multiplier=2: 3*3*32*2 + 64 = 640; (5, 5) without bias on 144
  // channels: 3,600.
  auto in = Input({16, 16, 32});
  layers::DepthwiseConv2D a(3);
  EXPECT_EQ(a(in).shape(), (PartialShape{-1, 14, 14, 32}));
  EXPECT_EQ(a.count_params(), 320);
  layers::DepthwiseConv2D b(3, {.padding = "same", .depth_multiplier = 2});
  EXPECT_EQ(b(in).shape(), (PartialShape{-1, 16, 16, 64}));
  EXPECT_EQ(b.count_params(), 640);
  layers::DepthwiseConv2D c(5, {.strides = 2, .padding = "same", .use_bias = false});
  EXPECT_EQ(c(Input({15, 15, 144})).shape(), (PartialShape{-1, 8, 8, 144}));
  EXPECT_EQ(c.count_params(), 3600);
}

TEST(DepthwiseConv2DLayerTest, MixedFloat16KeepsFloat32VariablesAndMatchesFloat32) {
  set_seed(23);
  const Tensor x = random_normal({2, 8, 8, 6});
  layers::DepthwiseConv2D f32(3, {.padding = "same", .dtype = "float32"});
  const Tensor a = f32(x);
  PolicyGuard guard("mixed_float16");
  layers::DepthwiseConv2D mixed(3, {.padding = "same"});
  mixed(x);
  ASSERT_EQ(mixed.depthwise_kernel().dtype(), kFloat32);
  mixed.set_weights(f32.get_weights());
  const Tensor b = mixed(x);
  ASSERT_EQ(b.dtype(), kFloat16);
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    err += (av[i] - bv[i]) * (av[i] - bv[i]);
    norm += av[i] * av[i];
  }
  EXPECT_LE(std::sqrt(err / norm), 2e-3);
  const auto g = grad(sum(b.to(kFloat32)), {mixed.depthwise_kernel()});
  EXPECT_EQ(g[0].dtype(), kFloat32);
}

TEST(DepthwiseConv2DLayerTest, ErrorsNameTheLayer) {
  expect_error<ValueError>([] { layers::DepthwiseConv2D(0); }, {"kernel_size", "(0, 0)"});
  expect_error<ValueError>([] { layers::DepthwiseConv2D(3, {.depth_multiplier = 0}); },
                           {"depth_multiplier", "got 0"});
  expect_error<ValueError>([] { layers::DepthwiseConv2D(3, {.strides = 0}); }, {"strides"});
  expect_error<ValueError>([] { layers::DepthwiseConv2D(3, {.padding = "causal"}); },
                           {"'valid', 'same'", "causal"});
  layers::DepthwiseConv2D dw(3, {.name = "dw"});
  dw(Input({8, 8, 16}));
  expect_error<ShapeError>([&] { dw(Input({8, 8, 8})); }, {"dw", "16 channels", "(None, 8, 8, 8)"});
  expect_error<ShapeError>([&] { dw(zeros({8, 8, 16})); }, {"dw", "rank-4"});
  expect_error<ValueError>(
      [] { layers::DepthwiseConv2D(3, {.name = "dw_unbuilt"}).depthwise_kernel(); },
      {"dw_unbuilt", "built"});
}

}  // namespace
}  // namespace mixprec
