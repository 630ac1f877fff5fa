// conv2d and depthwise_conv2d: forward against hand-computed values and against a naive loop
// written here (explicitly padded input, float64), oneDNN against the library's reference loops
// forward and backward, float64 gradient checks, 16-bit against float32 on both bf16 paths,
// Accumulation::compute_dtype, the primitive cache, and the error messages.
#include "backend/cpu/conv.h"

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/conv_reference.h"
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

// ---- the test's own convolution ----

struct Case {
  std::int64_t n = 0, h = 0, w = 0, cin = 0, kh = 0, kw = 0, cout = 0;
  int groups = 1;
  std::array<int, 2> strides{1, 1};
  std::array<int, 2> dilation{1, 1};
  Padding padding = Padding::valid;
  bool bias = true;
  bool depthwise = false;  // filters (KH, KW, Cin, cout / Cin), groups ignored

  // Modifiers for compact case tables: conv(...).stride(2, 2).same().no_bias().
  Case stride(int sh, int sw) const {
    return with([&](Case& c) { c.strides = {sh, sw}; });
  }
  Case dilate(int dh, int dw) const {
    return with([&](Case& c) { c.dilation = {dh, dw}; });
  }
  Case grouped(int g) const {
    return with([&](Case& c) { c.groups = g; });
  }
  Case same() const {
    return with([](Case& c) { c.padding = Padding::same; });
  }
  Case no_bias() const {
    return with([](Case& c) { c.bias = false; });
  }
  Case as_depthwise() const {
    return with([](Case& c) { c.depthwise = true; });
  }
  template <typename F>
  Case with(F&& f) const {
    Case c = *this;
    f(c);
    return c;
  }

  Shape x_shape() const { return {n, h, w, cin}; }
  Shape filters_shape() const {
    return depthwise ? Shape{kh, kw, cin, cout / cin} : Shape{kh, kw, cin / groups, cout};
  }
  Conv2dOptions options(Accumulation acc = Accumulation::float32) const {
    return {.strides = strides,
            .padding = padding,
            .dilation = dilation,
            .groups = groups,
            .accumulation = acc};
  }
  std::string label() const {
    return "x (" + std::to_string(n) + "," + std::to_string(h) + "," + std::to_string(w) + "," +
           std::to_string(cin) + ") k " + std::to_string(kh) + "x" + std::to_string(kw) + " cout " +
           std::to_string(cout) + " groups " + std::to_string(groups) + " stride " +
           std::to_string(strides[0]) + "," + std::to_string(strides[1]) + " dilation " +
           std::to_string(dilation[0]) + "," + std::to_string(dilation[1]) +
           (padding == Padding::same ? " same" : " valid") + (bias ? " bias" : "") +
           (depthwise ? " depthwise" : "");
  }
};

// x (n, h, w, cin), filters kh x kw, cout output channels (for depthwise: cin * multiplier).
Case conv(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t cin, std::int64_t kh,
          std::int64_t kw, std::int64_t cout) {
  Case c;
  c.n = n, c.h = h, c.w = w, c.cin = cin, c.kh = kh, c.kw = kw, c.cout = cout;
  return c;
}

// TensorFlow's rule, as its documentation states it: valid: out = ceil((in - eff + 1) / s);
// same: out = ceil(in / s), padding max((out - 1) s + eff - in, 0), the smaller half on top/left.
struct Axis {
  std::int64_t out, before;
};
Axis tf_axis(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d, Padding p) {
  const std::int64_t eff = (k - 1) * d + 1;
  if (p == Padding::valid) return {(in - eff + s) / s, 0};
  const std::int64_t out = (in + s - 1) / s;
  const std::int64_t total = std::max<std::int64_t>((out - 1) * s + eff - in, 0);
  return {out, total / 2};
}

