// batch_norm_activation_training / _inference: the fused batch normalization + activation op
// (ops/batch_norm_activation.h), its autograd node, and the fusion switch.
#include "ops/batch_norm_activation.h"

#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "core/env_switch.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec::ops {

namespace {

struct BatchNormActivationBackward final : autograd::Node {
  BatchNormStats stats = BatchNormStats::batch;
  UnaryOp act = UnaryOp::relu;
  Tensor x, gamma, beta, mean, variance;
  double epsilon = 0;
  DType beta_dtype = DType::float32;

  std::vector<Tensor> backward(const Tensor& g) override {
    ops::check_same_device(name().c_str(), g, x);
    const BatchNormGradients grads =
        backend_for(x.device())
            .nn->batch_norm_activation_backward(
                g.dtype() == x.dtype() ? g.detach() : cast(g, x.dtype()).detach(), x, gamma, beta,
                mean, variance, epsilon, stats, act);
    return {grads.dx, grads.dgamma.to(gamma.dtype()), grads.dbeta.to(beta_dtype)};
  }
  std::string name() const override {
    return stats == BatchNormStats::batch ? "BatchNormActivationTrainingBackward"
                                          : "BatchNormActivationInferenceBackward";
  }
  void release_saved() override { x = gamma = beta = mean = variance = Tensor(); }
};

void check_activation(const char* op, UnaryOp act) {
  if (act != UnaryOp::relu && act != UnaryOp::relu6 && act != UnaryOp::sigmoid &&
      act != UnaryOp::silu) {
    throw ValueError(std::string(op) + ": activation " + op_name(act) +
                     " is not fused; use relu, relu6, sigmoid or silu");
  }
}

// The unfused activation (the composed path); act is one check_activation accepts.
Tensor apply(UnaryOp act, const Tensor& y) {
  switch (act) {
    case UnaryOp::relu: return relu(y);
    case UnaryOp::relu6: return relu6(y);
    case UnaryOp::sigmoid: return sigmoid(y);
    default: return silu(y);
  }
}

// The fused kernels of x's backend where it has them for x's dtype, else null (compose).
const NnKernels* fused_kernels(const Tensor& x) {
  const NnKernels* nn = backend_for(x.device()).nn;
  const bool has = nn->batch_norm_activation_training != nullptr &&
                   nn->batch_norm_activation_inference != nullptr &&
                   nn->batch_norm_activation_backward != nullptr;
  return has && x.dtype() != DType::float64 ? nn : nullptr;
}

std::shared_ptr<BatchNormActivationBackward> make_node(BatchNormStats stats, UnaryOp act,
                                                       const Tensor& x, const Tensor& gamma,
                                                       const Tensor& beta, double epsilon) {
  auto node = std::make_shared<BatchNormActivationBackward>();
  node->stats = stats;
  node->act = act;
  node->x = x.detach();
  node->gamma = gamma.detach();
  node->beta = beta.detach();
  node->epsilon = epsilon;
  node->beta_dtype = beta.dtype();
  return node;
}

constinit core::EnvSwitch g_fusion("MIXPREC_FUSION");

}  // namespace

std::optional<UnaryOp> fusable_activation(std::string_view activation) {
  if (activation == "relu") return UnaryOp::relu;
  if (activation == "relu6") return UnaryOp::relu6;
  if (activation == "sigmoid") return UnaryOp::sigmoid;
  if (activation == "swish" || activation == "silu") return UnaryOp::silu;
  return std::nullopt;
}

bool batch_norm_activation_fusion_enabled() { return g_fusion.enabled(); }

void set_batch_norm_activation_fusion(std::optional<bool> enabled) { g_fusion.set(enabled); }

BatchNormOutput batch_norm_activation_training(const Tensor& x, const Tensor& gamma,
                                               const Tensor& beta, double epsilon, UnaryOp act) {
  constexpr const char* op = "batch_norm_activation_training";
  check_batch_norm_arguments(op, x, gamma, beta, nullptr, nullptr, epsilon);
  check_activation(op, act);
  const NnKernels* nn = fused_kernels(x);
  if (nn == nullptr) {
    BatchNormOutput out = batch_norm_training(x, gamma, beta, epsilon);
    out.y = apply(act, out.y);
    return out;
  }
  BatchNormTrainingResult r = nn->batch_norm_activation_training(x, gamma, beta, epsilon, act);
  BatchNormOutput out{std::move(r.y), std::move(r.mean), std::move(r.variance)};
  if (!autograd::needs_record({&x, &gamma, &beta})) return out;
  auto node = make_node(BatchNormStats::batch, act, x, gamma, beta, epsilon);
  // The node's own copies: the caller may update the returned statistics in place.
  node->mean = autograd::fresh_copy(out.mean);
  node->variance = autograd::fresh_copy(out.variance);
  out.y = autograd::record(out.y, node, {x, gamma, beta});
  return out;
}

Tensor batch_norm_activation_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& moving_mean, const Tensor& moving_variance,
                                       double epsilon, UnaryOp act) {
  constexpr const char* op = "batch_norm_activation_inference";
  check_batch_norm_arguments(op, x, gamma, beta, &moving_mean, &moving_variance, epsilon);
  check_activation(op, act);
  const NnKernels* nn = fused_kernels(x);
  if (nn == nullptr) {
    return apply(act, batch_norm_inference(x, gamma, beta, moving_mean, moving_variance, epsilon));
  }
  Tensor y = nn->batch_norm_activation_inference(x, gamma, beta, moving_mean, moving_variance,
                                                 epsilon, act);
  if (!autograd::needs_record({&x, &gamma, &beta})) return y;
  auto node = make_node(BatchNormStats::moving, act, x, gamma, beta, epsilon);
  // Copies: a training step may assign new moving statistics before this backward runs.
  node->mean = autograd::fresh_copy(moving_mean);
  node->variance = autograd::fresh_copy(moving_variance);
  return autograd::record(y, node, {x, gamma, beta});
}

}  // namespace mixprec::ops
