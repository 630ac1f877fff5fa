// The fused CPU batch normalization + activation kernels (batch_norm_activation.h): argument
// checks and dispatch on the storage type around the sweeps of batch_norm_activation_sweeps.h
// (one sweep for the statistics, one for y; two for the backward).
#include "backend/cpu/batch_norm_activation.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/batch_norm_activation_sweeps.h"
#include "backend/cpu/batch_norm_loops.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

using namespace bn_loops;  // NOLINT: the shared loop helpers

// Per-channel float32 constants of one call: pre = (x - mean) * scale + shift.
struct Affine {
  std::vector<float> mean, scale, shift;
  bn_sweeps::Affine view() const { return {mean.data(), scale.data(), shift.data()}; }
};

Affine affine_of(const std::vector<float>& mean, const std::vector<float>& variance,
                 const Tensor& gamma, const Tensor& beta, double epsilon) {
  Affine a{mean, inverse_std(variance, static_cast<float>(epsilon)), beta.to_vector<float>()};
  const std::vector<float> g = gamma.to_vector<float>();
  for (std::size_t j = 0; j < a.scale.size(); ++j) a.scale[j] *= g[j];
  return a;
}

bn_kernels::Act act_kind(UnaryOp act) { return *bn_kernels::act_of(act); }

// Calls f.template operator()<T>() for the storage type of x (float, float16, bfloat16).
template <typename F>
void dispatch_storage(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32: f.template operator()<float>(); return;
    case DType::float16: f.template operator()<float16>(); return;
    case DType::bfloat16: f.template operator()<bfloat16>(); return;
    default:
      throw DTypeError("cpu::batch_norm_activation: x must be float32, float16 or bfloat16, got " +
                       std::string(dtype_name(dtype)));
  }
}

void check_supported(const Tensor& x, UnaryOp act) {
  if (!batch_norm_activation_supported(x.dtype(), act)) {
    throw Error("cpu::batch_norm_activation: no fused kernel for " +
                std::string(dtype_name(x.dtype())) + " x with activation " +
                std::string(op_name(act)));
  }
}

Tensor stat_tensor(std::int64_t c) {
  return core::make_tensor(Shape{c}, DType::float32, Device::cpu());
}

}  // namespace

bool batch_norm_activation_supported(DType dtype, UnaryOp act) {
  const bool storage =
      dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16;
  const bool activation = act == UnaryOp::relu || act == UnaryOp::relu6 ||
                          act == UnaryOp::sigmoid || act == UnaryOp::silu;
  return storage && activation;
}

BatchNormTrainingResult batch_norm_activation_training(const Tensor& x, const Tensor& gamma,
                                                       const Tensor& beta, double epsilon,
                                                       UnaryOp act) {
  check_supported(x, act);
  const Rows r = rows_of(x);
  if (r.m == 0) throw ValueError("cpu::batch_norm_activation: no rows to take statistics over");
  BatchNormTrainingResult out{core::make_tensor(x.shape(), x.dtype(), Device::cpu()),
                              stat_tensor(r.c), stat_tensor(r.c)};
  if (x.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  dispatch_storage(x.dtype(), [&]<typename T>() {
    float* mean = out.mean.data<float>();
    float* variance = out.variance.data<float>();
    bn_sweeps::statistics(xc.data<T>(), r, mean, variance);
    const Affine a = affine_of(std::vector<float>(mean, mean + r.c),
                               std::vector<float>(variance, variance + r.c), gamma, beta, epsilon);
    bn_sweeps::forward(xc.data<T>(), r, a.view(), act_kind(act), out.y.data<T>());
  });
  return out;
}

Tensor batch_norm_activation_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       UnaryOp act) {
  check_supported(x, act);
  Tensor y = core::make_tensor(x.shape(), x.dtype(), Device::cpu());
  if (x.numel() == 0) return y;
  const Tensor xc = x.contiguous();
  const Affine a =
      affine_of(mean.to_vector<float>(), variance.to_vector<float>(), gamma, beta, epsilon);
  dispatch_storage(x.dtype(), [&]<typename T>() {
    bn_sweeps::forward(xc.data<T>(), rows_of(x), a.view(), act_kind(act), y.data<T>());
  });
  return y;
}

BatchNormGradients batch_norm_activation_backward(const Tensor& dy, const Tensor& x,
                                                  const Tensor& gamma, const Tensor& beta,
                                                  const Tensor& mean, const Tensor& variance,
                                                  double epsilon, BatchNormStats stats,
                                                  UnaryOp act) {
  check_supported(x, act);
  if (dy.dtype() != x.dtype() || dy.shape() != x.shape()) {
    throw Error("cpu::batch_norm_activation_backward: the gradient must have x's shape and dtype");
  }
  const Rows r = rows_of(x);
  BatchNormGradients out{core::make_tensor(x.shape(), x.dtype(), Device::cpu()), stat_tensor(r.c),
                         stat_tensor(r.c)};
  if (x.numel() == 0) {
    std::fill_n(out.dgamma.data<float>(), r.c, 0.0f);
    std::fill_n(out.dbeta.data<float>(), r.c, 0.0f);
    return out;
  }
  const std::vector<float> var = variance.to_vector<float>();
  const Affine a = affine_of(mean.to_vector<float>(), var, gamma, beta, epsilon);
  const std::vector<float> inv_std = inverse_std(var, static_cast<float>(epsilon));
  const Tensor xc = x.contiguous(), gc = dy.contiguous();
  dispatch_storage(x.dtype(), [&]<typename T>() {
    bn_sweeps::backward(gc.data<T>(), xc.data<T>(), r, a.view(), inv_std.data(), stats,
                        act_kind(act), out.dx.data<T>(), out.dgamma.data<float>(),
                        out.dbeta.data<float>());
  });
  return out;
}

}  // namespace mixprec::cpu
