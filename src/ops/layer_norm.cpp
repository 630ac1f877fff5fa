// layer_norm / rms_norm (mixprec/transformer_ops.h): argument checks, one call into x's backend
// (backend/nn_kernels.h: row_norm_forward), and the autograd node whose backward is one fused
// kernel (row_norm_backward) from the saved row statistics. The checks and the node are shared
// with the fused residual step (ops/row_norm.h, ops/add_layer_norm.h).
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "mixprec/ops.h"
#include "mixprec/transformer_ops.h"
#include "ops/checks.h"
#include "ops/row_norm.h"

namespace mixprec {

namespace {

struct RowNormBackward final : autograd::Node {
  RowNorm kind = RowNorm::layer;
  Tensor x, gamma, mean, rstd;
  DType gamma_dtype = DType::float32, beta_dtype = DType::float32;
  bool has_gamma = false, has_beta = false;

  std::vector<Tensor> backward(const Tensor& g) override {
    ops::check_same_device(name().c_str(), g, x);
    const RowNormGradients grads =
        backend_for(x.device())
            .nn->row_norm_backward(
                kind, g.dtype() == x.dtype() ? g.detach() : cast(g, x.dtype()).detach(), x, gamma,
                mean, rstd);
    // Parameter gradients come back in float32 (float64) and go to the parameters' own dtype.
    std::vector<Tensor> out{grads.dx, has_gamma ? grads.dgamma.to(gamma_dtype) : Tensor()};
    if (kind == RowNorm::layer) out.push_back(has_beta ? grads.dbeta.to(beta_dtype) : Tensor());
    return out;
  }
  std::string name() const override {
    return kind == RowNorm::layer ? "LayerNormBackward" : "RmsNormBackward";
  }
  void release_saved() override { x = gamma = mean = rstd = Tensor(); }
};

// x: floating, rank >= 1, a non-empty last axis.
void check_input(const char* op, const Tensor& x) {
  ops::check_floating(op, x);
  if (x.rank() < 1 || x.dim(-1) < 1) {
    throw ShapeError(std::string(op) + ": expected x (..., C) with C >= 1 features on the last " +
                     "axis, got shape " + x.shape().to_string());
  }
}

// gamma or beta: undefined, or (C) in float32 or x's dtype (float64 with float64 x).
void check_parameter(const char* op, const char* what, const Tensor& t, const Tensor& x) {
  if (!t.defined()) return;
  ops::check_same_device(op, t, x);
  const std::int64_t c = x.dim(-1);
  if (t.rank() != 1 || t.dim(0) != c) {
    throw ShapeError(std::string(op) + ": " + what + " must have shape " + Shape{c}.to_string() +
                     " to match the last axis of x " + x.shape().to_string() + ", got shape " +
                     t.shape().to_string());
  }
  const bool ok =
      t.dtype() == x.dtype() || (is_16bit_float(x.dtype()) && t.dtype() == DType::float32);
  if (!ok) {
    const std::string xd(dtype_name(x.dtype()));
    const std::string allowed =
        is_16bit_float(x.dtype()) ? "float32 (as mixed policies keep it) or " + xd : xd;
    throw DTypeError(std::string(op) + ": " + what + " must be " + allowed + " for " + xd +
                     " x, got " + std::string(dtype_name(t.dtype())) +
                     "; keep normalization parameters in float32 and x in "
                     "float32/float16/bfloat16 (or everything in float64)");
  }
}

void check_epsilon(const char* op, double epsilon, const char* keras_default) {
  if (!(epsilon > 0) || !std::isfinite(epsilon)) {
    throw ValueError(std::string(op) + ": epsilon must be a positive finite number (Keras uses " +
                     keras_default + "), got " + std::to_string(epsilon));
  }
}

}  // namespace

namespace ops {

void check_row_norm_arguments(const char* op, RowNorm kind, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, double epsilon) {
  check_input(op, x);
  check_parameter(op, "gamma", gamma, x);
  if (kind == RowNorm::layer) check_parameter(op, "beta", beta, x);
  check_epsilon(op, epsilon, kind == RowNorm::layer ? "1e-3" : "1e-6");
}

Tensor record_row_norm(RowNorm kind, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       RowNormResult r) {
  const std::vector<Tensor> inputs =
      kind == RowNorm::layer ? std::vector<Tensor>{x, gamma, beta} : std::vector<Tensor>{x, gamma};
  if (!autograd::needs_record(inputs)) return r.y;
  auto node = std::make_shared<RowNormBackward>();
  node->kind = kind;
  node->x = x.detach();
  node->has_gamma = gamma.defined();
  node->has_beta = beta.defined();
  if (gamma.defined()) {
    node->gamma = gamma.detach();
    node->gamma_dtype = gamma.dtype();
  }
  if (beta.defined()) node->beta_dtype = beta.dtype();
  node->mean = std::move(r.mean);
  node->rstd = std::move(r.rstd);
  return autograd::record(r.y, node, inputs);
}

}  // namespace ops

namespace {

Tensor row_norm(RowNorm kind, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                double epsilon) {
  RowNormResult r = backend_for(x.device()).nn->row_norm_forward(kind, x, gamma, beta, epsilon);
  return ops::record_row_norm(kind, x, gamma, beta, std::move(r));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double epsilon) {
  ops::check_row_norm_arguments("layer_norm", RowNorm::layer, x, gamma, beta, epsilon);
  return row_norm(RowNorm::layer, x, gamma, beta, epsilon);
}

Tensor rms_norm(const Tensor& x, const Tensor& gamma, double epsilon) {
  ops::check_row_norm_arguments("rms_norm", RowNorm::rms, x, gamma, Tensor(), epsilon);
  return row_norm(RowNorm::rms, x, gamma, Tensor(), epsilon);
}

}  // namespace mixprec