// y[n, oy, ox, co] = b[co] + sum P[n, oy s + ky d, ox s + kx d, ci] w[...] over the taps, with P
// the input copied into a zero canvas. In float64, from the tensors' stored values; `absolute`
// sums |x| |w| (+ |b|) instead, for error bounds.
struct Naive {
  std::vector<double> y;
  Shape shape;
};
Naive naive_conv(const Tensor& x, const Tensor& filters, const Tensor& bias, const Case& c,
                 bool absolute = false) {
  const Axis ah = tf_axis(c.h, c.kh, c.strides[0], c.dilation[0], c.padding);
  const Axis aw = tf_axis(c.w, c.kw, c.strides[1], c.dilation[1], c.padding);
  auto xv = x.to_vector<double>(), wv = filters.to_vector<double>();
  std::vector<double> bv = bias.defined() ? bias.to_vector<double>() : std::vector<double>();
  if (absolute) {
    for (auto* v : {&xv, &wv, &bv})
      for (double& e : *v) e = std::abs(e);
  }
  const std::int64_t ph = (ah.out - 1) * c.strides[0] + (c.kh - 1) * c.dilation[0] + 1 + c.h;
  const std::int64_t pw = (aw.out - 1) * c.strides[1] + (c.kw - 1) * c.dilation[1] + 1 + c.w;
  std::vector<double> canvas(static_cast<std::size_t>(c.n * ph * pw * c.cin), 0.0);
  auto at = [&](std::int64_t n, std::int64_t y, std::int64_t x_, std::int64_t ch) {
    return static_cast<std::size_t>(((n * ph + y) * pw + x_) * c.cin + ch);
  };
  for (std::int64_t n = 0; n < c.n; ++n)
    for (std::int64_t y = 0; y < c.h; ++y)
      for (std::int64_t x_ = 0; x_ < c.w; ++x_)
        for (std::int64_t ch = 0; ch < c.cin; ++ch)
          canvas[at(n, y + ah.before, x_ + aw.before, ch)] =
              xv[static_cast<std::size_t>(((n * c.h + y) * c.w + x_) * c.cin + ch)];
  Naive out{std::vector<double>(static_cast<std::size_t>(c.n * ah.out * aw.out * c.cout)),
            Shape{c.n, ah.out, aw.out, c.cout}};
  const std::int64_t m = c.depthwise ? c.cout / c.cin : 0;
  const std::int64_t cin_g = c.depthwise ? 1 : c.cin / c.groups;
  const std::int64_t cout_g = c.depthwise ? m : c.cout / c.groups;
  for (std::int64_t n = 0; n < c.n; ++n)
    for (std::int64_t oy = 0; oy < ah.out; ++oy)
      for (std::int64_t ox = 0; ox < aw.out; ++ox)
        for (std::int64_t co = 0; co < c.cout; ++co) {
          double acc = bv.empty() ? 0.0 : bv[static_cast<std::size_t>(co)];
          for (std::int64_t ky = 0; ky < c.kh; ++ky)
            for (std::int64_t kx = 0; kx < c.kw; ++kx) {
              const std::int64_t y = oy * c.strides[0] + ky * c.dilation[0];
              const std::int64_t x_ = ox * c.strides[1] + kx * c.dilation[1];
              if (c.depthwise) {
                // Output channel co = ch * M + mm reads input channel ch with w[ky, kx, ch, mm].
                const std::int64_t ch = co / m, mm = co % m;
                acc += canvas[at(n, y, x_, ch)] *
                       wv[static_cast<std::size_t>(((ky * c.kw + kx) * c.cin + ch) * m + mm)];
                continue;
              }
              const std::int64_t g = co / cout_g;
              for (std::int64_t ci = 0; ci < cin_g; ++ci)
                acc += canvas[at(n, y, x_, g * cin_g + ci)] *
                       wv[static_cast<std::size_t>(((ky * c.kw + kx) * cin_g + ci) * c.cout + co)];
            }
          out.y[static_cast<std::size_t>(((n * ah.out + oy) * aw.out + ox) * c.cout + co)] = acc;
        }
  return out;
}

Tensor run(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b,
           Accumulation acc = Accumulation::float32) {
  return c.depthwise ? depthwise_conv2d(x, w, b, c.options(acc)) : conv2d(x, w, b, c.options(acc));
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::float64: return std::ldexp(1.0, -53);
    case DType::float16: return std::ldexp(1.0, -11);
    case DType::bfloat16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -24);
  }
}

