// zero_pad2d and resize_bilinear: forward against loops written here (the resize oracle follows
// TensorFlow's formulation, clamping indices, while the kernel clamps the source coordinate as
// PyTorch does), values known from PyTorch, float64 finite-difference gradients, the backward
// against an explicit scatter, 16-bit against float32, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "mixprec/nn_ops.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::check_low_precision;
using testing::expect_error;
using testing::gradcheck;
using testing::normal;
using testing::Tolerance;

Tensor as_tensor(const std::vector<double>& values, const Shape& shape) {
  return from_vector(values, shape, {.dtype = DType::float64});
}

// ---- the resize oracle ----

// TensorFlow's weights along one axis: in = (o + 0.5) * scale - 0.5, lower = max(floor(in), 0),
// upper = min(ceil(in), size - 1), lerp = in - floor(in).
struct Axis {
  std::vector<std::int64_t> lower, upper;
  std::vector<double> lerp;
};

Axis axis_weights(std::int64_t in_size, std::int64_t out_size) {
  Axis a;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  for (std::int64_t o = 0; o < out_size; ++o) {
    const double in = (o + 0.5) * scale - 0.5;
    const double f = std::floor(in);
    a.lower.push_back(std::max<std::int64_t>(static_cast<std::int64_t>(f), 0));
    a.upper.push_back(
        std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(in)), in_size - 1));
    a.lerp.push_back(in - f);
  }
  return a;
}

std::vector<double> resize_reference(const Tensor& x, std::int64_t oh, std::int64_t ow) {
  const auto v = x.to_vector<double>();
  const std::int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  const Axis ay = axis_weights(h, oh), ax = axis_weights(w, ow);
  auto at = [&](std::int64_t b, std::int64_t y, std::int64_t xx, std::int64_t ch) {
    return v[static_cast<std::size_t>(((b * h + y) * w + xx) * c + ch)];
  };
  std::vector<double> out;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t y = 0; y < oh; ++y)
      for (std::int64_t xx = 0; xx < ow; ++xx)
        for (std::int64_t ch = 0; ch < c; ++ch) {
          const double tl = at(b, ay.lower[y], ax.lower[xx], ch);
          const double tr = at(b, ay.lower[y], ax.upper[xx], ch);
          const double bl = at(b, ay.upper[y], ax.lower[xx], ch);
          const double br = at(b, ay.upper[y], ax.upper[xx], ch);
          const double top = tl + (tr - tl) * ax.lerp[xx];
          const double bottom = bl + (br - bl) * ax.lerp[xx];
          out.push_back(top + (bottom - top) * ay.lerp[y]);
        }
  return out;
}

// The adjoint by explicit scatter: each output gradient goes to the four corners it read.
std::vector<double> resize_backward_reference(const Tensor& dy, std::int64_t h, std::int64_t w) {
  const auto g = dy.to_vector<double>();
  const std::int64_t n = dy.dim(0), oh = dy.dim(1), ow = dy.dim(2), c = dy.dim(3);
  const Axis ay = axis_weights(h, oh), ax = axis_weights(w, ow);
  std::vector<double> dx(static_cast<std::size_t>(n * h * w * c), 0.0);
  auto add = [&](std::int64_t b, std::int64_t y, std::int64_t xx, std::int64_t ch, double v) {
    dx[static_cast<std::size_t>(((b * h + y) * w + xx) * c + ch)] += v;
  };
  std::size_t i = 0;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t y = 0; y < oh; ++y)
      for (std::int64_t xx = 0; xx < ow; ++xx)
        for (std::int64_t ch = 0; ch < c; ++ch, ++i) {
          const double wy = ay.lerp[y], wx = ax.lerp[xx];
          add(b, ay.lower[y], ax.lower[xx], ch, g[i] * (1 - wy) * (1 - wx));
          add(b, ay.lower[y], ax.upper[xx], ch, g[i] * (1 - wy) * wx);
          add(b, ay.upper[y], ax.lower[xx], ch, g[i] * wy * (1 - wx));
          add(b, ay.upper[y], ax.upper[xx], ch, g[i] * wy * wx);
        }
  return dx;
}

