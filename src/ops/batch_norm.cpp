// batch_norm_training / batch_norm_inference: argument checks, one call into x's backend
// (backend/nn_kernels.h: batch_norm_*), and the autograd node (one backward kernel for both modes).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "mixprec/nn_ops.h"
#include "ops/batch_norm_activation.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

struct BatchNormBackward final : autograd::Node {
  BatchNormStats stats = BatchNormStats::batch;
  Tensor x, gamma, mean, variance;
  double epsilon = 0;
  DType beta_dtype = DType::float32;

  std::vector<Tensor> backward(const Tensor& g) override {
    ops::check_same_device(name().c_str(), g, x);
    const BatchNormGradients grads =
        backend_for(x.device())
            .nn->batch_norm_backward(
                g.dtype() == x.dtype() ? g.detach() : cast(g, x.dtype()).detach(), x, gamma, mean,
                variance, epsilon, stats);
    // Parameter gradients come back in float32 (float64) and go to the parameters' own dtype.
    return {grads.dx, grads.dgamma.to(gamma.dtype()), grads.dbeta.to(beta_dtype)};
  }
  std::string name() const override {
    return stats == BatchNormStats::batch ? "BatchNormTrainingBackward"
                                          : "BatchNormInferenceBackward";
  }
  void release_saved() override { x = gamma = mean = variance = Tensor(); }
};

// x: floating, (..., C) with rank >= 2.
void check_input(const char* op, const Tensor& x) {
  ops::check_floating(op, x);
  if (x.rank() < 2) {
    throw ShapeError(std::string(op) + ": expected x of rank >= 2 with channels last, e.g. " +
                     "(N, C) or (N, H, W, C), got shape " + x.shape().to_string() +
                     "; add a batch axis with reshape");
  }
}

// A per-channel tensor (gamma, beta, a statistic): shape (C); dtype float32 or x's dtype
// (float32 for float32 x, float64 for float64 x, float32 or the 16-bit type for 16-bit x).
void check_channel_tensor(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  if (!t.defined()) {
    throw ValueError(std::string(op) + ": " + what + " is an undefined tensor; pass a " +
                     Shape{x.dim(-1)}.to_string() + " tensor");
  }
  ops::check_same_device(op, t, x);
  const std::int64_t c = x.dim(-1);
  if (t.rank() != 1 || t.dim(0) != c) {
    throw ShapeError(std::string(op) + ": " + what + " must have shape " + Shape{c}.to_string() +
                     " to match the " + std::to_string(c) + " channels (last axis) of x " +
                     x.shape().to_string() + ", got shape " + t.shape().to_string());
  }
  const bool ok =
      t.dtype() == x.dtype() || (is_16bit_float(x.dtype()) && t.dtype() == DType::float32);
  if (!ok) {
    const std::string xd(dtype_name(x.dtype()));
    const std::string allowed =
        is_16bit_float(x.dtype()) ? "float32 (as mixed policies keep it) or " + xd : xd;
    throw DTypeError(std::string(op) + ": " + what + " must be " + allowed + " for " + xd +
                     " x, got " + std::string(dtype_name(t.dtype())) +
                     "; keep BatchNormalization parameters and statistics in float32 and x in "
                     "float32/float16/bfloat16 (or everything in float64)");
  }
}

void check_epsilon(const char* op, double epsilon) {
  if (!(epsilon > 0) || !std::isfinite(epsilon)) {
    throw ValueError(std::string(op) + ": epsilon must be a positive finite number (Keras uses " +
                     "1e-3), got " + std::to_string(epsilon));
  }
}

}  // namespace

void ops::check_batch_norm_arguments(const char* op, const Tensor& x, const Tensor& gamma,
                                     const Tensor& beta, const Tensor* mean, const Tensor* variance,
                                     double epsilon) {
  check_input(op, x);
  check_channel_tensor(op, "gamma", gamma, x);
  check_channel_tensor(op, "beta", beta, x);
  if (mean != nullptr) check_channel_tensor(op, "moving_mean", *mean, x);
  if (variance != nullptr) check_channel_tensor(op, "moving_variance", *variance, x);
  check_epsilon(op, epsilon);
  if (mean != nullptr) return;
  std::int64_t rows = 1;  // elements per channel
  for (int i = 0; i + 1 < x.rank(); ++i) rows *= x.dim(i);
  if (rows == 0) {
    throw ValueError(std::string(op) + ": x " + x.shape().to_string() +
                     " has no elements per channel to take batch statistics over; use "
                     "batch_norm_inference or a non-empty batch");
  }
}

BatchNormOutput batch_norm_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    double epsilon) {
  ops::check_batch_norm_arguments("batch_norm_training", x, gamma, beta, nullptr, nullptr, epsilon);
  BatchNormTrainingResult r =
      backend_for(x.device()).nn->batch_norm_training(x, gamma, beta, epsilon);
  BatchNormOutput out{std::move(r.y), std::move(r.mean), std::move(r.variance)};
  if (!autograd::needs_record({&x, &gamma, &beta})) return out;
  auto node = std::make_shared<BatchNormBackward>();
  node->stats = BatchNormStats::batch;
  node->x = x.detach();
  node->gamma = gamma.detach();
  // The node's own copies: the caller may update the returned statistics in place.
  node->mean = autograd::fresh_copy(out.mean);
  node->variance = autograd::fresh_copy(out.variance);
  node->epsilon = epsilon;
  node->beta_dtype = beta.dtype();
  out.y = autograd::record(out.y, node, {x, gamma, beta});
  return out;
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& moving_mean, const Tensor& moving_variance,
                            double epsilon) {
  ops::check_batch_norm_arguments("batch_norm_inference", x, gamma, beta, &moving_mean,
                                  &moving_variance, epsilon);
  Tensor y = backend_for(x.device())
                 .nn->batch_norm_inference(x, gamma, beta, moving_mean, moving_variance, epsilon);
  if (!autograd::needs_record({&x, &gamma, &beta})) return y;
  auto node = std::make_shared<BatchNormBackward>();
  node->stats = BatchNormStats::moving;
  node->x = x.detach();
  node->gamma = gamma.detach();
  // Copies: a training step may assign new moving statistics before this backward runs.
  node->mean = autograd::fresh_copy(moving_mean);
  node->variance = autograd::fresh_copy(moving_variance);
  node->epsilon = epsilon;
  node->beta_dtype = beta.dtype();
  return autograd::record(y, node, {x, gamma, beta});
}

}  // namespace mixprec
