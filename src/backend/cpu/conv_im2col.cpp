// Small-map convolutions through im2col and matmul (conv_im2col.h). The patch matrix is built by
// copying, for each output position and kernel tap, the Cin contiguous channels of one input pixel
// (NHWC), or zeros for a tap in the padding; col2im adds each patch row back into its pixels in
// float32 and rounds once.
#include "backend/cpu/conv_im2col.h"

#include <cstring>
#include <vector>

#include "backend/cpu/cast.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/parallel.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

std::int64_t positions(const ConvGeometry& g) { return g.batch * g.out_h * g.out_w; }
std::int64_t patch(const ConvGeometry& g) { return g.kernel_h * g.kernel_w * g.in_channels; }

// Calls f(tap, pixel) for the kernel taps of output position p (row-major over (n, oh, ow)):
// tap = kh * KW + kw, pixel = the input pixel index n * H * W + ih * W + iw, or -1 in the padding.
template <typename F>
void for_each_tap(const ConvGeometry& g, std::int64_t p, F&& f) {
  const std::int64_t n = p / (g.out_h * g.out_w), oh = (p / g.out_w) % g.out_h, ow = p % g.out_w;
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
    for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
      const bool inside = ih >= 0 && ih < g.in_h && iw >= 0 && iw < g.in_w;
      f(kh * g.kernel_w + kw, inside ? (n * g.in_h + ih) * g.in_w + iw : -1);
    }
  }
}

// The (positions, KH*KW*Cin) patch matrix of x, in x's dtype.
Tensor im2col(const Tensor& x, const ConvGeometry& g) {
  const std::int64_t rows = positions(g), cols = patch(g), c = g.in_channels;
  Tensor col = core::make_tensor(Shape{rows, cols}, x.dtype(), x.device());
  const std::size_t es = dtype_size(x.dtype());
  const auto* src = static_cast<const unsigned char*>(x.data_ptr());
  auto* dst = static_cast<unsigned char*>(col.data_ptr());
  parallel_for(rows, rows * cols >= (std::int64_t{1} << 15), [&](std::int64_t p) {
    unsigned char* row = dst + static_cast<std::size_t>(p * cols) * es;
    for_each_tap(g, p, [&](std::int64_t tap, std::int64_t pixel) {
      unsigned char* out = row + static_cast<std::size_t>(tap * c) * es;
      const std::size_t bytes = static_cast<std::size_t>(c) * es;
      if (pixel < 0) {
        std::memset(out, 0, bytes);
      } else {
        std::memcpy(out, src + static_cast<std::size_t>(pixel * c) * es, bytes);
      }
    });
  });
  return col;
}

// dx (N, H, W, Cin) in `dtype` from the float32 patch-matrix gradient dcol: every pixel gets the
// sum of the rows' entries that read it. Parallel over images (their pixels are disjoint), each
// summing in float32 and rounding once.
Tensor col2im(const Tensor& dcol, const ConvGeometry& g, DType dtype) {
  const std::int64_t c = g.in_channels, cols = patch(g), per_image = g.out_h * g.out_w;
  const std::int64_t pixels = g.in_h * g.in_w;
  Tensor dx32 = core::make_tensor(Shape{g.batch, g.in_h, g.in_w, c}, DType::float32, dcol.device());
  const float* in = dcol.data<float>();
  float* out = dx32.data<float>();
  parallel_for(g.batch, g.batch * pixels * c >= (std::int64_t{1} << 15), [&](std::int64_t n) {
    std::fill(out + n * pixels * c, out + (n + 1) * pixels * c, 0.0f);
    for (std::int64_t p = n * per_image; p < (n + 1) * per_image; ++p) {
      const float* row = in + p * cols;
      for_each_tap(g, p, [&](std::int64_t tap, std::int64_t pixel) {
        if (pixel < 0) return;
        float* o = out + pixel * c;
        const float* v = row + tap * c;
#pragma omp simd
        for (std::int64_t i = 0; i < c; ++i) o[i] += v[i];
      });
    }
  });
  return dtype == DType::float32 ? dx32 : cpu::cast(dx32, dtype);
}

// The (KH*KW*Cin, Cout) matrix of the HWIO filters.
Tensor filter_matrix(const Tensor& filters, const ConvGeometry& g) {
  return core::make_view(filters, Shape{patch(g), g.out_channels}, {g.out_channels, 1}, 0);
}

Tensor output_of(const Tensor& m, const ConvGeometry& g) {
  const std::int64_t c = g.out_channels;
  return core::make_view(m, Shape{g.batch, g.out_h, g.out_w, c},
                         {g.out_h * g.out_w * c, g.out_w * c, c, 1}, 0);
}

}  // namespace

bool is_im2col_geometry(const ConvGeometry& g, DType dtype) {
  if (g.groups != 1 || (g.kernel_h == 1 && g.kernel_w == 1)) return false;
  if (g.out_h * g.out_w > kIm2colMaxPositions || positions(g) == 0) return false;
  const std::int64_t bytes = positions(g) * patch(g) * static_cast<std::int64_t>(dtype_size(dtype));
  return bytes <= kIm2colMaxBytes;
}

Tensor im2col_forward(const Tensor& x, const Tensor& filters, const Tensor& bias32,
                      const ConvGeometry& g) {
  const Tensor col = im2col(x, g), w = filter_matrix(filters, g);
  const Tensor y = bias32.defined() ? cpu::matmul_bias(col, w, Transpose::no, Transpose::no, bias32)
                                    : cpu::matmul(col, w, Transpose::no, Transpose::no);
  return output_of(y, g);
}

Tensor im2col_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g) {
  const Tensor dym =
      core::make_view(dy, Shape{positions(g), g.out_channels}, {g.out_channels, 1}, 0);
  // dcol stays in float32 (the accumulator) until col2im has summed the overlapping taps.
  const Tensor dcol =
      cpu::matmul(dym, filter_matrix(filters, g), Transpose::no, Transpose::yes, DType::float32);
  return col2im(dcol, g, dy.dtype());
}

Tensor im2col_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g) {
  const Tensor dym =
      core::make_view(dy, Shape{positions(g), g.out_channels}, {g.out_channels, 1}, 0);
  const Tensor dw = cpu::matmul(im2col(x, g), dym, Transpose::yes, Transpose::no);
  return core::make_view(dw, Shape{g.kernel_h, g.kernel_w, g.in_channels, g.out_channels},
                         {g.kernel_w * g.in_channels * g.out_channels,
                          g.in_channels * g.out_channels, g.out_channels, 1},
                         0);
}

}  // namespace mixprec::cpu
