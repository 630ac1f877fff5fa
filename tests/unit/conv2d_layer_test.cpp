// Conv2D: forward values against naive loops written here (TensorFlow's `same`
// padding with the odd row/column after the input, strides, dilation, groups,
// bias, activation), Keras parameter counts and initializer fans, output shapes
// (eager and symbolic), gradients reaching float32 variables under
// mixed_float16, mixed-vs-float32 parity (DESIGN §4: 2e-3) and the error
// messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/layers/conv2d.h"
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

struct NaiveConv {
  int stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1, groups = 1;
  bool same = false;
};

// y[n, oh, ow, f] = b[f] + sum over (kh, kw, ci in f's group) of
//   x[n, oh * sh - pad_top + kh * dh, ow * sw - pad_left + kw * dw, g * cin_g +
//   ci] * k[kh, kw, ci, f]
// with x (N, H, W, C), k (KH, KW, C / groups, F), in double.
Tensor naive_conv(const Tensor& x_t, const Tensor& k_t, const Tensor& b_t, const NaiveConv& p) {
  const auto x = x_t.to_vector<double>(), k = k_t.to_vector<double>();
  const std::vector<double> b = b_t.defined() ? b_t.to_vector<double>() : std::vector<double>{};
  const std::int64_t N = x_t.dim(0), H = x_t.dim(1), W = x_t.dim(2), C = x_t.dim(3);
  const std::int64_t KH = k_t.dim(0), KW = k_t.dim(1), CG = k_t.dim(2), F = k_t.dim(3);
  const std::int64_t FG = F / p.groups;
  const std::int64_t win_h = p.dil_h * (KH - 1) + 1, win_w = p.dil_w * (KW - 1) + 1;
  std::int64_t OH, OW, pad_top = 0, pad_left = 0;
  if (p.same) {
    OH = (H + p.stride_h - 1) / p.stride_h;
    OW = (W + p.stride_w - 1) / p.stride_w;
    pad_top = std::max<std::int64_t>((OH - 1) * p.stride_h + win_h - H, 0) / 2;
    pad_left = std::max<std::int64_t>((OW - 1) * p.stride_w + win_w - W, 0) / 2;
  } else {
    OH = (H - win_h) / p.stride_h + 1;
    OW = (W - win_w) / p.stride_w + 1;
  }
  std::vector<double> y(static_cast<std::size_t>(N * OH * OW * F));
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow)
        for (std::int64_t f = 0; f < F; ++f) {
          double acc = b.empty() ? 0.0 : b[static_cast<std::size_t>(f)];
          const std::int64_t g = f / FG;
          for (std::int64_t kh = 0; kh < KH; ++kh)
            for (std::int64_t kw = 0; kw < KW; ++kw) {
              const std::int64_t ih = oh * p.stride_h - pad_top + kh * p.dil_h;
              const std::int64_t iw = ow * p.stride_w - pad_left + kw * p.dil_w;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              for (std::int64_t ci = 0; ci < CG; ++ci) {
                acc += x[static_cast<std::size_t>(((n * H + ih) * W + iw) * C + g * CG + ci)] *
                       k[static_cast<std::size_t>(((kh * KW + kw) * CG + ci) * F + f)];
              }
            }
          y[static_cast<std::size_t>(((n * OH + oh) * OW + ow) * F + f)] = acc;
        }
  return from_vector(y, {N, OH, OW, F}, {.dtype = kFloat64});
}

