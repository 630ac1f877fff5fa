// Host side of layer / RMS normalization on CUDA: operand preparation and the kernel sequence (see
// layer_norm.h).
#include "backend/cuda/layer_norm.h"

#include "backend/cuda/cast.h"
#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/nn_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

DType stat_dtype(DType x_dtype) {
  return x_dtype == DType::float64 ? DType::float64 : DType::float32;
}

// A parameter as a contiguous vector of the statistics dtype (a cast for a 16-bit one), or
// undefined.
Tensor as_stat(const Tensor& t, DType stat) {
  if (!t.defined()) return Tensor();
  const Tensor d = t.detach();
  return d.dtype() == stat ? contiguous(d) : cuda::cast(d, stat);
}

const void* pointer_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

}  // namespace

RowNormResult row_norm_forward(RowNorm kind, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, double epsilon) {
  const std::int64_t c = x.dim(-1), rows = c > 0 ? x.numel() / c : 0;
  const DType stat = stat_dtype(x.dtype());
  const Device device = x.device();
  RowNormResult out{core::make_tensor(x.shape(), x.dtype(), device),
                    core::make_tensor(Shape{rows}, stat, device),
                    core::make_tensor(Shape{rows}, stat, device)};
  if (rows == 0) return out;
  StreamScope scope(device);
  const Tensor xc = contiguous(x.detach());
  const Tensor g = as_stat(gamma, stat);
  const Tensor b = kind == RowNorm::layer ? as_stat(beta, stat) : Tensor();
  kernels::layer_norm_forward(kind == RowNorm::rms, x.dtype(), xc.data_ptr(), rows, c,
                              pointer_or_null(g), pointer_or_null(b), epsilon, out.y.data_ptr(),
                              out.mean.data_ptr(), out.rstd.data_ptr(), scope.stream());
  return out;
}

AddRowNormResult add_row_norm_forward(RowNorm kind, const Tensor& a, const Tensor& b,
                                      const Tensor& gamma, const Tensor& beta, double epsilon) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || !(a.device() == b.device())) {
    throw Error("cuda::add_row_norm_forward: a and b must have one shape, dtype and device");
  }
  const std::int64_t c = a.dim(-1), rows = c > 0 ? a.numel() / c : 0;
  const DType stat = stat_dtype(a.dtype());
  const Device device = a.device();
  AddRowNormResult out{core::make_tensor(a.shape(), a.dtype(), device),
                       core::make_tensor(a.shape(), a.dtype(), device),
                       core::make_tensor(Shape{rows}, stat, device),
                       core::make_tensor(Shape{rows}, stat, device)};
  if (rows == 0) return out;
  StreamScope scope(device);
  const Tensor ac = contiguous(a.detach()), bc = contiguous(b.detach());
  const Tensor g = as_stat(gamma, stat);
  const Tensor bt = kind == RowNorm::layer ? as_stat(beta, stat) : Tensor();
  kernels::layer_norm_add_forward(kind == RowNorm::rms, a.dtype(), ac.data_ptr(), bc.data_ptr(),
                                  rows, c, pointer_or_null(g), pointer_or_null(bt), epsilon,
                                  out.sum.data_ptr(), out.y.data_ptr(), out.mean.data_ptr(),
                                  out.rstd.data_ptr(), scope.stream());
  return out;
}

RowNormGradients row_norm_backward(RowNorm kind, const Tensor& dy, const Tensor& x,
                                   const Tensor& gamma, const Tensor& mean, const Tensor& rstd) {
  if (dy.dtype() != x.dtype() || dy.shape() != x.shape() || !(dy.device() == x.device())) {
    throw Error("cuda::row_norm_backward: the gradient must have x's shape, dtype and device");
  }
  const std::int64_t c = x.dim(-1), rows = c > 0 ? x.numel() / c : 0;
  const DType stat = stat_dtype(x.dtype());
  const Device device = x.device();
  RowNormGradients out{core::make_tensor(x.shape(), x.dtype(), device),
                       core::make_tensor(Shape{c}, stat, device),
                       core::make_tensor(Shape{c}, stat, device)};
  if (rows == 0) {
    if (c > 0) {
      fill(out.dgamma, 0.0);
      fill(out.dbeta, 0.0);
    }
    return out;
  }
  StreamScope scope(device);
  const Tensor xc = contiguous(x.detach()), gc = contiguous(dy.detach());
  const Tensor g = as_stat(gamma, stat), m = as_stat(mean, stat), r = as_stat(rstd, stat);
  Tensor partials =
      core::make_tensor(Shape{2 * kernels::layer_norm_parts(rows, c) * c}, stat, device);
  kernels::layer_norm_backward(kind == RowNorm::rms, x.dtype(), gc.data_ptr(), xc.data_ptr(), rows,
                               c, pointer_or_null(g), m.data_ptr(), r.data_ptr(),
                               partials.data_ptr(), out.dx.data_ptr(), out.dgamma.data_ptr(),
                               out.dbeta.data_ptr(), scope.stream());
  return out;
}

}  // namespace mixprec::cuda
