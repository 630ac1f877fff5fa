// Host side of pooling on CUDA (see pooling.h).
#include "backend/cuda/pooling.h"

#include <string>

#include "backend/cpu/pooling.h"
#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/nn_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

kernels::PoolShape shape_of(const PoolGeometry& g) {
  kernels::PoolShape k;
  k.batch = g.batch, k.in_h = g.in_h, k.in_w = g.in_w, k.channels = g.channels;
  k.window_h = g.window_h, k.window_w = g.window_w, k.stride_h = g.stride_h;
  k.stride_w = g.stride_w, k.pad_top = g.pad_top, k.pad_left = g.pad_left;
  k.out_h = g.out_h, k.out_w = g.out_w;
  return k;
}

void check_shape(const char* what, const Tensor& t, const Shape& expected) {
  if (!t.defined() || t.shape() != expected || !t.device().is_cuda()) {
    throw Error(std::string("cuda::pool2d: ") + what + " must be a CUDA tensor of shape " +
                expected.to_string() + ", got " +
                (t.defined() ? t.shape().to_string() + " on " + t.device().to_string()
                             : std::string("an undefined tensor")));
  }
}

}  // namespace

PoolForward pool2d_forward(PoolKind kind, const Tensor& x, const PoolGeometry& g,
                           SaveForBackward save) {
  check_shape("x", x, Shape{g.batch, g.in_h, g.in_w, g.channels});
  const Shape out_shape{g.batch, g.out_h, g.out_w, g.channels};
  PoolForward out;
  out.y = core::make_tensor(out_shape, x.dtype(), x.device());
  const bool max = kind == PoolKind::max;
  if (max && save == SaveForBackward::yes) {
    out.saved.argmax =
        core::make_tensor(out_shape, pool_argmax_dtype(g.window_h, g.window_w), x.device());
  }
  if (out.y.numel() == 0) return out;
  StreamScope scope(x.device());
  const Tensor xc = contiguous(x.detach());
  kernels::pool2d_forward(max, x.dtype(), shape_of(g), xc.data_ptr(), out.y.data_ptr(),
                          out.saved.argmax.defined() ? out.saved.argmax.data_ptr() : nullptr,
                          scope.stream());
  return out;
}

Tensor pool2d_backward(PoolKind kind, const Tensor& dy, const Tensor& argmax,
                       const PoolGeometry& g) {
  const Shape out_shape{g.batch, g.out_h, g.out_w, g.channels};
  check_shape("dy", dy, out_shape);
  const bool max = kind == PoolKind::max;
  if (max) {
    check_shape("argmax", argmax, out_shape);
    const DType expected = pool_argmax_dtype(g.window_h, g.window_w);
    if (argmax.dtype() != expected || !argmax.is_contiguous()) {
      throw Error(std::string("cuda::pool2d: argmax must be a contiguous ") +
                  std::string(dtype_name(expected)) + " tensor (the forward's), got " +
                  std::string(dtype_name(argmax.dtype())));
    }
  }
  Tensor dx =
      core::make_tensor(Shape{g.batch, g.in_h, g.in_w, g.channels}, dy.dtype(), dy.device());
  if (dx.numel() == 0) return dx;
  if (dy.numel() == 0) {
    fill(dx, 0.0);
    return dx;
  }
  StreamScope scope(dy.device());
  const Tensor gc = contiguous(dy.detach());
  kernels::pool2d_backward(max, dy.dtype(), shape_of(g), gc.data_ptr(),
                           max ? argmax.data_ptr() : nullptr, dx.data_ptr(), scope.stream());
  return dx;
}

}  // namespace mixprec::cuda
