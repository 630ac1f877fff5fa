// max_pool2d, avg_pool2d and global_avg_pool2d: hand-computed values, a naive loop written here,
// oneDNN against the library's reference loops, float64 gradient checks, the first-maximum rule
// for gradients, 16-bit against float32 on both bf16 paths, the primitive cache and the errors.
#include "backend/cpu/pooling.h"

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::Bf16PathGuard;
using testing::check_low_precision;
using testing::expect_error;
using testing::gradcheck;
using testing::normal;

enum class Kind { max, avg };

struct Case {
  std::int64_t n, h, w, c;
  std::array<int, 2> pool{2, 2};
  std::array<int, 2> strides{2, 2};
  Padding padding = Padding::valid;

  Pool2dOptions options() const {
    return {.pool_size = pool, .strides = strides, .padding = padding};
  }
  std::string label() const {
    return "x (" + std::to_string(n) + "," + std::to_string(h) + "," + std::to_string(w) + "," +
           std::to_string(c) + ") pool " + std::to_string(pool[0]) + "x" + std::to_string(pool[1]) +
           " stride " + std::to_string(strides[0]) + "," + std::to_string(strides[1]) +
           (padding == Padding::same ? " same" : " valid");
  }
};

Tensor run(Kind kind, const Tensor& x, const Case& c) {
  return kind == Kind::max ? max_pool2d(x, c.options()) : avg_pool2d(x, c.options());
}

// TensorFlow's output size and leading padding (see conv_test.cpp).
struct Axis {
  std::int64_t out, before;
};
Axis tf_axis(std::int64_t in, std::int64_t k, std::int64_t s, Padding p) {
  if (p == Padding::valid) return {(in - k + s) / s, 0};
  const std::int64_t out = (in + s - 1) / s;
  return {out, std::max<std::int64_t>((out - 1) * s + k - in, 0) / 2};
}

// The test's own pooling, float64: every window position visited, padding positions skipped (a
// max starts at -inf; an average divides by the positions it actually summed).
std::vector<double> naive_pool(Kind kind, const Tensor& x, const Case& c, Shape& shape) {
  const Axis ah = tf_axis(c.h, c.pool[0], c.strides[0], c.padding);
  const Axis aw = tf_axis(c.w, c.pool[1], c.strides[1], c.padding);
  shape = Shape{c.n, ah.out, aw.out, c.c};
  const auto xv = x.to_vector<double>();
  std::vector<double> out;
  for (std::int64_t n = 0; n < c.n; ++n)
    for (std::int64_t oy = 0; oy < ah.out; ++oy)
      for (std::int64_t ox = 0; ox < aw.out; ++ox)
        for (std::int64_t ch = 0; ch < c.c; ++ch) {
          double best = -std::numeric_limits<double>::infinity(), total = 0;
          int count = 0;
          for (int ky = 0; ky < c.pool[0]; ++ky)
            for (int kx = 0; kx < c.pool[1]; ++kx) {
              const std::int64_t y = oy * c.strides[0] - ah.before + ky;
              const std::int64_t x_ = ox * c.strides[1] - aw.before + kx;
              if (y < 0 || y >= c.h || x_ < 0 || x_ >= c.w) continue;
              const double v = xv[static_cast<std::size_t>(((n * c.h + y) * c.w + x_) * c.c + ch)];
              best = std::max(best, v);
              total += v;
              ++count;
            }
          out.push_back(kind == Kind::max ? best : total / count);
        }
  return out;
}

const std::vector<Case> kCases = {
    {.n = 1, .h = 4, .w = 4, .c = 1},
    {.n = 3, .h = 7, .w = 6, .c = 3},
    {.n = 2, .h = 7, .w = 7, .c = 5, .pool = {3, 3}, .strides = {2, 2}, .padding = Padding::same},
    {.n = 2, .h = 5, .w = 6, .c = 4, .pool = {2, 2}, .strides = {1, 1}, .padding = Padding::same},
    {.n = 1, .h = 6, .w = 5, .c = 2, .pool = {3, 2}, .strides = {1, 2}},
    {.n = 2, .h = 9, .w = 8, .c = 16, .pool = {3, 3}, .strides = {2, 2}, .padding = Padding::same},
    {.n = 1, .h = 5, .w = 5, .c = 3, .pool = {2, 2}, .strides = {3, 3}, .padding = Padding::same},
    {.n = 2, .h = 4, .w = 4, .c = 32, .pool = {4, 4}, .strides = {1, 1}},
};