// ---- resize: forward ----

struct ResizeCase {
  Shape input;
  std::int64_t height, width;
};

class ResizeCases : public ::testing::TestWithParam<ResizeCase> {};

std::string case_name(const ::testing::TestParamInfo<ResizeCase>& info) {
  const ResizeCase& rc = info.param;
  return std::to_string(rc.input[0]) + "x" + std::to_string(rc.input[1]) + "x" +
         std::to_string(rc.input[2]) + "x" + std::to_string(rc.input[3]) + "_to_" +
         std::to_string(rc.height) + "x" + std::to_string(rc.width);
}

INSTANTIATE_TEST_SUITE_P(
    ResizeBilinear, ResizeCases,
    ::testing::Values(ResizeCase{{2, 5, 7, 3}, 5, 7},       // identity
                      ResizeCase{{1, 4, 6, 2}, 8, 12},      // 2x up
                      ResizeCase{{2, 5, 7, 3}, 8, 3},       // non-integer up / down mix
                      ResizeCase{{1, 7, 9, 4}, 11, 13},     // non-integer up
                      ResizeCase{{3, 12, 10, 2}, 5, 4},     // non-integer down
                      ResizeCase{{1, 16, 16, 1}, 4, 4},     // 4x down
                      ResizeCase{{2, 1, 1, 5}, 3, 2},       // a single pixel
                      ResizeCase{{1, 32, 32, 3}, 224, 224}  // the seed's upsampling
                      ),
    case_name);

TEST_P(ResizeCases, ForwardMatchesReference) {
  const ResizeCase& rc = GetParam();
  for (DType dtype : {DType::float32, DType::float64}) {
    const Tensor x = normal(rc.input, 1, dtype);
    const Tensor y = resize_bilinear(x, rc.height, rc.width);
    const Shape expected_shape{rc.input[0], rc.height, rc.width, rc.input[3]};
    EXPECT_EQ(y.shape(), expected_shape);
    EXPECT_EQ(y.dtype(), dtype);
    const Tolerance tol = dtype == DType::float64 ? Tolerance{1e-12, 1e-12} : Tolerance{1e-6, 1e-6};
    EXPECT_TRUE(
        all_close(y, as_tensor(resize_reference(x, rc.height, rc.width), expected_shape), tol))
        << dtype_name(dtype);
  }
}

TEST_P(ResizeCases, BackwardMatchesExplicitScatter) {
  const ResizeCase& rc = GetParam();
  for (DType dtype : {DType::float32, DType::float64}) {
    Tensor x = normal(rc.input, 2, dtype).set_requires_grad(true);
    const Tensor y = resize_bilinear(x, rc.height, rc.width);
    const Tensor dy = normal(y.shape(), 3, dtype);
    const Tensor dx = grad(sum(mul(y, dy)), {x})[0];
    EXPECT_EQ(dx.dtype(), dtype);
    // float32 sums of up to ~(in/out + 1)^2 terms per input element.
    const Tolerance tol = dtype == DType::float64 ? Tolerance{1e-12, 1e-12} : Tolerance{1e-5, 1e-5};
    EXPECT_TRUE(all_close(
        dx, as_tensor(resize_backward_reference(dy, rc.input[1], rc.input[2]), rc.input), tol))
        << dtype_name(dtype);
  }
}

TEST(ResizeBilinear, IdentityIsExact) {
  const Tensor x = normal({2, 5, 6, 3}, 4);
  const Tensor y = resize_bilinear(x, 5, 6);
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
}

// torch.nn.functional.interpolate(torch.tensor([[[[0., 1.], [2., 3.]]]]), scale_factor=2,
// mode="bilinear", align_corners=False), and tf.image.resize(..., [4, 4], "bilinear").
TEST(ResizeBilinear, KnownTwoByTwoUpsampling) {
  const Tensor x = from_vector(std::vector<float>{0, 1, 2, 3}, {1, 2, 2, 1});
  const std::vector<float> expected{0.0f, 0.25f, 0.75f, 1.0f, 0.5f, 0.75f, 1.25f, 1.5f,
                                    1.5f, 1.75f, 2.25f, 2.5f, 2.0f, 2.25f, 2.75f, 3.0f};
  EXPECT_EQ(resize_bilinear(x, 4, 4).to_vector<float>(), expected);
  // Down again by 2: each output is the mean of a 2x2 block (half-pixel centers fall between).
  EXPECT_EQ(resize_bilinear(resize_bilinear(x, 4, 4), 2, 2).to_vector<float>(),
            (std::vector<float>{0.375f, 1.125f, 1.875f, 2.625f}));
}