TEST(Conv2DLayerTest, SameStride2OddSizesMatchesNaiveLoops) {
  set_seed(3);
  layers::Conv2D conv(4, 3, {.strides = 2, .padding = "same", .bias_initializer = "random_normal"});
  const Tensor x = random_normal({2, 5, 7, 3});
  const Tensor y = conv(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(y.dtype(), kFloat32);
  const Tensor expected =
      naive_conv(x, conv.kernel(), conv.bias(), {.stride_h = 2, .stride_w = 2, .same = true});
  EXPECT_TRUE(all_close(y, expected, {1e-5, 1e-5}));
}

TEST(Conv2DLayerTest, ValidDilationGroupsNoBiasMatchesNaiveLoops) {
  set_seed(4);
  layers::Conv2D conv(6, {3, 2},
                      {.padding = mixprec::Padding::valid,
                       .dilation_rate = {2, 1},
                       .groups = 2,
                       .use_bias = false});
  const Tensor x = random_normal({1, 8, 6, 4});
  const Tensor y = conv(x);
  ASSERT_EQ(y.shape(), (Shape{1, 4, 5, 6}));  // 8 - (2 * 2 + 1) + 1, 6 - 2 + 1
  ASSERT_EQ(conv.kernel().shape(), (Shape{3, 2, 2, 6}));
  EXPECT_FALSE(conv.bias().defined());
  ASSERT_EQ(conv.variables().size(), 1u);
  const Tensor expected =
      naive_conv(x, conv.kernel(), Tensor(), {.dil_h = 2, .dil_w = 1, .groups = 2});
  EXPECT_TRUE(all_close(y, expected, {1e-5, 1e-5}));
}

TEST(Conv2DLayerTest, ActivationIsAppliedByName) {
  set_seed(5);
  layers::Conv2D conv(3, 1, {.activation = "relu", .bias_initializer = "random_normal"});
  const Tensor x = random_normal({2, 3, 3, 2});
  const Tensor y = conv(x);
  std::vector<double> e = naive_conv(x, conv.kernel(), conv.bias(), {}).to_vector<double>();
  for (double& v : e) v = std::max(v, 0.0);
  EXPECT_TRUE(all_close(y, from_vector(e, {2, 3, 3, 3}), {1e-5, 1e-6}));
  EXPECT_EQ(conv.activation(), "relu");
}

TEST(Conv2DLayerTest, KerasParameterCountsAndShapes) {
  // Keras: Conv2D(32, 3) on (28, 28, 1) has 3*3*1*32 + 32 = 320 parameters,
  // output (26, 26, 32); Conv2D(64, 3, padding="same") on 32 channels 3*3*32*64
  // + 64 = 18,496; groups=4 divides the kernel's input axis by 4: 3*3*8*64 + 64
  // = 4,672.
  auto in = Input({28, 28, 1});
  layers::Conv2D a(32, 3);
  auto x = a(in);
  EXPECT_EQ(x.shape(), (PartialShape{-1, 26, 26, 32}));
  EXPECT_EQ(a.count_params(), 320);
  layers::Conv2D b(64, 3, {.padding = "same"});
  auto y = b(x);
  EXPECT_EQ(y.shape(), (PartialShape{-1, 26, 26, 64}));
  EXPECT_EQ(b.count_params(), 18496);
  layers::Conv2D c(64, 3, {.strides = 2, .padding = "same", .groups = 4});
  EXPECT_EQ(c(x).shape(), (PartialShape{-1, 13, 13, 64}));
  EXPECT_EQ(c.count_params(), 4672);
  EXPECT_EQ(c.kernel().shape(), (Shape{3, 3, 8, 64}));
  // Unknown spatial extents stay unknown.
  EXPECT_EQ(layers::Conv2D(8, 3)(Input({-1, -1, 3})).shape(), (PartialShape{-1, -1, -1, 8}));
}

TEST(Conv2DLayerTest, DefaultInitializersAreGlorotUniformWithReceptiveFieldFans) {
  layers::Conv2D conv(16, 3);
  conv(Input({8, 8, 8}));
  // fan_in = 3*3*8 = 72, fan_out = 3*3*16 = 144.
  const double limit = std::sqrt(6.0 / (72 + 144));
  const auto k = conv.kernel().to_vector<double>();
  ASSERT_EQ(k.size(), 3u * 3 * 8 * 16);
  const auto [lo, hi] = std::minmax_element(k.begin(), k.end());
  EXPECT_GE(*lo, -limit);
  EXPECT_LE(*hi, limit);
  EXPECT_LT(*lo, -0.9 * limit);
  EXPECT_GT(*hi, 0.9 * limit);
  for (double v : conv.bias().to_vector<double>()) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(conv.named_variables()[0].name, conv.name() + "/kernel");
  EXPECT_EQ(conv.named_variables()[1].name, conv.name() + "/bias");
}

TEST(Conv2DLayerTest, MixedFloat16VariablesFloat32OutputFloat16Gradients32) {
  PolicyGuard guard("mixed_float16");
  layers::Conv2D conv(2, 2);
  // Exact in float16: every product and sum is a small dyadic rational.
  const Tensor x =
      from_vector(std::vector<double>{0.5, -1, 2, 0.25, 1.5, -0.75, 3, 1, -2}, {1, 3, 3, 1});
  const Tensor y = conv(x);
  ASSERT_EQ(y.dtype(), kFloat16);
  ASSERT_EQ(conv.kernel().dtype(), kFloat32);
  ASSERT_EQ(conv.bias().dtype(), kFloat32);
  const auto g = grad(sum(y.to(kFloat32)), {conv.kernel(), conv.bias()});
  ASSERT_EQ(g[0].dtype(), kFloat32);
  ASSERT_EQ(g[1].dtype(), kFloat32);
  // d sum(y) / dk[kh, kw, 0, f] = sum over the 2x2 outputs of x[oh + kh, ow +
  // kw].
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> gk;
  for (int kh = 0; kh < 2; ++kh)
    for (int kw = 0; kw < 2; ++kw) {
      double s = 0;
      for (int oh = 0; oh < 2; ++oh)
        for (int ow = 0; ow < 2; ++ow) s += xv[static_cast<std::size_t>((oh + kh) * 3 + ow + kw)];
      gk.push_back(s);
      gk.push_back(s);  // both filters
    }
  EXPECT_EQ(g[0].to_vector<double>(), gk);
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{4, 4}));
}