// |actual - exact| <= 1.01 K u_acc sum|x||w| + u_out |exact| (+ a float16 subnormal floor): the
// rigorous bound of a K-term sum accumulated in float32 (float64 for float64) and rounded once.
// A wrong index or padding rule gives errors of the size of the values, far outside it.
::testing::AssertionResult within_bound(const Tensor& actual, const std::vector<double>& exact,
                                        const std::vector<double>& magnitude, double terms) {
  const DType dtype = actual.dtype();
  const double u_acc = unit_roundoff(dtype == DType::float64 ? dtype : DType::float32);
  const double u_out = unit_roundoff(dtype);
  const double floor = dtype == DType::float16 ? std::ldexp(1.0, -25) : 1e-300;
  const auto got = actual.to_vector<double>();
  if (got.size() != exact.size()) {
    return ::testing::AssertionFailure() << got.size() << " elements, expected " << exact.size();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = 1.01 * terms * u_acc * magnitude[i] + u_out * std::abs(exact[i]) + floor;
    if (!(std::abs(got[i] - exact[i]) <= bound)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs exact "
                                           << exact[i] << " (bound " << bound << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

const std::vector<Case> kCases = {
    conv(1, 5, 5, 3, 3, 3, 4),
    conv(3, 7, 6, 2, 3, 2, 5).no_bias(),
    conv(2, 7, 7, 3, 3, 3, 4).stride(2, 2).same(),
    // Odd sizes where `same` pads one more row/column at the bottom/right.
    conv(1, 6, 5, 2, 2, 4, 3).same(),
    conv(2, 8, 9, 3, 3, 3, 2).stride(2, 3).same().no_bias(),
    conv(1, 9, 8, 2, 3, 3, 3).dilate(2, 2),
    conv(2, 6, 7, 2, 3, 2, 3).dilate(2, 1).same(),
    conv(2, 6, 6, 4, 3, 3, 6).grouped(2),
    conv(3, 5, 7, 6, 2, 3, 9).stride(2, 1).grouped(3).same().no_bias(),
    conv(1, 4, 4, 16, 1, 1, 32),
    // Pointwise convolutions run as matmuls (conv_pointwise.h), strided ones too.
    conv(3, 5, 2, 24, 1, 1, 7).no_bias(),
    conv(2, 1, 1, 40, 1, 1, 9).same(),
    conv(2, 5, 5, 6, 1, 1, 10).stride(2, 2).no_bias(),
    conv(2, 6, 7, 5, 1, 1, 3).stride(3, 2).same(),
    conv(1, 4, 4, 8, 1, 1, 8).dilate(2, 2),
    // At most 16 output positions per image: im2col and matmuls (conv_im2col.h).
    conv(2, 4, 4, 8, 3, 3, 6).same(),
    conv(3, 7, 7, 5, 3, 3, 4).stride(2, 2).same().no_bias(),
    conv(1, 6, 6, 3, 2, 2, 4).dilate(2, 2).stride(2, 1),
    conv(2, 10, 10, 32, 3, 3, 16).same(),
    conv(2, 6, 5, 3, 3, 3, 6).same().as_depthwise(),
    conv(1, 7, 7, 4, 3, 3, 4).stride(2, 2).same().no_bias().as_depthwise(),
    conv(3, 8, 6, 2, 2, 3, 4).dilate(2, 2).as_depthwise(),
    conv(2, 9, 9, 16, 3, 3, 16).same().as_depthwise(),
};

struct Operands {
  Tensor x, w, b;
};
Operands operands(const Case& c, std::uint64_t seed, DType dtype) {
  return {normal(c.x_shape(), seed, dtype), normal(c.filters_shape(), seed + 1, dtype, 0.5),
          c.bias ? normal(Shape{c.cout}, seed + 2, dtype) : Tensor()};
}

// ---- forward ----

TEST(ConvForward, HandComputedValues) {
  // x = [[1 2 3] [4 5 6] [7 8 9]], a 2x2 kernel of ones: valid sums each 2x2 block.
  const Tensor x = arange(1.0, 10.0).reshape({1, 3, 3, 1});
  const Tensor ones2 = ones({2, 2, 1, 1});
  EXPECT_EQ(conv2d(x, ones2).to_vector<float>(), (std::vector<float>{12, 16, 24, 28}));
  // same, stride 1, 2x2 kernel: one padding row/column, at the bottom/right (TensorFlow's rule).
  EXPECT_EQ(conv2d(x, ones2, Tensor(), {.padding = Padding::same}).to_vector<float>(),
            (std::vector<float>{12, 16, 9, 24, 28, 15, 15, 17, 9}));
  // same, stride 2, 3x3 kernel on 3x3: out 2x2, padding 2 split 1 / 1.
  const Tensor ones3 = ones({3, 3, 1, 1});
  EXPECT_EQ(
      conv2d(x, ones3, Tensor(), {.strides = {2, 2}, .padding = Padding::same}).to_vector<float>(),
      (std::vector<float>{12, 16, 24, 28}));
  // Bias and two output channels: filter 0 reads the top-left tap, filter 1 the bottom-right one
  // doubled (w[kh, kw, 0, co] is flat element (kh * 3 + kw) * 2 + co).
  std::vector<float> taps(18, 0.0f);
  taps[0] = 1, taps[17] = 2;
  const Tensor w = from_vector(taps, {3, 3, 1, 2});
  const Tensor b = from_vector(std::vector<float>{10, 20}, {2});
  EXPECT_EQ(conv2d(x, w, b).to_vector<float>(), (std::vector<float>{11, 38}));
  // Dilation 2: a 2x2 kernel of ones reads the four corners.
  EXPECT_EQ(conv2d(x, ones2, Tensor(), {.dilation = {2, 2}}).to_vector<float>(),
            (std::vector<float>{20}));
}

TEST(ConvForward, KerasOutputShapes) {
  const Tensor x = normal({2, 7, 8, 3}, 1);
  const Tensor w = normal({3, 3, 3, 5}, 2);
  EXPECT_EQ(conv2d(x, w).shape(), (Shape{2, 5, 6, 5}));
  EXPECT_EQ(conv2d(x, w, Tensor(), {.padding = Padding::same}).shape(), (Shape{2, 7, 8, 5}));
  EXPECT_EQ(conv2d(x, w, Tensor(), {.strides = {2, 2}, .padding = Padding::same}).shape(),
            (Shape{2, 4, 4, 5}));
  EXPECT_EQ(conv2d(x, w, Tensor(), {.strides = {2, 3}}).shape(), (Shape{2, 3, 2, 5}));
  EXPECT_EQ(conv2d(x, w, Tensor(), {.dilation = {2, 2}}).shape(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(depthwise_conv2d(x, normal({3, 3, 3, 2}, 3)).shape(), (Shape{2, 5, 6, 6}));
  // A kernel larger than the input is fine with `same` (padding covers it).
  EXPECT_EQ(
      conv2d(normal({1, 2, 2, 1}, 4), normal({5, 5, 1, 1}, 5), Tensor(), {.padding = Padding::same})
          .shape(),
      (Shape{1, 2, 2, 1}));
}

TEST(ConvForward, Float64MatchesNaiveLoop) {
  std::uint64_t seed = 10;
  for (const Case& c : kCases) {
    const auto [x, w, b] = operands(c, seed += 3, DType::float64);
    const Tensor y = run(c, x, w, b);
    const Naive expected = naive_conv(x, w, b, c);
    ASSERT_EQ(y.shape(), expected.shape) << c.label();
    EXPECT_TRUE(all_close(y, from_vector(expected.y, expected.shape, {.dtype = DType::float64}),
                          {1e-12, 1e-12}))
        << c.label();
  }
}

TEST(ConvForward, OneDnnFloat32MatchesNaiveLoop) {
  std::uint64_t seed = 100;
  for (const Case& c : kCases) {
    const auto [x, w, b] = operands(c, seed += 3, DType::float32);
    const Tensor y = run(c, x, w, b);
    ASSERT_EQ(y.dtype(), DType::float32);
    const Naive exact = naive_conv(x, w, b, c), magnitude = naive_conv(x, w, b, c, true);
    ASSERT_EQ(y.shape(), exact.shape) << c.label();
    const double terms = double(c.kh * c.kw * c.filters_shape()[2]) + 1;
    EXPECT_TRUE(within_bound(y, exact.y, magnitude.y, terms)) << c.label();
  }
}

TEST(ConvForward, NonContiguousOperands) {
  const Case c = conv(2, 6, 6, 3, 3, 3, 4).same();
  // Every other column of a wider image, and filters stored transposed.
  const Tensor x = normal({2, 6, 12, 3}, 40).slice(2, 0, 12, 2);
  const Tensor w = normal({3, 3, 4, 3}, 41).transpose(2, 3);
  const Tensor b = normal({8}, 42).slice(0, 0, 8, 2);
  const Tensor y = conv2d(x, w, b, c.options());
  const Naive exact = naive_conv(x, w, b, c), magnitude = naive_conv(x, w, b, c, true);
  EXPECT_TRUE(within_bound(y, exact.y, magnitude.y, 28));
}

TEST(ConvForward, EmptyOperands) {
  const Tensor y = conv2d(zeros({0, 5, 5, 3}), normal({3, 3, 3, 4}, 1), normal({4}, 2));
  EXPECT_EQ(y.shape(), (Shape{0, 3, 3, 4}));
  // No input channels: an empty sum, so the output is the bias everywhere.
  const Tensor b = from_vector(std::vector<float>{1, -2}, {2});
  const Tensor y0 = conv2d(zeros({1, 3, 3, 0}), zeros({2, 2, 0, 2}), b);
  EXPECT_EQ(y0.to_vector<float>(), (std::vector<float>{1, -2, 1, -2, 1, -2, 1, -2}));
  EXPECT_EQ(depthwise_conv2d(zeros({2, 4, 4, 0}), zeros({3, 3, 0, 2})).shape(),
            (Shape{2, 2, 2, 0}));
}

// ---- oneDNN against the library's reference loops, all three passes ----

TEST(ConvBackward, OneDnnFloat32MatchesReference) {
  std::uint64_t seed = 200;
  for (const Case& c : kCases) {
    const auto [x0, w0, b0] = operands(c, seed += 4, DType::float32);
    Tensor x = x0, w = w0, b = b0;
    x.set_requires_grad(true);
    w.set_requires_grad(true);
    if (b.defined()) b.set_requires_grad(true);
    const Tensor y = run(c, x, w, b);
    const Tensor dy = normal(y.shape(), seed + 3);
    std::vector<Tensor> inputs = {x, w};
    if (b.defined()) inputs.push_back(b);
    const auto grads = grad(sum(mul(y, dy)), inputs);

    // The exact gradients: the reference loops on float64 copies of the same values.
    ConvGeometry g;
    const Axis ah = tf_axis(c.h, c.kh, c.strides[0], c.dilation[0], c.padding);
    const Axis aw = tf_axis(c.w, c.kw, c.strides[1], c.dilation[1], c.padding);
    g.batch = c.n, g.in_h = c.h, g.in_w = c.w, g.in_channels = c.cin;
    g.kernel_h = c.kh, g.kernel_w = c.kw, g.out_channels = c.cout;
    g.groups = c.depthwise ? c.cin : c.groups;
    g.stride_h = c.strides[0], g.stride_w = c.strides[1];
    g.dilation_h = c.dilation[0], g.dilation_w = c.dilation[1];
    g.out_h = ah.out, g.out_w = aw.out, g.pad_top = ah.before, g.pad_left = aw.before;
    g.pad_bottom = std::max<std::int64_t>(
        (ah.out - 1) * c.strides[0] + (c.kh - 1) * c.dilation[0] + 1 - c.h - ah.before, 0);
    g.pad_right = std::max<std::int64_t>(
        (aw.out - 1) * c.strides[1] + (c.kw - 1) * c.dilation[1] + 1 - c.w - aw.before, 0);
    const Shape hwio{c.kh, c.kw, g.in_per_group(), c.cout};
    const Tensor x64 = x0.to(DType::float64), w64 = w0.to(DType::float64).reshape(hwio);
    const Tensor dy64 = dy.to(DType::float64);
    auto values = [](const Tensor& t) { return t.to_vector<double>(); };
    const Tensor dx = cpu::conv2d_reference_backward_data(dy64, w64, g);
    const Tensor dx_mag = cpu::conv2d_reference_backward_data(abs(dy64), abs(w64), g);
    EXPECT_TRUE(
        within_bound(grads[0], values(dx), values(dx_mag), double(c.kh * c.kw * g.out_per_group())))
        << "dx " << c.label();
    const Tensor dw = cpu::conv2d_reference_backward_filters(x64, dy64, g);
    const Tensor dw_mag = cpu::conv2d_reference_backward_filters(abs(x64), abs(dy64), g);
    EXPECT_TRUE(within_bound(grads[1].reshape(hwio), values(dw), values(dw_mag),
                             double(c.n * ah.out * aw.out)))
        << "dw " << c.label();
    if (b.defined()) {
      const Tensor db = sum(dy64, {0, 1, 2}), db_mag = sum(abs(dy64), {0, 1, 2});
      EXPECT_TRUE(within_bound(grads[2], values(db), values(db_mag), double(c.n * ah.out * aw.out)))
          << "db " << c.label();
    }
  }
}

TEST(ConvBackward, Conv2dGradcheckFloat64) {
  const std::vector<Case> cases = {
      conv(2, 5, 4, 2, 3, 2, 3),
      conv(1, 6, 5, 2, 3, 3, 2).stride(2, 2).same(),
      conv(1, 7, 6, 2, 2, 2, 2).dilate(2, 2).same(),
      conv(2, 4, 4, 4, 2, 2, 4).grouped(2),
  };
  std::uint64_t seed = 300;
  for (const Case& c : cases) {
    const auto [x, w, b] = operands(c, seed += 3, DType::float64);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) { return run(c, in[0], in[1], in[2]); }, {x, w, b}))
        << c.label();
  }
}

TEST(DepthwiseConv, GradcheckFloat64) {
  const std::vector<Case> cases = {
      conv(2, 5, 5, 2, 3, 3, 4).as_depthwise(),
      conv(1, 6, 5, 3, 2, 3, 6).stride(2, 2).same().as_depthwise(),
  };
  std::uint64_t seed = 400;
  for (const Case& c : cases) {
    const auto [x, w, b] = operands(c, seed += 3, DType::float64);
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) { return run(c, in[0], in[1], in[2]); }, {x, w, b}))
        << c.label();
  }
}

