// MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D: values against naive
// loops written here (TensorFlow `same` padding, average over the real elements
// only), default strides = pool_size, shapes, dtypes, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/pooling.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::PolicyGuard;

enum class Kind { max, avg };

Tensor naive_pool(const Tensor& x_t, Kind kind, int ph, int pw, int sh, int sw, bool same) {
  const auto x = x_t.to_vector<double>();
  const std::int64_t N = x_t.dim(0), H = x_t.dim(1), W = x_t.dim(2), C = x_t.dim(3);
  std::int64_t OH, OW, top = 0, left = 0;
  if (same) {
    OH = (H + sh - 1) / sh;
    OW = (W + sw - 1) / sw;
    top = std::max<std::int64_t>((OH - 1) * sh + ph - H, 0) / 2;
    left = std::max<std::int64_t>((OW - 1) * sw + pw - W, 0) / 2;
  } else {
    OH = (H - ph) / sh + 1;
    OW = (W - pw) / sw + 1;
  }
  std::vector<double> y;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow)
        for (std::int64_t c = 0; c < C; ++c) {
          double best = -std::numeric_limits<double>::infinity(), total = 0;
          int count = 0;
          for (int i = 0; i < ph; ++i)
            for (int j = 0; j < pw; ++j) {
              const std::int64_t ih = oh * sh - top + i, iw = ow * sw - left + j;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const double v = x[static_cast<std::size_t>(((n * H + ih) * W + iw) * C + c)];
              best = std::max(best, v);
              total += v;
              ++count;
            }
          y.push_back(kind == Kind::max ? best : total / count);
        }
  return from_vector(y, {N, OH, OW, C}, {.dtype = kFloat64});
}

TEST(PoolingLayersTest, MaxPoolingDefaultsToStridesEqualPoolSize) {
  set_seed(41);
  layers::MaxPooling2D pool;  // pool 2, strides 2, valid
  EXPECT_EQ(pool.strides(), layers::Size2d(2));
  const Tensor x = random_normal({2, 5, 4, 3});
  const Tensor y = pool(x);
  ASSERT_EQ(y.shape(), (Shape{2, 2, 2, 3}));
  EXPECT_TRUE(all_close(y, naive_pool(x, Kind::max, 2, 2, 2, 2, false), {0, 0}));
}

TEST(PoolingLayersTest, MaxPoolingSameWithStrides) {
  set_seed(42);
  layers::MaxPooling2D pool(3, {.strides = {2, 1}, .padding = "same"});
  const Tensor x = random_normal({1, 6, 5, 2});
  const Tensor y = pool(x);
  ASSERT_EQ(y.shape(), (Shape{1, 3, 5, 2}));
  EXPECT_TRUE(all_close(y, naive_pool(x, Kind::max, 3, 3, 2, 1, true), {0, 0}));
}

TEST(PoolingLayersTest, AveragePoolingSameDividesByRealElements) {
  set_seed(43);
  layers::AveragePooling2D pool(3, {.strides = 2, .padding = "same"});
  const Tensor x = random_normal({2, 5, 6, 3});
  const Tensor y = pool(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 3, 3}));
  EXPECT_TRUE(all_close(y, naive_pool(x, Kind::avg, 3, 3, 2, 2, true), {1e-6, 1e-6}));
  layers::AveragePooling2D valid({2, 3});
  EXPECT_TRUE(all_close(valid(x), naive_pool(x, Kind::avg, 2, 3, 2, 3, false), {1e-6, 1e-6}));
}

TEST(PoolingLayersTest, GlobalAveragePooling) {
  set_seed(44);
  const Tensor x = random_normal({2, 3, 4, 5});
  std::vector<double> e(10, 0.0);
  const auto xv = x.to_vector<double>();
  for (std::size_t i = 0; i < xv.size(); ++i) e[(i / 60) * 5 + i % 5] += xv[i] / 12.0;
  const Tensor y = layers::GlobalAveragePooling2D()(x);
  ASSERT_EQ(y.shape(), (Shape{2, 5}));
  EXPECT_TRUE(all_close(y, from_vector(e, {2, 5}), {1e-6, 1e-6}));
  layers::GlobalAveragePooling2D keep({.keepdims = true});
  EXPECT_TRUE(keep.keepdims());
  EXPECT_TRUE(all_close(keep(x), from_vector(e, {2, 1, 1, 5}), {1e-6, 1e-6}));
  EXPECT_EQ(layers::GlobalAveragePooling2D()(Input({7, 7, 1280})).shape(),
            (PartialShape{-1, 1280}));
  EXPECT_EQ(keep(Input({7, 7, 5})).shape(), (PartialShape{-1, 1, 1, 5}));
}

TEST(PoolingLayersTest, SymbolicShapesAndDtypes) {
  PolicyGuard guard("mixed_bfloat16");
  auto in = Input({28, 28, 8});
  auto a = layers::MaxPooling2D(2)(in);
  EXPECT_EQ(a.shape(), (PartialShape{-1, 14, 14, 8}));
  EXPECT_EQ(a.dtype(), kBFloat16);
  EXPECT_EQ(layers::AveragePooling2D(3, {.strides = 2})(in).shape(), (PartialShape{-1, 13, 13, 8}));
  EXPECT_EQ(layers::AveragePooling2D(3, {.strides = 2, .padding = "same"})(in).shape(),
            (PartialShape{-1, 14, 14, 8}));
  const Tensor y = layers::MaxPooling2D(2)(random_normal({1, 4, 4, 2}));
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(layers::MaxPooling2D(2).count_params(), 0);
}

TEST(PoolingLayersTest, Errors) {
  expect_error<ValueError>([] { layers::MaxPooling2D(0); }, {"pool_size", "(0, 0)"});
  expect_error<ValueError>([] { layers::AveragePooling2D(2, {.strides = -2}); },
                           {"strides", "(-2, -2)"});
  expect_error<ValueError>([] { layers::MaxPooling2D(2, {.padding = "full"}); },
                           {"'valid', 'same'"});
  expect_error<ShapeError>(
      [] {
        layers::MaxPooling2D(2, {.name = "mp"})(Input({4, 4}));
      },
      {"mp", "rank-4", "(None, 4, 4)"});
  expect_error<ValueError>(
      [] {
        layers::MaxPooling2D(5, {.name = "mp5"})(Input({4, 8, 1}));
      },
      {"mp5", "larger than the input"});
  expect_error<ShapeError>(
      [] {
        layers::GlobalAveragePooling2D({.name = "gap"})(zeros({2, 3}));
      },
      {"gap", "rank-4", "(2, 3)"});
}

}  // namespace
}  // namespace mixprec
