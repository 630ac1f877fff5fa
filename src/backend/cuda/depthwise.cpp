// Host side of the depthwise convolution on CUDA: checks, geometry, launches (see depthwise.h).
#include "backend/cuda/depthwise.h"

#include <string>

#include "backend/cpu/conv.h"
#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

using kernels::DepthwiseGeometry;

DepthwiseGeometry kernel_geometry(const ConvGeometry& g) {
  if (g.in_channels != g.groups || g.in_per_group() != 1) {
    throw Error(
        "cuda::depthwise: expected the grouped geometry of a depthwise convolution "
        "(groups == in_channels), got groups " +
        std::to_string(g.groups) + " for " + std::to_string(g.in_channels) + " input channels");
  }
  DepthwiseGeometry k;
  k.batch = g.batch, k.in_h = g.in_h, k.in_w = g.in_w, k.channels = g.in_channels;
  k.multiplier = g.in_channels > 0 ? g.out_channels / g.in_channels : 1;
  k.kernel_h = g.kernel_h, k.kernel_w = g.kernel_w;
  k.stride_h = g.stride_h, k.stride_w = g.stride_w;
  k.dilation_h = g.dilation_h, k.dilation_w = g.dilation_w;
  k.pad_top = g.pad_top, k.pad_left = g.pad_left;
  k.out_h = g.out_h, k.out_w = g.out_w;
  return k;
}

// What the kernels do: round every partial sum for 16-bit data with 16-bit accumulation only.
Accumulation sum_of(DType dtype, Accumulation accumulation) {
  return is_16bit_float(dtype) && accumulation == Accumulation::compute_dtype
             ? Accumulation::compute_dtype
             : Accumulation::float32;
}

void check_operand(const char* what, const Tensor& t, std::int64_t numel, DType dtype,
                   Device device) {
  if (!t.defined() || t.numel() != numel || t.dtype() != dtype || !(t.device() == device) ||
      !is_floating(dtype)) {
    throw Error(std::string("cuda::depthwise: ") + what + " must be a " + device.to_string() + " " +
                std::string(dtype_name(dtype)) + " tensor of " + std::to_string(numel) +
                " elements, got " +
                (t.defined() ? std::string(dtype_name(t.dtype())) + " " + t.shape().to_string() +
                                   " on " + t.device().to_string()
                             : std::string("an undefined tensor")));
  }
}

Shape x_shape(const ConvGeometry& g) { return Shape{g.batch, g.in_h, g.in_w, g.in_channels}; }
Shape y_shape(const ConvGeometry& g) { return Shape{g.batch, g.out_h, g.out_w, g.out_channels}; }
Shape filters_shape(const ConvGeometry& g) {
  return Shape{g.kernel_h, g.kernel_w, 1, g.out_channels};
}

}  // namespace

Tensor depthwise_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                         const ConvGeometry& g, Accumulation accumulation) {
  const DType dtype = x.dtype();
  const Device device = x.device();
  const DepthwiseGeometry k = kernel_geometry(g);
  check_operand("x", x, x_shape(g).numel(), dtype, device);
  check_operand("filters", filters, filters_shape(g).numel(), dtype, device);
  if (bias.defined()) check_operand("bias", bias, g.out_channels, dtype, device);
  Tensor y = core::make_tensor(y_shape(g), dtype, device);
  if (y.numel() == 0) return y;
  StreamScope scope(device);
  const Tensor xc = contiguous(x.detach()), wc = contiguous(filters.detach());
  const Tensor bc = bias.defined() ? contiguous(bias.detach()) : Tensor();
  kernels::depthwise_forward(dtype, k, xc.data_ptr(), wc.data_ptr(),
                             bc.defined() ? bc.data_ptr() : nullptr, y.data_ptr(),
                             sum_of(dtype, accumulation), scope.stream());
  return y;
}

Tensor depthwise_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g,
                               Accumulation accumulation) {
  const DType dtype = dy.dtype();
  const Device device = dy.device();
  const DepthwiseGeometry k = kernel_geometry(g);
  check_operand("dy", dy, y_shape(g).numel(), dtype, device);
  check_operand("filters", filters, filters_shape(g).numel(), dtype, device);
  Tensor dx = core::make_tensor(x_shape(g), dtype, device);
  if (dx.numel() == 0) return dx;
  if (dy.numel() == 0) {  // no outputs (zero multiplier): nothing reads x
    fill(dx, 0.0);
    return dx;
  }
  StreamScope scope(device);
  const Tensor gc = contiguous(dy.detach()), wc = contiguous(filters.detach());
  kernels::depthwise_backward_data(dtype, k, gc.data_ptr(), wc.data_ptr(), dx.data_ptr(),
                                   sum_of(dtype, accumulation), scope.stream());
  return dx;
}

Tensor depthwise_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g,
                                  Accumulation accumulation) {
  const DType dtype = x.dtype();
  const Device device = x.device();
  const DepthwiseGeometry k = kernel_geometry(g);
  check_operand("x", x, x_shape(g).numel(), dtype, device);
  check_operand("dy", dy, y_shape(g).numel(), dtype, device);
  Tensor dw = core::make_tensor(filters_shape(g), dtype, device);
  if (dw.numel() == 0) return dw;
  if (dy.numel() == 0) {  // an empty batch: empty sums
    fill(dw, 0.0);
    return dw;
  }
  StreamScope scope(device);
  const Tensor xc = contiguous(x.detach()), gc = contiguous(dy.detach());
  const Accumulation sum = sum_of(dtype, accumulation);
  const std::int64_t chunks = kernels::depthwise_filter_chunks(k, sum);
  // Per-chunk partial sums in the compute type (float; double for float64), freed stream-ordered.
  Tensor partials =
      core::make_tensor(Shape{chunks * dw.numel()},
                        dtype == DType::float64 ? DType::float64 : DType::float32, device);
  kernels::depthwise_backward_filters(dtype, k, xc.data_ptr(), gc.data_ptr(), partials.data_ptr(),
                                      dw.data_ptr(), sum, scope.stream());
  return dw;
}

}  // namespace mixprec::cuda