TEST(DepthwiseConv, EqualsGroupedConvWithReorderedChannels) {
  // Output channel c * M + m reads input channel c: the same as conv2d with groups = C on filters
  // (KH, KW, 1, C * M) holding the same elements.
  const Tensor x = normal({2, 5, 5, 3}, 50);
  const Tensor w = normal({3, 3, 3, 2}, 51);
  const Tensor a = depthwise_conv2d(x, w, Tensor(), {.padding = Padding::same});
  const Tensor b =
      conv2d(x, w.reshape({3, 3, 1, 6}), Tensor(), {.padding = Padding::same, .groups = 3});
  EXPECT_TRUE(all_close(a, b, {0, 0}));
  // Changing input channel 2 changes output channels 4 and 5 (2 * M + m) and no other.
  const Tensor x2 = x.to(DType::float64), w2 = w.to(DType::float64);
  const Tensor bumped =
      add(x2, one_hot(full({2, 5, 5}, 2.0, {.dtype = DType::int64}), 3, DType::float64));
  const Tensor y0 = depthwise_conv2d(x2, w2), y1 = depthwise_conv2d(bumped, w2);
  EXPECT_TRUE(all_close(y0.slice(3, 0, 4), y1.slice(3, 0, 4), {0, 0}));
  EXPECT_FALSE(all_close(y0.slice(3, 4, 6), y1.slice(3, 4, 6), {1e-6, 1e-6}));
}

