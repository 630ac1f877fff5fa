// Host side of batch normalization on CUDA: operand preparation and the kernel sequence (see
// batch_norm.h).
#include "backend/cuda/batch_norm.h"

#include <string>

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

// A per-channel tensor as a contiguous vector of the statistics dtype (a cast for a 16-bit
// parameter; C elements, negligible next to x).
Tensor as_stat(const Tensor& t, DType stat) {
  const Tensor d = t.detach();
  return d.dtype() == stat ? contiguous(d) : cuda::cast(d, stat);
}

struct Rows {
  std::int64_t m = 0, c = 0;
};

Rows rows_of(const Tensor& x) {
  Rows r;
  r.c = x.rank() > 0 ? x.dim(-1) : 1;
  r.m = r.c > 0 ? x.numel() / r.c : 0;
  return r;
}

Tensor scratch(std::int64_t n, DType stat, Device device) {
  return core::make_tensor(Shape{n > 0 ? n : 1}, stat, device);
}

}  // namespace

BatchNormTrainingResult batch_norm_training(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, double epsilon) {
  const Rows r = rows_of(x);
  if (r.m == 0) throw ValueError("cuda::batch_norm_training: no rows to take statistics over");
  const DType stat = stat_dtype(x.dtype());
  const Device device = x.device();
  BatchNormTrainingResult out{core::make_tensor(x.shape(), x.dtype(), device),
                              core::make_tensor(Shape{r.c}, stat, device),
                              core::make_tensor(Shape{r.c}, stat, device)};
  if (x.numel() == 0) return out;
  StreamScope scope(device);
  const Tensor xc = contiguous(x.detach());
  const Tensor g = as_stat(gamma, stat), b = as_stat(beta, stat);
  Tensor partials = scratch(kernels::batch_norm_parts(r.m, r.c) * r.c, stat, device);
  Tensor scale = scratch(r.c, stat, device);
  kernels::batch_norm_mean(x.dtype(), xc.data_ptr(), r.m, r.c, partials.data_ptr(),
                           out.mean.data_ptr(), scope.stream());
  kernels::batch_norm_variance(x.dtype(), xc.data_ptr(), out.mean.data_ptr(), g.data_ptr(), epsilon,
                               r.m, r.c, partials.data_ptr(), out.variance.data_ptr(),
                               scale.data_ptr(), scope.stream());
  kernels::batch_norm_normalize(x.dtype(), xc.data_ptr(), out.mean.data_ptr(), scale.data_ptr(),
                                b.data_ptr(), r.m, r.c, out.y.data_ptr(), scope.stream());
  return out;
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon) {
  const Rows r = rows_of(x);
  const DType stat = stat_dtype(x.dtype());
  const Device device = x.device();
  Tensor y = core::make_tensor(x.shape(), x.dtype(), device);
  if (x.numel() == 0) return y;
  StreamScope scope(device);
  const Tensor xc = contiguous(x.detach());
  const Tensor g = as_stat(gamma, stat), b = as_stat(beta, stat);
  const Tensor m = as_stat(mean, stat), v = as_stat(variance, stat);
  Tensor scale = scratch(r.c, stat, device);
  kernels::batch_norm_scale(x.dtype(), v.data_ptr(), g.data_ptr(), epsilon, r.c, scale.data_ptr(),
                            scope.stream());
  kernels::batch_norm_normalize(x.dtype(), xc.data_ptr(), m.data_ptr(), scale.data_ptr(),
                                b.data_ptr(), r.m, r.c, y.data_ptr(), scope.stream());
  return y;
}

BatchNormGradients batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       BatchNormStats statistics) {
  if (dy.dtype() != x.dtype() || dy.shape() != x.shape() || !(dy.device() == x.device())) {
    throw Error("cuda::batch_norm_backward: the gradient must have x's shape, dtype and device");
  }
  const Rows r = rows_of(x);
  const DType stat = stat_dtype(x.dtype());
  const Device device = x.device();
  BatchNormGradients out{core::make_tensor(x.shape(), x.dtype(), device),
                         core::make_tensor(Shape{r.c}, stat, device),
                         core::make_tensor(Shape{r.c}, stat, device)};
  if (x.numel() == 0) {
    // No rows: the parameter gradients are empty sums.
    if (r.c > 0) {
      fill(out.dgamma, 0.0);
      fill(out.dbeta, 0.0);
    }
    return out;
  }
  StreamScope scope(device);
  const Tensor xc = contiguous(x.detach()), gc = contiguous(dy.detach());
  const Tensor g = as_stat(gamma, stat), m = as_stat(mean, stat), v = as_stat(variance, stat);
  Tensor partials = scratch(2 * kernels::batch_norm_parts(r.m, r.c) * r.c, stat, device);
  Tensor coefficients = scratch(3 * r.c, stat, device);
  kernels::batch_norm_backward(x.dtype(), gc.data_ptr(), xc.data_ptr(), m.data_ptr(), v.data_ptr(),
                               g.data_ptr(), epsilon, statistics == BatchNormStats::batch, r.m, r.c,
                               partials.data_ptr(), coefficients.data_ptr(), out.dgamma.data_ptr(),
                               out.dbeta.data_ptr(), out.dx.data_ptr(), scope.stream());
  return out;
}

}  // namespace mixprec::cuda