// ---- forward ----

TEST(PoolForward, HandComputedValues) {
  const Tensor x4 = arange(1.0, 17.0).reshape({1, 4, 4, 1});
  EXPECT_EQ(max_pool2d(x4).to_vector<float>(), (std::vector<float>{6, 8, 14, 16}));
  EXPECT_EQ(avg_pool2d(x4).to_vector<float>(), (std::vector<float>{3.5, 5.5, 11.5, 13.5}));
  // 3x3 with `same`, 2x2 windows of stride 2: the padding row/column is at the bottom/right, and
  // the average divides by the real elements only.
  const Tensor x3 = arange(1.0, 10.0).reshape({1, 3, 3, 1});
  const Pool2dOptions same{.padding = Padding::same};
  EXPECT_EQ(max_pool2d(x3, same).to_vector<float>(), (std::vector<float>{5, 6, 8, 9}));
  EXPECT_EQ(avg_pool2d(x3, same).to_vector<float>(), (std::vector<float>{3, 4.5, 7.5, 9}));
  // Stride 1: the one padding element goes after; were it before, the output would start at 1.
  const Tensor row = arange(1.0, 4.0).reshape({1, 3, 1, 1});
  EXPECT_EQ(avg_pool2d(row, {.pool_size = {2, 1}, .strides = {1, 1}, .padding = Padding::same})
                .to_vector<float>(),
            (std::vector<float>{1.5, 2.5, 3}));
}

TEST(PoolForward, PaddingNeverWinsTheMax) {
  for (DType dtype : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    const Tensor x = full({1, 3, 3, 2}, -5.0, {.dtype = dtype});
    const Tensor y =
        max_pool2d(x, {.pool_size = {3, 3}, .strides = {1, 1}, .padding = Padding::same});
    EXPECT_EQ(y.to_vector<float>(), std::vector<float>(18, -5.0f)) << dtype_name(dtype);
  }
}

TEST(PoolForward, MatchesNaiveLoop) {
  std::uint64_t seed = 10;
  for (DType dtype : {DType::float32, DType::float64}) {
    for (const Case& c : kCases) {
      const Tensor x = normal({c.n, c.h, c.w, c.c}, seed++, dtype);
      for (Kind kind : {Kind::max, Kind::avg}) {
        Shape shape;
        const auto expected = naive_pool(kind, x, c, shape);
        const Tensor y = run(kind, x, c);
        ASSERT_EQ(y.shape(), shape) << c.label();
        // max is exact; an average of at most 16 terms is within a few float32 roundings.
        const testing::Tolerance tol = kind == Kind::max         ? testing::Tolerance{0, 0}
                                       : dtype == DType::float64 ? testing::Tolerance{1e-14, 1e-14}
                                                                 : testing::Tolerance{1e-5, 1e-5};
        EXPECT_TRUE(all_close(y, from_vector(expected, shape, {.dtype = DType::float64}), tol))
            << (kind == Kind::max ? "max " : "avg ") << dtype_name(dtype) << " " << c.label();
      }
    }
  }
}

TEST(PoolForward, OneDnnMatchesReference) {
  std::uint64_t seed = 50;
  for (const Case& c : kCases) {
    const Tensor x = normal({c.n, c.h, c.w, c.c}, seed++);
    const Tensor xt = x.detach();
    Tensor xg = x.detach();
    xg.set_requires_grad(true);
    for (Kind kind : {Kind::max, Kind::avg}) {
      const auto pk = kind == Kind::max ? PoolKind::max : PoolKind::average;
      const Tensor y = run(kind, xg, c);
      const Tensor dy = normal(y.shape(), seed + 100);
      const Tensor dx = grad(sum(mul(y, dy)), {xg})[0];
      PoolGeometry g;
      const Axis ah = tf_axis(c.h, c.pool[0], c.strides[0], c.padding);
      const Axis aw = tf_axis(c.w, c.pool[1], c.strides[1], c.padding);
      g.batch = c.n, g.in_h = c.h, g.in_w = c.w, g.channels = c.c;
      g.window_h = c.pool[0], g.window_w = c.pool[1];
      g.stride_h = c.strides[0], g.stride_w = c.strides[1];
      g.out_h = ah.out, g.out_w = aw.out, g.pad_top = ah.before, g.pad_left = aw.before;
      g.pad_bottom =
          std::max<std::int64_t>((ah.out - 1) * c.strides[0] + c.pool[0] - c.h, 0) - ah.before;
      g.pad_right =
          std::max<std::int64_t>((aw.out - 1) * c.strides[1] + c.pool[1] - c.w, 0) - aw.before;
      const Tensor y_ref = cpu::pool2d_reference_forward(pk, xt.to(DType::float64), g);
      const Tensor dx_ref =
          cpu::pool2d_reference_backward(pk, dy.to(DType::float64), xt.to(DType::float64), g);
      const testing::Tolerance tol =
          kind == Kind::max ? testing::Tolerance{0, 0} : testing::Tolerance{1e-5, 1e-5};
      EXPECT_TRUE(all_close(y, y_ref, tol)) << c.label();
      // Overlapping windows add several terms into one input gradient.
      EXPECT_TRUE(all_close(dx, dx_ref, {1e-5, 1e-5})) << c.label();
    }
  }
}

