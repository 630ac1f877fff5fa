// Pointwise convolutions as matmuls (conv_pointwise.h). Every reshape here is a view of a
// contiguous tensor, and the transposed operands go to cpu::matmul as transpose flags (oneDNN
// reads them through strides), so nothing is copied.
#include "backend/cpu/conv_pointwise.h"

#include "backend/cpu/copy.h"
#include "backend/cpu/fill.h"
#include "backend/cpu/matmul.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

std::int64_t positions(const ConvGeometry& g) { return g.batch * g.out_h * g.out_w; }

bool strided(const ConvGeometry& g) { return g.stride_h != 1 || g.stride_w != 1; }

// The input positions a strided 1x1 convolution reads, (batch, out_h, out_w, channels), as a view
// of the contiguous input t.
Tensor sampled_view(const Tensor& t, const ConvGeometry& g, std::int64_t channels) {
  return core::make_view(
      t, Shape{g.batch, g.out_h, g.out_w, channels},
      {g.in_h * g.in_w * channels, g.stride_h * g.in_w * channels, g.stride_w * channels, 1}, 0);
}

// x itself, or for a strided convolution a contiguous copy of the positions it reads.
Tensor sampled(const Tensor& x, const ConvGeometry& g) {
  if (!strided(g)) return x;
  Tensor out =
      core::make_tensor(Shape{g.batch, g.out_h, g.out_w, g.in_channels}, x.dtype(), x.device());
  cpu::copy(sampled_view(x, g, g.in_channels), out);
  return out;
}

// t (contiguous) seen as a (rows, cols) matrix.
Tensor matrix(const Tensor& t, std::int64_t rows, std::int64_t cols) {
  return core::make_view(t, Shape{rows, cols}, {cols, 1}, 0);
}

// The (positions, channels) matrix m as (batch, out_h, out_w, channels) activations.
Tensor activations(const Tensor& m, const ConvGeometry& g, std::int64_t channels) {
  return core::make_view(m, Shape{g.batch, g.out_h, g.out_w, channels},
                         {g.out_h * g.out_w * channels, g.out_w * channels, channels, 1}, 0);
}

}  // namespace

bool is_pointwise_geometry(const ConvGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h >= 1 && g.stride_w >= 1 &&
         g.groups == 1 && g.pad_top == 0 && g.pad_bottom == 0 && g.pad_left == 0 &&
         g.pad_right == 0 && g.in_h >= 1 && g.in_w >= 1 &&
         g.out_h == (g.in_h - 1) / g.stride_h + 1 && g.out_w == (g.in_w - 1) / g.stride_w + 1;
}

Tensor pointwise_forward(const Tensor& x, const Tensor& filters, const Tensor& bias32,
                         const ConvGeometry& g) {
  const std::int64_t m = positions(g), cin = g.in_channels, cout = g.out_channels;
  const Tensor xm = matrix(sampled(x, g), m, cin), w = matrix(filters, cin, cout);
  if (!bias32.defined())
    return activations(cpu::matmul(xm, w, Transpose::no, Transpose::no), g, cout);
  // The bias joins the float32 accumulator: one rounding.
  return activations(cpu::matmul_bias(xm, w, Transpose::no, Transpose::no, bias32), g, cout);
}

Tensor pointwise_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g) {
  const std::int64_t m = positions(g), cin = g.in_channels, cout = g.out_channels;
  // dx (m, cin) = dy (m, cout) . w^T, w (cin, cout).
  const Tensor dx = activations(
      cpu::matmul(matrix(dy, m, cout), matrix(filters, cin, cout), Transpose::no, Transpose::yes),
      g, cin);
  if (!strided(g)) return dx;
  // A strided convolution never reads the other positions: their gradient is zero.
  Tensor full = core::make_tensor(Shape{g.batch, g.in_h, g.in_w, cin}, dy.dtype(), dy.device());
  cpu::fill(full, 0.0);
  cpu::copy(dx, sampled_view(full, g, cin));
  return full;
}

Tensor pointwise_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g) {
  const std::int64_t m = positions(g), cin = g.in_channels, cout = g.out_channels;
  // dw (cin, cout) = x^T (cin, m) . dy (m, cout).
  const Tensor dw = cpu::matmul(matrix(sampled(x, g), m, cin), matrix(dy, m, cout), Transpose::yes,
                                Transpose::no);
  return core::make_view(dw, Shape{1, 1, cin, cout}, {cin * cout, cin * cout, cout, 1}, 0);
}

}  // namespace mixprec::cpu