// ---- 16-bit ----

TEST(ConvLowPrecision, SixteenBitMatchesFloat32BothBf16Paths) {
  for (auto path : {cpu::Bf16Path::when_available, cpu::Bf16Path::convert_to_float32}) {
    Bf16PathGuard guard(path);
    std::uint64_t seed = 500;
    for (const Case& c : kCases) {
      const auto [x, w, b] = operands(c, seed += 3, DType::float32);
      std::vector<Tensor> inputs = {x, w};
      if (b.defined()) inputs.push_back(b);
      for (DType dtype : {DType::float16, DType::bfloat16}) {
        EXPECT_TRUE(check_low_precision(
            [&](const std::vector<Tensor>& in) {
              return run(c, in[0], in[1], in.size() > 2 ? in[2] : Tensor());
            },
            inputs, dtype))
            << dtype_name(dtype) << " " << c.label()
            << (path == cpu::Bf16Path::when_available ? " native" : " converted");
      }
    }
  }
}

// The conversion path is exactly float32 on the widened values, rounded once.
TEST(ConvLowPrecision, ConvertPathIsFloat32RoundedOnce) {
  Bf16PathGuard guard(cpu::Bf16Path::convert_to_float32);
  const Case c = conv(2, 8, 8, 8, 3, 3, 8).same();
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    const auto [x, w, b] = operands(c, 600, dtype);
    const Tensor low = conv2d(x, w, b, c.options());
    const Tensor expected =
        conv2d(x.to(DType::float32), w.to(DType::float32), b.to(DType::float32), c.options())
            .to(dtype);
    EXPECT_TRUE(all_close(low, expected, {0, 0})) << dtype_name(dtype);
  }
}