// ---- gradients ----

TEST(PoolBackward, GradcheckFloat64) {
  const std::vector<Case> cases = {
      {.n = 2, .h = 4, .w = 5, .c = 2},
      {.n = 1, .h = 5, .w = 5, .c = 2, .pool = {3, 3}, .strides = {2, 2}, .padding = Padding::same},
      {.n = 1, .h = 4, .w = 5, .c = 3, .pool = {2, 3}, .strides = {1, 1}, .padding = Padding::same},
  };
  std::uint64_t seed = 200;
  for (const Case& c : cases) {
    // Distinct values (random normal): a finite-difference step of 1e-6 never changes an argmax.
    const Tensor x = normal({c.n, c.h, c.w, c.c}, seed++, DType::float64);
    for (Kind kind : {Kind::max, Kind::avg}) {
      EXPECT_TRUE(
          gradcheck([&](const std::vector<Tensor>& in) { return run(kind, in[0], c); }, {x}))
          << (kind == Kind::max ? "max " : "avg ") << c.label();
    }
  }
}

// Ties: each window's gradient goes to its first maximum in row-major window order.
TEST(PoolBackward, MaxGradientGoesToTheFirstMaximum) {
  for (auto path : {cpu::Bf16Path::when_available, cpu::Bf16Path::convert_to_float32}) {
    Bf16PathGuard guard(path);
    for (DType dtype : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
      // Constant input, overlapping 2x2 windows of stride 1: window (i, j) sends its gradient to
      // (i, j), its top-left element.
      Tensor x = ones({1, 3, 3, 1}, {.dtype = dtype});
      x.set_requires_grad(true);
      const Case c{.n = 1, .h = 3, .w = 3, .c = 1, .pool = {2, 2}, .strides = {1, 1}};
      auto g = grad(sum(max_pool2d(x, c.options())), {x});
      EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{1, 1, 0, 1, 1, 0, 0, 0, 0}))
          << dtype_name(dtype);
      // [[0 5] [5 5]]: the maximum first met is (0, 1).
      Tensor y = from_vector(std::vector<float>{0, 5, 5, 5}, {1, 2, 2, 1}, {.dtype = dtype});
      y.set_requires_grad(true);
      g = grad(sum(max_pool2d(y)), {y});
      EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{0, 1, 0, 0})) << dtype_name(dtype);
    }
  }
}

TEST(PoolBackward, AverageGradientSpreadsOverRealElements) {
  // 3x3, 2x2 windows of stride 2, `same`: windows of 4, 2, 2 and 1 real elements.
  Tensor x = zeros({1, 3, 3, 1});
  x.set_requires_grad(true);
  const auto g = grad(sum(avg_pool2d(x, {.padding = Padding::same})), {x});
  EXPECT_EQ(g[0].to_vector<float>(),
            (std::vector<float>{0.25, 0.25, 0.5, 0.25, 0.25, 0.5, 0.5, 0.5, 1}));
}

// ---- 16-bit ----