// Relative RMS error of `b` against `a`.
double relative_rms(const Tensor& a, const Tensor& b) {
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    err += (av[i] - bv[i]) * (av[i] - bv[i]);
    norm += av[i] * av[i];
  }
  return std::sqrt(err / norm);
}

TEST(Conv2DLayerTest, MixedPoliciesMatchFloat32) {
  set_seed(8);
  const Tensor x = random_normal({2, 9, 9, 8});
  layers::Conv2D f32(16, 3,
                     {.padding = "same", .bias_initializer = "random_normal", .dtype = "float32"});
  const Tensor a = f32(x);
  for (const char* policy : {"mixed_float16", "mixed_bfloat16"}) {
    SCOPED_TRACE(policy);
    layers::Conv2D low(16, 3, {.padding = "same", .dtype = policy});
    low(x);
    low.set_weights(f32.get_weights());
    const Tensor b = low(x);
    ASSERT_EQ(b.dtype(), mixed_precision::Policy(policy).compute_dtype());
    // Inputs and weights rounded to 8 (bfloat16) or 11 (float16) significant
    // bits.
    EXPECT_LE(relative_rms(a, b), std::string(policy) == "mixed_float16" ? 2e-3 : 1e-2);
  }
}

TEST(Conv2DLayerTest, BadArgumentsAreValueErrors) {
  expect_error<ValueError>([] { layers::Conv2D(0, 3); }, {"filters must be positive", "got 0"});
  expect_error<ValueError>([] { layers::Conv2D(4, {3, 0}); }, {"kernel_size", "(3, 0)"});
  expect_error<ValueError>([] { layers::Conv2D(4, 3, {.strides = -1}); },
                           {"strides must be positive", "(-1, -1)"});
  expect_error<ValueError>(
      [] {
        layers::Conv2D(4, 3, {.dilation_rate = {1, 0}});
      },
      {"dilation_rate"});
  expect_error<ValueError>([] { layers::Conv2D(6, 3, {.groups = 4}); },
                           {"filters (6)", "divisible by groups (4)"});
  expect_error<ValueError>([] { layers::Conv2D(4, 3, {.padding = "full"}); },
                           {"'valid', 'same'", "'full'"});
  expect_error<ValueError>([] { layers::Conv2D(4, 3, {.activation = "relux"}); },
                           {"relux", "relu"});
  // Keras spellings in any case.
  EXPECT_EQ(layers::Conv2D(4, 3, {.padding = "SAME"}).padding().value(), Padding::same);
}

TEST(Conv2DLayerTest, ShapeErrorsNameTheLayer) {
  layers::Conv2D conv(4, 3, {.name = "features"});
  expect_error<ShapeError>(
      [&] {
        conv(zeros({2, 8, 8}));
      },
      {"features", "rank-4", "(2, 8, 8)", "Reshape"});
  conv(Input({8, 8, 3}));
  // Channel mismatch with what the layer was built for (the previous layer's
  // output changed).
  expect_error<ShapeError>(
      [&] {
        conv(Input({8, 8, 5}));
      },
      {"features", "3 channels", "(None, 8, 8, 5)"});
  expect_error<ShapeError>([&] { conv(zeros({1, 8, 8, 5})); }, {"features", "3 channels"});
  // groups must divide the input channels.
  expect_error<ShapeError>(
      [] {
        layers::Conv2D(4, 1, {.groups = 2, .name = "g"})(Input({4, 4, 3}));
      },
      {"g", "groups = 2", "(None, 4, 4, 3)"});
  // A kernel larger than a valid input.
  expect_error<ValueError>(
      [] {
        layers::Conv2D(4, 5, {.name = "big"})(Input({3, 8, 1}));
      },
      {"big", "height", "larger than the input"});
  expect_error<DTypeError>(
      [] {
        layers::Conv2D(4, 1)(Input({4, 4, 1}, {.dtype = kUInt8}));
      },
      {"floating", "uint8"});
  expect_error<ValueError>([] { layers::Conv2D(4, 3, {.name = "unbuilt"}).kernel(); },
                           {"unbuilt", "built"});
}

TEST(Conv2DLayerTest, ChannelMismatchBetweenLayersInAModelNamesTheLayer) {
  auto in = Input({8, 8, 3});
  layers::Conv2D first(8, 3, {.padding = "same", .name = "first"});
  layers::Conv2D shared(4, 3, {.name = "second"});
  shared(first(in));  // built for 8 channels
  expect_error<ShapeError>([&] { shared(in); }, {"second", "8 channels", "(None, 8, 8, 3)"});
}

}  // namespace
}  // namespace mixprec