TEST(ConvLowPrecision, NativeBf16WithinOneRounding) {
  Bf16PathGuard guard(cpu::Bf16Path::when_available);
  for (const Case& c : kCases) {
    const auto [x, w, b] = operands(c, 700, DType::bfloat16);
    const Tensor y = run(c, x, w, b);
    const Naive exact = naive_conv(x, w, b, c), magnitude = naive_conv(x, w, b, c, true);
    const double terms = double(c.kh * c.kw * c.filters_shape()[2]) + 1;
    EXPECT_TRUE(within_bound(y, exact.y, magnitude.y, terms)) << c.label();
  }
}

// ---- Accumulation::compute_dtype ----

TEST(ConvAccumulation, ComputeDtypeRoundsEveryPartialSum) {
  // A 1x1 convolution over 3000 channels of ones: a float16 running sum stops at 2048 (2048 + 1
  // rounds back to 2048); float32 accumulation gives 3000 (exact in float16).
  const Tensor x = ones({1, 1, 2, 3000}, {.dtype = DType::float16});
  const Tensor w = ones({1, 1, 3000, 2}, {.dtype = DType::float16});
  EXPECT_EQ(conv2d(x, w).to_vector<float>(), (std::vector<float>{3000, 3000, 3000, 3000}));
  EXPECT_EQ(
      conv2d(x, w, Tensor(), {.accumulation = Accumulation::compute_dtype}).to_vector<float>(),
      (std::vector<float>{2048, 2048, 2048, 2048}));
  // bfloat16 (8-bit significand) stops at 256.
  EXPECT_EQ(conv2d(x.to(DType::bfloat16), w.to(DType::bfloat16), Tensor(),
                   {.accumulation = Accumulation::compute_dtype})
                .to_vector<float>(),
            (std::vector<float>{256, 256, 256, 256}));
  // The backward passes accumulate the same way: dx sums over 3000 output channels, dw over 3000
  // positions.
  Tensor xs = ones({1, 1, 1, 2}, {.dtype = DType::float16}),
         ws = ones({1, 1, 2, 3000}, {.dtype = DType::float16});
  xs.set_requires_grad(true);
  const auto gx =
      grad(sum(conv2d(xs, ws, Tensor(), {.accumulation = Accumulation::compute_dtype})), {xs});
  EXPECT_EQ(gx[0].to_vector<float>(), (std::vector<float>{2048, 2048}));
  Tensor wp = ones({1, 1, 1, 1}, {.dtype = DType::float16});
  wp.set_requires_grad(true);
  const Tensor xp = ones({3, 1, 1000, 1}, {.dtype = DType::float16});
  const auto gw =
      grad(sum(conv2d(xp, wp, Tensor(), {.accumulation = Accumulation::compute_dtype})), {wp});
  EXPECT_EQ(gw[0].to_vector<float>(), (std::vector<float>{2048}));
  const auto gw32 = grad(sum(conv2d(xp, wp)), {wp});
  EXPECT_EQ(gw32[0].to_vector<float>(), (std::vector<float>{3000}));
}

// Against a loop written here: taps in (kh, kw, i) order, the running sum rounded to float16
// after every multiply-add, the bias added to the finished sum.
TEST(ConvAccumulation, ComputeDtypeMatchesRoundedLoop) {
  const Case c = conv(2, 5, 6, 4, 3, 3, 6).stride(2, 1).grouped(2).same();
  const auto [x, w, b] = operands(c, 800, DType::float16);
  const Tensor y = conv2d(x, w, b, c.options(Accumulation::compute_dtype));
  const Axis ah = tf_axis(c.h, c.kh, 2, 1, c.padding), aw = tf_axis(c.w, c.kw, 1, 1, c.padding);
  const auto xv = x.to_vector<float>(), wv = w.to_vector<float>(), bv = b.to_vector<float>();
  std::vector<float> expected;
  for (std::int64_t n = 0; n < c.n; ++n)
    for (std::int64_t oy = 0; oy < ah.out; ++oy)
      for (std::int64_t ox = 0; ox < aw.out; ++ox)
        for (std::int64_t co = 0; co < c.cout; ++co) {
          float s = 0;
          const std::int64_t g = co / 3;
          for (std::int64_t ky = 0; ky < 3; ++ky)
            for (std::int64_t kx = 0; kx < 3; ++kx) {
              const std::int64_t iy = oy * 2 + ky - ah.before, ix = ox + kx - aw.before;
              if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
              for (std::int64_t i = 0; i < 2; ++i) {
                const float xe =
                    xv[static_cast<std::size_t>(((n * c.h + iy) * c.w + ix) * 4 + g * 2 + i)];
                const float we = wv[static_cast<std::size_t>(((ky * 3 + kx) * 2 + i) * 6 + co)];
                s = static_cast<float>(float16(s + xe * we));
              }
            }
          expected.push_back(static_cast<float>(float16(s + bv[static_cast<std::size_t>(co)])));
        }
  EXPECT_EQ(y.to_vector<float>(), expected);
  // And float32 accumulation differs from it somewhere (the test can tell the two apart).
  EXPECT_NE(conv2d(x, w, b, c.options()).to_vector<float>(), expected);
}

