// Host side of batch normalization on CUDA: operand preparation and the kernel sequence (see
// batch_norm.h).
#include "backend/cuda/batch_norm.h"

#include <string>

#include "backend/cuda/cast.h"
#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/nn_kernels.h"
#include "core/op_kinds.h"
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

// The fused op's activation as the kernels name it; the op layer sends only these four.
kernels::BnActivation fused_activation(const char* op, DType dtype, UnaryOp act) {
  if (dtype != DType::float32 && dtype != DType::float16 && dtype != DType::bfloat16) {
    throw DTypeError(std::string(op) + ": x must be float32, float16 or bfloat16, got " +
                     std::string(dtype_name(dtype)));
  }
  switch (act) {
    case UnaryOp::relu: return kernels::BnActivation::relu;
    case UnaryOp::relu6: return kernels::BnActivation::relu6;
    case UnaryOp::sigmoid: return kernels::BnActivation::sigmoid;
    case UnaryOp::silu: return kernels::BnActivation::silu;
    default:
      throw ValueError(std::string(op) + ": no fused kernel for the activation " +
                       std::string(op_name(act)));
  }
}

BatchNormTrainingResult training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 double epsilon, kernels::BnActivation act) {
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
  Tensor partials = scratch(2 * kernels::batch_norm_parts(x.dtype(), r.m, r.c) * r.c, stat, device);
  kernels::batch_norm_statistics(x.dtype(), xc.data_ptr(), r.m, r.c, partials.data_ptr(),
                                 out.mean.data_ptr(), out.variance.data_ptr(), scope.stream());
  kernels::batch_norm_normalize(x.dtype(), xc.data_ptr(), out.mean.data_ptr(),
                                out.variance.data_ptr(), g.data_ptr(), b.data_ptr(), epsilon, r.m,
                                r.c, out.y.data_ptr(), scope.stream(), act);
  return out;
}

Tensor inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                 const Tensor& variance, double epsilon, kernels::BnActivation act) {
  const Rows r = rows_of(x);
  const DType stat = stat_dtype(x.dtype());
  const Device device = x.device();
  Tensor y = core::make_tensor(x.shape(), x.dtype(), device);
  if (x.numel() == 0) return y;
  StreamScope scope(device);
  const Tensor xc = contiguous(x.detach());
  const Tensor g = as_stat(gamma, stat), b = as_stat(beta, stat);
  const Tensor m = as_stat(mean, stat), v = as_stat(variance, stat);
  kernels::batch_norm_normalize(x.dtype(), xc.data_ptr(), m.data_ptr(), v.data_ptr(), g.data_ptr(),
                                b.data_ptr(), epsilon, r.m, r.c, y.data_ptr(), scope.stream(), act);
  return y;
}

// beta: only with a fused activation (its pre-activation is recomputed from x).
BatchNormGradients backward(const char* op, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& variance,
                            double epsilon, BatchNormStats statistics, kernels::BnActivation act) {
  if (dy.dtype() != x.dtype() || dy.shape() != x.shape() || !(dy.device() == x.device())) {
    throw Error(std::string(op) + ": the gradient must have x's shape, dtype and device");
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
  Tensor partials = scratch(2 * kernels::batch_norm_parts(x.dtype(), r.m, r.c) * r.c, stat, device);
  Tensor coefficients = scratch(3 * r.c, stat, device);
  // beta: for the fused activation's pre-activation only.
  const Tensor b = act != kernels::BnActivation::none ? as_stat(beta, stat) : Tensor();
  kernels::batch_norm_backward(x.dtype(), gc.data_ptr(), xc.data_ptr(), m.data_ptr(), v.data_ptr(),
                               g.data_ptr(), b.defined() ? b.data_ptr() : nullptr, epsilon,
                               statistics == BatchNormStats::batch, r.m, r.c, partials.data_ptr(),
                               coefficients.data_ptr(), out.dgamma.data_ptr(), out.dbeta.data_ptr(),
                               out.dx.data_ptr(), scope.stream(), act);
  return out;
}

}  // namespace

BatchNormTrainingResult batch_norm_training(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, double epsilon) {
  return training(x, gamma, beta, epsilon, kernels::BnActivation::none);
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon) {
  return inference(x, gamma, beta, mean, variance, epsilon, kernels::BnActivation::none);
}

BatchNormGradients batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       BatchNormStats statistics) {
  return backward("cuda::batch_norm_backward", dy, x, gamma, Tensor(), mean, variance, epsilon,
                  statistics, kernels::BnActivation::none);
}

BatchNormTrainingResult batch_norm_activation_training(const Tensor& x, const Tensor& gamma,
                                                       const Tensor& beta, double epsilon,
                                                       UnaryOp act) {
  return training(x, gamma, beta, epsilon,
                  fused_activation("cuda::batch_norm_activation_training", x.dtype(), act));
}

Tensor batch_norm_activation_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       UnaryOp act) {
  return inference(x, gamma, beta, mean, variance, epsilon,
                   fused_activation("cuda::batch_norm_activation_inference", x.dtype(), act));
}

BatchNormGradients batch_norm_activation_backward(const Tensor& dy, const Tensor& x,
                                                  const Tensor& gamma, const Tensor& beta,
                                                  const Tensor& mean, const Tensor& variance,
                                                  double epsilon, BatchNormStats statistics,
                                                  UnaryOp act) {
  constexpr const char* op = "cuda::batch_norm_activation_backward";
  return backward(op, dy, x, gamma, beta, mean, variance, epsilon, statistics,
                  fused_activation(op, x.dtype(), act));
}

}  // namespace mixprec::cuda