TEST(PoolLowPrecision, SixteenBitMatchesFloat32BothBf16Paths) {
  for (auto path : {cpu::Bf16Path::when_available, cpu::Bf16Path::convert_to_float32}) {
    Bf16PathGuard guard(path);
    std::uint64_t seed = 300;
    for (const Case& c : kCases) {
      const Tensor x = normal({c.n, c.h, c.w, c.c}, seed++);
      for (Kind kind : {Kind::max, Kind::avg}) {
        for (DType dtype : {DType::float16, DType::bfloat16}) {
          EXPECT_TRUE(check_low_precision(
              [&](const std::vector<Tensor>& in) { return run(kind, in[0], c); }, {x}, dtype))
              << (kind == Kind::max ? "max " : "avg ") << dtype_name(dtype) << " " << c.label()
              << (path == cpu::Bf16Path::when_available ? " native" : " converted");
        }
      }
    }
  }
}

// ---- global average ----

TEST(PoolGlobalAverage, ValuesShapesAndGradients) {
  const Tensor x = normal({2, 3, 4, 5}, 400);
  const Tensor y = global_avg_pool2d(x);
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  EXPECT_EQ(global_avg_pool2d(x, KeepDims::yes).shape(), (Shape{2, 1, 1, 5}));
  const auto xv = x.to_vector<double>();
  std::vector<double> expected(10, 0.0);
  for (std::size_t i = 0; i < xv.size(); ++i) expected[(i / 60) * 5 + i % 5] += xv[i] / 12.0;
  EXPECT_TRUE(all_close(y, from_vector(expected, {2, 5}, {.dtype = DType::float64}), {1e-6, 1e-6}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return global_avg_pool2d(in[0]); },
                        {normal({2, 3, 2, 3}, 401, DType::float64)}));
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    EXPECT_TRUE(check_low_precision(
        [](const std::vector<Tensor>& in) { return global_avg_pool2d(in[0]); }, {x}, dtype))
        << dtype_name(dtype);
  }
  expect_error<ShapeError>(
      [&] {
        global_avg_pool2d(normal({3, 4, 5}, 402));
      },
      {"global_avg_pool2d", "rank 4", "(3, 4, 5)"});
}

// ---- cache ----

TEST(PoolCache, RepeatedShapesReuseThePrimitives) {
  cpu::clear_pooling_cache();
  const auto before = cpu::pooling_cache_stats();
  Tensor x = normal({2, 8, 8, 16}, 500);
  x.set_requires_grad(true);
  for (int i = 0; i < 3; ++i) {
    const auto g = grad(sum(max_pool2d(x)), {x});
    ASSERT_EQ(g.size(), 1u);
  }
  {
    NoGradScope no_grad;  // inference: a primitive without a workspace
    for (int i = 0; i < 2; ++i) ASSERT_EQ(max_pool2d(x).shape(), (Shape{2, 4, 4, 16}));
  }
  const auto after = cpu::pooling_cache_stats();
  EXPECT_EQ(after.misses - before.misses, 3);  // training forward, backward, inference forward
  EXPECT_EQ(after.hits - before.hits, 5);
  EXPECT_EQ(after.size, 3u);
  EXPECT_EQ(after.reference_implementations - before.reference_implementations, 0);
}

// ---- errors ----

TEST(PoolErrors, ClearMessages) {
  const Tensor x = normal({2, 5, 5, 3}, 600);
  expect_error<ValueError>(
      [&] {
        max_pool2d(x, {.strides = {0, 2}});
      },
      {"max_pool2d", "positive", "height"});
  expect_error<ValueError>(
      [&] {
        avg_pool2d(x, {.strides = {2, -1}});
      },
      {"avg_pool2d", "positive", "width"});
  expect_error<ValueError>([&] { max_pool2d(x, {.pool_size = {0, 2}}); }, {"positive"});
  expect_error<ValueError>(
      [&] {
        max_pool2d(x, {.pool_size = {6, 2}});
      },
      {"max_pool2d", "larger than the input", "valid"});
  expect_error<ValueError>(
      [&] {
        avg_pool2d(x, {.pool_size = {2, 7}});
      },
      {"avg_pool2d", "width", "larger than the input"});
  expect_error<ShapeError>(
      [&] {
        max_pool2d(normal({5, 5, 3}, 601));
      },
      {"max_pool2d", "rank 4", "(5, 5, 3)"});
  expect_error<DTypeError>([&] { avg_pool2d(x.to(DType::int64)); }, {"avg_pool2d", "int64"});
  // A window larger than the input is fine with `same`.
  EXPECT_EQ(
      max_pool2d(x, {.pool_size = {7, 7}, .strides = {1, 1}, .padding = Padding::same}).shape(),
      (Shape{2, 5, 5, 3}));
}

}  // namespace
}  // namespace mixprec