// Small integers keep every partial sum exact in float16 (|sum| < 2048), so the 16-bit running
// sums must reproduce the exact result, forward and backward: this checks the indexing of the
// compute_dtype loops against the float64 path.
Tensor small_integers(const Shape& shape, std::uint32_t seed, DType dtype) {
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (float& e : v) {
    seed = seed * 1664525u + 1013904223u;
    e = static_cast<float>(static_cast<int>((seed >> 24) % 7) - 3);
  }
  return from_vector(v, shape, {.dtype = dtype});
}

TEST(ConvAccumulation, ComputeDtypeExactOnSmallIntegers) {
  const std::vector<Case> cases = {
      conv(2, 5, 6, 4, 3, 3, 6).stride(2, 1).grouped(2).same(),
      conv(2, 6, 5, 3, 3, 2, 6).dilate(2, 1).as_depthwise(),
  };
  std::uint32_t seed = 1;
  for (const Case& c : cases) {
    std::vector<Tensor> exact, low;
    for (DType dtype : {DType::float64, DType::float16}) {
      Tensor x = small_integers(c.x_shape(), seed, dtype);
      Tensor w = small_integers(c.filters_shape(), seed + 1, dtype);
      Tensor b = small_integers(Shape{c.cout}, seed + 2, dtype);
      for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
      const Tensor y = run(c, x, w, b, Accumulation::compute_dtype);
      const Tensor dy = small_integers(y.shape(), seed + 3, dtype);
      auto& out = dtype == DType::float64 ? exact : low;
      out = grad(sum(mul(y, dy)), {x, w, b});
      out.push_back(y);
    }
    for (std::size_t i = 0; i < exact.size(); ++i) {
      EXPECT_TRUE(all_close(low[i], exact[i], {0, 0})) << "output " << i << " " << c.label();
    }
    seed += 10;
  }
}

// ---- cache ----

TEST(ConvCache, RepeatedShapesReuseThePrimitives) {
  cpu::clear_conv_cache();
  const auto before = cpu::conv_cache_stats();
  Tensor x = normal({2, 8, 8, 16}, 60), w = normal({3, 3, 16, 16}, 61);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  for (int i = 0; i < 3; ++i) {
    const auto g = grad(sum(conv2d(x, w, Tensor(), {.padding = Padding::same})), {x, w});
    ASSERT_EQ(g.size(), 2u);
  }
  const auto after = cpu::conv_cache_stats();
  EXPECT_EQ(after.misses - before.misses, 3);  // forward, backward data, backward filters
  EXPECT_EQ(after.hits - before.hits, 6);
  EXPECT_EQ(after.size, 3u);
  EXPECT_GT(after.capacity, 0u);
  // Plain float32 NHWC convolutions get oneDNN's optimised kernels, not its reference ones.
  EXPECT_EQ(after.reference_implementations - before.reference_implementations, 0);
}

TEST(ConvCache, PointwiseConvolutionsNeedNoConvPrimitive) {
  cpu::clear_conv_cache();
  const auto before = cpu::conv_cache_stats();
  for (DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    Tensor x = normal({2, 3, 3, 16}, 62, dtype), w = normal({1, 1, 16, 8}, 63, dtype);
    x.set_requires_grad(true);
    w.set_requires_grad(true);
    for (int stride : {1, 2}) {
      const auto g = grad(sum(conv2d(x, w, Tensor(), {.strides = {stride, stride}})), {x, w});
      ASSERT_EQ(g.size(), 2u);
      EXPECT_EQ(g[1].shape(), (Shape{1, 1, 16, 8}));
    }
  }
  EXPECT_EQ(cpu::conv_cache_stats().misses - before.misses, 0);
}

TEST(ConvCache, SmallMapsNeedNoConvPrimitive) {
  cpu::clear_conv_cache();
  const auto before = cpu::conv_cache_stats();
  for (DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    Tensor x = normal({2, 4, 4, 16}, 64, dtype), w = normal({3, 3, 16, 8}, 65, dtype);
    x.set_requires_grad(true);
    w.set_requires_grad(true);
    const auto g = grad(sum(conv2d(x, w, Tensor(), {.padding = Padding::same})), {x, w});
    ASSERT_EQ(g.size(), 2u);
    EXPECT_EQ(g[0].shape(), x.shape());
  }
  EXPECT_EQ(cpu::conv_cache_stats().misses - before.misses, 0);
}

// The matmul paths (pointwise and im2col) against oneDNN's convolution primitives on the same
// operands, all three passes, every dtype: they agree to float32 summation order (float32), or to
// within one rounding of the 16-bit result.
TEST(ConvGemmPaths, AgreeWithTheConvolutionPrimitives) {
  for (const Case& c : kCases) {
    if (c.depthwise || c.groups != 1) continue;
    for (DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
      auto [x, w, b] = operands(c, 800, dtype);
      x.set_requires_grad(true);
      w.set_requires_grad(true);
      std::vector<Tensor> results[2];
      for (bool gemm : {true, false}) {
        cpu::set_conv_gemm_paths(gemm);
        const Tensor y = run(c, x, w, b);
        const auto g = grad(sum(mul(y, normal(y.shape(), 801, dtype))), {x, w});
        results[gemm] = {y, g[0], g[1]};
      }
      cpu::set_conv_gemm_paths(std::nullopt);
      const double tol =
          dtype == DType::float32 ? 1e-5 : (dtype == DType::bfloat16 ? 1.0 / 64 : 1.0 / 512);
      for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_TRUE(all_close(results[1][i], results[0][i], {tol, tol}))
            << c.label() << " " << dtype_name(dtype) << " result " << i;
      }
    }
  }
}

