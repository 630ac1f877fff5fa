// Convolutions with few output positions on the CPU as matrix products over an im2col copy of the
// input. With the patch matrix col (N*OH*OW, KH*KW*Cin), whose row for output position p holds the
// input values its window reads (zero where the window overlaps the padding), and the Keras
// filters (KH, KW, Cin, Cout) seen as a (KH*KW*Cin, Cout) matrix, the three passes are
//   y = col . w (+ bias),   dw = col^T . dy,   dcol = dy . w^T, dx = col2im(dcol).
// oneDNN 2.6's direct convolution kernels are slow where a CNN's late stages have only a few
// output positions per image (ResNet-50 at 64x64: 2x2 and 4x4 maps of 256-512 channels), and
// there the patch matrix is small, so the matrix products run at the GEMM rate.
#pragma once

#include "core/window_geometry.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Whether the im2col path takes g: one group, a kernel larger than 1x1, few output positions per
// image (out_h * out_w <= kIm2colMaxPositions) and a patch matrix of at most kIm2colMaxBytes.
inline constexpr std::int64_t kIm2colMaxPositions = 16;
inline constexpr std::int64_t kIm2colMaxBytes = std::int64_t{32} << 20;
bool is_im2col_geometry(const ConvGeometry& g, DType dtype);

// The three passes with the contract of cpu::conv2d_forward / conv2d_backward_data /
// conv2d_backward_filters (conv.h): contiguous CPU tensors of one dtype (float32, float16 or
// bfloat16), checked by the caller; `bias32` undefined or the float32 bias. Sums run in float32;
// a 16-bit result is rounded once.
Tensor im2col_forward(const Tensor& x, const Tensor& filters, const Tensor& bias32,
                      const ConvGeometry& g);
Tensor im2col_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g);
Tensor im2col_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g);

}  // namespace mixprec::cpu