// The adjoint identity <resize(x), dy> = <x, dresize(dy)>, through autograd.
TEST(ResizeBilinear, BackwardIsTheAdjoint) {
  Tensor x = normal({2, 9, 5, 3}, 5, DType::float64).set_requires_grad(true);
  const Tensor y = resize_bilinear(x, 4, 13);
  const Tensor dy = normal(y.shape(), 6, DType::float64);
  const Tensor dx = grad(sum(mul(y, dy)), {x})[0];
  EXPECT_NEAR(sum(mul(y, dy)).item(), sum(mul(x, dx)).item(), 1e-10);
}

TEST(ResizeBilinear, Gradcheck) {
  for (const ResizeCase& rc : {ResizeCase{{1, 3, 4, 2}, 5, 3}, ResizeCase{{2, 6, 5, 1}, 4, 2},
                               ResizeCase{{1, 2, 2, 2}, 4, 4}}) {
    const Tensor x = normal(rc.input, 7, DType::float64);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) { return resize_bilinear(in[0], rc.height, rc.width); },
        {x}))
        << rc.input.to_string();
  }
}

TEST(ResizeBilinear, LowPrecisionMatchesFloat32) {
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    for (const ResizeCase& rc :
         {ResizeCase{{2, 8, 8, 3}, 20, 13}, ResizeCase{{1, 15, 12, 4}, 6, 5}}) {
      EXPECT_TRUE(check_low_precision(
          [&](const std::vector<Tensor>& in) {
            return resize_bilinear(in[0], rc.height, rc.width);
          },
          {normal(rc.input, 8)}, dtype))
          << dtype_name(dtype) << " " << rc.input.to_string();
    }
  }
}

TEST(ResizeBilinear, NonContiguousInput) {
  // (N, W, H, C) transposed to (N, H, W, C): a strided view.
  const Tensor base = normal({2, 6, 4, 3}, 9);
  const Tensor x = base.transpose(1, 2);
  ASSERT_FALSE(x.is_contiguous());
  EXPECT_TRUE(all_close(resize_bilinear(x, 7, 9), resize_bilinear(x.contiguous(), 7, 9), {0, 0}));
}

TEST(ResizeBilinear, Errors) {
  expect_error<ShapeError>(
      [] {
        resize_bilinear(zeros({4, 4, 3}), 8, 8);
      },
      {"resize_bilinear", "(N, H, W, C)", "(4, 4, 3)"});
  expect_error<ValueError>(
      [] {
        resize_bilinear(zeros({1, 4, 4, 3}), 0, 8);
      },
      {"resize_bilinear", "0x8"});
  expect_error<ValueError>([] { resize_bilinear(zeros({1, 4, 4, 3}), 8, -2); }, {"8x-2"});
  expect_error<DTypeError>(
      [] {
        resize_bilinear(zeros({1, 4, 4, 3}, {.dtype = DType::int32}), 8, 8);
      },
      {"int32"});
  expect_error<ShapeError>(
      [] {
        resize_bilinear(zeros({1, 0, 4, 3}), 8, 8);
      },
      {"empty", "(1, 0, 4, 3)"});
  // An empty batch is fine.
  EXPECT_EQ(resize_bilinear(zeros({0, 4, 4, 3}), 2, 2).shape(), Shape({0, 2, 2, 3}));
}

// ---- zero_pad2d ----