// A pointwise convolution with a bias rounds a 16-bit result once, after the bias.
TEST(ConvLowPrecision, PointwiseBiasIsAddedBeforeTheOneRounding) {
  Bf16PathGuard guard(cpu::Bf16Path::convert_to_float32);
  const Case c = conv(2, 3, 4, 40, 1, 1, 12);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    const auto [x, w, b] = operands(c, 610, dtype);
    const Tensor low = conv2d(x, w, b, c.options());
    const Tensor expected =
        conv2d(x.to(DType::float32), w.to(DType::float32), b.to(DType::float32), c.options())
            .to(dtype);
    EXPECT_TRUE(all_close(low, expected, {0, 0})) << dtype_name(dtype);
  }
}

// ---- errors ----

TEST(ConvErrors, ClearMessages) {
  const Tensor x = normal({2, 5, 5, 3}, 70), w = normal({3, 3, 3, 4}, 71);
  expect_error<ValueError>(
      [&] {
        conv2d(x, w, Tensor(), {.strides = {0, 1}});
      },
      {"conv2d", "positive", "height"});
  expect_error<ValueError>(
      [&] {
        conv2d(x, w, Tensor(), {.strides = {1, -2}});
      },
      {"conv2d", "positive", "width"});
  expect_error<ValueError>(
      [&] {
        conv2d(x, w, Tensor(), {.dilation = {0, 1}});
      },
      {"conv2d", "positive"});
  expect_error<ValueError>(
      [&] {
        conv2d(x, normal({6, 3, 3, 4}, 72));
      },
      {"conv2d", "larger than the input", "valid", "same"});
  expect_error<ValueError>(
      [&] {
        conv2d(x, w, Tensor(), {.dilation = {3, 1}});
      },
      {"larger than the input"});
  expect_error<ShapeError>(
      [&] {
        conv2d(x, normal({3, 3, 2, 4}, 73));
      },
      {"conv2d", "(2, 5, 5, 3)", "(3, 3, 2, 4)", "3 channels"});
  expect_error<ShapeError>(
      [&] {
        conv2d(normal({5, 5, 3}, 74), w);
      },
      {"conv2d", "rank 4", "(5, 5, 3)", "batch"});
  expect_error<ShapeError>(
      [&] {
        conv2d(x, normal({3, 3, 3}, 75));
      },
      {"conv2d", "filters", "rank 4", "(3, 3, 3)"});
  expect_error<DTypeError>([&] { conv2d(x, w.to(DType::float16)); },
                           {"conv2d", "float32", "float16"});
  expect_error<DTypeError>([&] { conv2d(x, w, normal({4}, 76, DType::bfloat16)); },
                           {"conv2d", "bfloat16"});
  expect_error<DTypeError>([&] { conv2d(x.to(DType::int32), w.to(DType::int32)); },
                           {"conv2d", "int32"});
  expect_error<ShapeError>([&] { conv2d(x, w, normal({5}, 77)); }, {"bias", "(4,)", "(5,)"});
  expect_error<ValueError>([&] { conv2d(x, w, Tensor(), {.groups = 0}); }, {"groups"});
  expect_error<ShapeError>(
      [&] {
        conv2d(normal({1, 5, 5, 4}, 78), normal({3, 3, 2, 3}, 79), Tensor(), {.groups = 2});
      },
      {"3 output channels", "groups 2"});
  expect_error<ShapeError>(
      [&] {
        conv2d(normal({1, 5, 5, 3}, 78), normal({3, 3, 1, 4}, 79), Tensor(), {.groups = 2});
      },
      {"(1, 5, 5, 3)", "(3, 3, 1, 4)", "groups 2"});
}

TEST(DepthwiseConv, ErrorMessages) {
  const Tensor x = normal({2, 5, 5, 3}, 80);
  expect_error<ShapeError>(
      [&] {
        depthwise_conv2d(x, normal({3, 3, 4, 2}, 81));
      },
      {"depthwise_conv2d", "(2, 5, 5, 3)", "(3, 3, 4, 2)"});
  expect_error<ShapeError>(
      [&] {
        depthwise_conv2d(x, normal({3, 3, 3}, 82));
      },
      {"depthwise_conv2d", "rank 4"});
  expect_error<ValueError>(
      [&] {
        depthwise_conv2d(x, normal({3, 3, 3, 1}, 83), Tensor(), {.strides = {1, 0}});
      },
      {"depthwise_conv2d", "positive"});
  expect_error<ValueError>(
      [&] {
        depthwise_conv2d(x, normal({7, 1, 3, 1}, 84));
      },
      {"depthwise_conv2d", "larger than the input"});
  expect_error<ShapeError>(
      [&] {
        depthwise_conv2d(x, normal({3, 3, 3, 2}, 85), normal({3}, 86));
      },
      {"bias", "(6,)"});
}

}  // namespace
}  // namespace mixprec
