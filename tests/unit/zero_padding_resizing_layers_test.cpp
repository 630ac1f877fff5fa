// ZeroPadding2D (the three Keras forms of `padding`) and Resizing (bilinear,
// half-pixel centers: values against a naive interpolation written here;
// integer images; dtypes; errors).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/resizing.h"
#include "mixprec/layers/zero_padding2d.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::PolicyGuard;

// x padded with (top, bottom, left, right) zeros, in double.
Tensor naive_pad(const Tensor& x_t, int top, int bottom, int left, int right) {
  const auto x = x_t.to_vector<double>();
  const std::int64_t N = x_t.dim(0), H = x_t.dim(1), W = x_t.dim(2), C = x_t.dim(3);
  const std::int64_t OH = H + top + bottom, OW = W + left + right;
  std::vector<double> y(static_cast<std::size_t>(N * OH * OW * C), 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t w = 0; w < W; ++w)
        for (std::int64_t c = 0; c < C; ++c)
          y[static_cast<std::size_t>(((n * OH + h + top) * OW + w + left) * C + c)] =
              x[static_cast<std::size_t>(((n * H + h) * W + w) * C + c)];
  return from_vector(y, {N, OH, OW, C}, {.dtype = kFloat64});
}

TEST(ZeroPaddingResizingLayersTest, ZeroPaddingThreeForms) {
  set_seed(51);
  const Tensor x = random_normal({2, 3, 4, 2});
  layers::ZeroPadding2D all(2);
  EXPECT_TRUE(all_close(all(x), naive_pad(x, 2, 2, 2, 2), {0, 0}));
  layers::ZeroPadding2D axes(1, 3);
  EXPECT_TRUE(all_close(axes(x), naive_pad(x, 1, 1, 3, 3), {0, 0}));
  layers::ZeroPadding2D explicit_pad({0, 1}, {2, 3});
  const Tensor y = explicit_pad(x);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 9, 2}));
  EXPECT_TRUE(all_close(y, naive_pad(x, 0, 1, 2, 3), {0, 0}));
  EXPECT_EQ(explicit_pad.padding().right, 3);
  EXPECT_EQ(layers::ZeroPadding2D()(Input({224, 224, 3})).shape(), (PartialShape{-1, 226, 226, 3}));
  EXPECT_EQ(explicit_pad(Input({-1, 5, 3})).shape(), (PartialShape{-1, -1, 10, 3}));
}

TEST(ZeroPaddingResizingLayersTest, ZeroPaddingErrors) {
  expect_error<ValueError>([] { layers::ZeroPadding2D(-1); }, {">= 0", "-1"});
  expect_error<ShapeError>(
      [] {
        layers::ZeroPadding2D(1, {.name = "zp"})(Input({4, 4}));
      },
      {"zp", "rank-4"});
}

// tf.image.resize(method="bilinear"): src = (dst + 0.5) * in / out - 0.5,
// clamped to [0, in-1] for the neighbours; weights from the fractional part
// (below 0: the first row).
Tensor naive_resize(const Tensor& x_t, std::int64_t OH, std::int64_t OW) {
  const auto x = x_t.to_vector<double>();
  const std::int64_t N = x_t.dim(0), H = x_t.dim(1), W = x_t.dim(2), C = x_t.dim(3);
  auto axis = [](std::int64_t out, std::int64_t in, std::int64_t d, std::int64_t& i0,
                 std::int64_t& i1, double& frac) {
    double s =
        (static_cast<double>(d) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
    s = std::max(s, 0.0);
    i0 = std::min(static_cast<std::int64_t>(std::floor(s)), in - 1);
    i1 = std::min(i0 + 1, in - 1);
    frac = s - static_cast<double>(i0);
  };
  std::vector<double> y;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        std::int64_t h0, h1, w0, w1;
        double fh, fw;
        axis(OH, H, oh, h0, h1, fh);
        axis(OW, W, ow, w0, w1, fw);
        for (std::int64_t c = 0; c < C; ++c) {
          auto at = [&](std::int64_t h, std::int64_t w) {
            return x[static_cast<std::size_t>(((n * H + h) * W + w) * C + c)];
          };
          const double top = at(h0, w0) * (1 - fw) + at(h0, w1) * fw;
          const double bottom = at(h1, w0) * (1 - fw) + at(h1, w1) * fw;
          y.push_back(top * (1 - fh) + bottom * fh);
        }
      }
  return from_vector(y, {N, OH, OW, C}, {.dtype = kFloat64});
}

TEST(ZeroPaddingResizingLayersTest, ResizingBilinearUpAndDown) {
  set_seed(52);
  const Tensor x = random_normal({2, 4, 5, 3});
  layers::Resizing up(7, 12);
  const Tensor y = up(x);
  ASSERT_EQ(y.shape(), (Shape{2, 7, 12, 3}));
  EXPECT_TRUE(all_close(y, naive_resize(x, 7, 12), {1e-5, 1e-6}));
  layers::Resizing down(3, 2);
  EXPECT_TRUE(all_close(down(x), naive_resize(x, 3, 2), {1e-5, 1e-6}));
  layers::Resizing same(4, 5);
  EXPECT_TRUE(all_close(same(x), x, {1e-6, 1e-7}));
  // Seed 002: CIFAR 32x32 -> 224x224.
  EXPECT_EQ(layers::Resizing(224, 224)(Input({32, 32, 3})).shape(),
            (PartialShape{-1, 224, 224, 3}));
}

TEST(ZeroPaddingResizingLayersTest, ResizingTakesIntegerImagesAndOutputsTheComputeDtype) {
  PolicyGuard guard("mixed_float16");
  const Tensor pixels =
      from_vector(std::vector<std::int32_t>{0, 255, 100, 50}, {1, 2, 2, 1}).to(kUInt8);
  layers::Resizing r(4, 4);
  const Tensor y = r(pixels);
  EXPECT_EQ(y.dtype(), kFloat16);
  EXPECT_TRUE(all_close(y, naive_resize(pixels.to(kFloat32), 4, 4), {1e-3, 1e-3}));
  EXPECT_EQ(r(Input({2, 2, 1}, {.dtype = kUInt8})).dtype(), kFloat16);
}

TEST(ZeroPaddingResizingLayersTest, ResizingErrors) {
  expect_error<ValueError>([] { layers::Resizing(0, 4); }, {"positive", "(0, 4)"});
  expect_error<ValueError>([] { layers::Resizing(4, 4, {.interpolation = "nearest"}); },
                           {"'bilinear'", "nearest"});
  expect_error<ShapeError>(
      [] {
        layers::Resizing(4, 4, {.name = "rs"})(Input({4, 4}));
      },
      {"rs", "rank-4"});
}

}  // namespace
}  // namespace mixprec