std::vector<double> pad_reference(const Tensor& x, const Padding2d& p) {
  const auto v = x.to_vector<double>();
  const std::int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  const std::int64_t oh = h + p.top + p.bottom, ow = w + p.left + p.right;
  std::vector<double> out(static_cast<std::size_t>(n * oh * ow * c), 0.0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t xx = 0; xx < w; ++xx)
        for (std::int64_t ch = 0; ch < c; ++ch)
          out[static_cast<std::size_t>(((b * oh + y + p.top) * ow + xx + p.left) * c + ch)] =
              v[static_cast<std::size_t>(((b * h + y) * w + xx) * c + ch)];
  return out;
}

TEST(ZeroPad2d, ForwardMatchesReference) {
  const Tensor x = normal({2, 3, 4, 5}, 10);
  for (const Padding2d& p : {Padding2d{1, 1, 1, 1}, Padding2d{0, 2, 3, 0}, Padding2d{0, 0, 0, 0},
                             Padding2d{3, 0, 0, 1}}) {
    for (DType dtype : {DType::float32, DType::float16, DType::float64, DType::int32}) {
      const Tensor xd = x.to(dtype);
      const Tensor y = zero_pad2d(xd, p);
      const Shape shape{2, 3 + p.top + p.bottom, 4 + p.left + p.right, 5};
      EXPECT_EQ(y.shape(), shape);
      EXPECT_EQ(y.dtype(), dtype);
      EXPECT_TRUE(all_close(y, as_tensor(pad_reference(xd, p), shape), {0, 0}))
          << dtype_name(dtype);
    }
  }
}

// Large enough for the row copies to run on several threads.
TEST(ZeroPad2d, LargeInput) {
  const Tensor x = normal({4, 64, 64, 8}, 16);
  const Padding2d p{1, 2, 3, 4};
  EXPECT_TRUE(all_close(zero_pad2d(x, p), as_tensor(pad_reference(x, p), {4, 67, 71, 8}), {0, 0}));
}

TEST(ZeroPad2d, NonContiguousInput) {
  const Tensor x = normal({2, 4, 3, 2}, 11).transpose(1, 2);  // (2, 3, 4, 2) strided
  const Padding2d p{1, 2, 2, 1};
  EXPECT_TRUE(all_close(zero_pad2d(x, p), as_tensor(pad_reference(x, p), {2, 6, 7, 2}), {0, 0}));
}

TEST(ZeroPad2d, GradientIsTheInterior) {
  Tensor x = normal({2, 3, 4, 2}, 12).set_requires_grad(true);
  const Padding2d p{2, 1, 0, 3};
  const Tensor y = zero_pad2d(x, p);
  const Tensor dy = normal(y.shape(), 13);
  const Tensor dx = grad(sum(mul(y, dy)), {x})[0];
  const auto g = dy.to_vector<double>();
  std::vector<double> expected;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t yy = 0; yy < 3; ++yy)
      for (std::int64_t xx = 0; xx < 4; ++xx)
        for (std::int64_t ch = 0; ch < 2; ++ch)
          expected.push_back(g[static_cast<std::size_t>(((b * 6 + yy + 2) * 7 + xx) * 2 + ch)]);
  EXPECT_TRUE(all_close(dx, as_tensor(expected, x.shape()), {0, 0}));
}

TEST(ZeroPad2d, Gradcheck) {
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        return zero_pad2d(in[0], {1, 2, 0, 1});
      },
      {normal({2, 2, 3, 2}, 14, DType::float64)}));
}

TEST(ZeroPad2d, LowPrecisionMatchesFloat32) {
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    EXPECT_TRUE(check_low_precision(
        [](const std::vector<Tensor>& in) {
          return zero_pad2d(in[0], {1, 0, 2, 1});
        },
        {normal({2, 3, 3, 4}, 15)}, dtype))
        << dtype_name(dtype);
  }
}

TEST(ZeroPad2d, Errors) {
  expect_error<ValueError>(
      [] {
        zero_pad2d(zeros({1, 2, 2, 1}), {0, -1, 0, 0});
      },
      {"zero_pad2d", ">= 0", "bottom -1"});
  expect_error<ShapeError>(
      [] {
        zero_pad2d(zeros({2, 2, 1}), {1, 1, 1, 1});
      },
      {"zero_pad2d", "(2, 2, 1)"});
}

}  // namespace
}  // namespace mixprec
