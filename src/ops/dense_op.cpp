// dense_forward: y = act(x W + b) with the bias and activation fused into the product where the
// backend has matmul epilogues (NnKernels::matmul_epilogue: cuBLASLt on CUDA), and the composition
// of separate ops everywhere else.
//
// Which product can carry which epilogue. With M rows (x's batch axes folded), z = x W + b (M, N),
// y = act(z), and dy (M, N) the incoming gradient, the backward is
//   dz = dy * act'(z)     (M, N)  elementwise
//   db = sum_rows(dz)     (N,)
//   dW = x^T dz           (K, N)  a product whose inner (reduced) extent is M
//   dx = dz W^T           (M, K)  a product whose inner extent is N
// cuBLASLt's epilogues act on the product they are attached to:
//  - Forward: BIAS / GELU_BIAS compute act(x W + b) from the float32 accumulator (GELU = the tanh
//    approximation: used for gelu_tanh only; exact gelu takes BIAS and then the erf gelu op).
//    GELU_AUX_BIAS also writes z (the "aux" matrix), which the gelu_tanh backward needs. ReLU takes
//    BIAS and then the relu op: cuBLASLt's RELU / RELU_BIAS epilogues compute x := max(x, 0)
//    (cublasLt.h), which maps a NaN to 0 as fmax does (users report exactly that on NVIDIA's
//    forums), while relu keeps NaN on the CPU and in the CUDA elementwise kernel; a fused relu
//    would hide a NaN forward pass from the user and change results between devices. The relu
//    pass costs one read and write of y.
//  - DRELU_BGRAD / DGELU_BGRAD multiply their *product's* result by act'(aux) and sum its rows
//    into a bias gradient. In this layer's backward the only products are dW and dx, and neither
//    result is dy: dx = dz W^T is the gradient of the *previous* layer's output. So these
//    epilogues belong on the dx product of the *next* layer's backward, which would then hand this
//    layer dz and db directly. That is a cross-layer fusion the autograd engine cannot express
//    safely (y may have several consumers, whose gradients must be summed before act' applies),
//    so it is not done: dz = dy * act'(.) is one elementwise kernel (the unary_backward kernel on
//    the aux z for gelu_tanh; the relu and exact gelu ops record their own backward).
//  - BGRADA on the dW product: in the backend's row-major mapping, dW = x^T dz hands dz to cuBLASLt
//    as its A operand with the inner extent M, and BGRADA writes the sums of A over that extent,
//    sum_rows(dz) = db, in the same pass. Without a kernel gradient, db is a row reduction of dz.
//  - dx = dz W^T carries no epilogue.
// Precision: the fused forward adds the bias to the float32 accumulator and rounds once (the
// composition rounds the product, then the sum); dW is produced in the kernel's dtype (float32 for
// a float32 master: the accumulator unrounded, where the composition rounds it to the compute
// dtype first) and db in the same dtype, cast to the bias's.
// Bias dtype: cublasLt.h documents CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE as D's type except for
// IMMA and fp8 kernels, so a float32 bias cannot feed a 16-bit D: the float32 master bias is cast
// to the compute dtype (an N-element pass), as the composition's read of the variable does.
#include "ops/dense_op.h"

#include <string>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/tensor_kernels.h"
#include "mixprec/error.h"
#include "ops/checks.h"

namespace mixprec {

namespace ops::detail {

DenseEpiloguePlan plan_dense_epilogue(DenseActivation activation, GradMode grad, DType dtype,
                                      BiasMode bias, Accumulation accumulation) {
  DenseEpiloguePlan plan;
  // float64 is the reference dtype (and cuBLASLt's epilogues are for the tensor-core types);
  // 16-bit accumulation is the slow reference path of DESIGN §2.4: both stay composed.
  const bool fusable_dtype =
      dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16;
  const bool rounds_in_16bit = accumulation == Accumulation::compute_dtype && is_16bit_float(dtype);
  if (!fusable_dtype || rounds_in_16bit) return plan;
  plan.fused = true;
  const bool with_bias = bias == BiasMode::added;
  const bool training = grad == GradMode::training;
  switch (activation) {
    case DenseActivation::linear: plan.forward = with_bias ? Epilogue::bias : Epilogue::none; break;
    case DenseActivation::gelu:  // exact erf gelu: not cuBLASLt's; the gelu op runs after
      plan.forward = with_bias ? Epilogue::bias : Epilogue::none;
      plan.after = ActivationAfter::exact_gelu;
      break;
    case DenseActivation::relu:  // cuBLASLt's relu drops NaN: the relu op runs after
      plan.forward = with_bias ? Epilogue::bias : Epilogue::none;
      plan.after = ActivationAfter::relu;
      break;
    case DenseActivation::gelu_tanh:
      if (training) {
        plan.forward = with_bias ? Epilogue::gelu_tanh_aux_bias : Epilogue::gelu_tanh_aux;
        plan.saved = SavedActivation::pre_activation;
      } else {
        plan.forward = with_bias ? Epilogue::gelu_tanh_bias : Epilogue::gelu_tanh;
      }
      break;
  }
  return plan;
}

BiasGradRoute bias_grad_route(KernelGrad kernel, BiasGrad bias) {
  if (bias == BiasGrad::not_needed) return BiasGradRoute::none;
  return kernel == KernelGrad::needed ? BiasGradRoute::dw_epilogue : BiasGradRoute::row_reduction;
}

DType row_reduction_dtype(DType dz_dtype) {
  return is_16bit_float(dz_dtype) ? DType::float32 : dz_dtype;
}

}  // namespace ops::detail

namespace {

using ops::detail::ActivationAfter;
using ops::detail::BiasGradRoute;
using ops::detail::SavedActivation;

Tensor activate(DenseActivation activation, const Tensor& y) {
  switch (activation) {
    case DenseActivation::linear: return y;
    case DenseActivation::relu: return relu(y);
    case DenseActivation::gelu: return gelu(y, GeluApproximation::none);
    case DenseActivation::gelu_tanh: return gelu(y, GeluApproximation::tanh);
  }
  return y;
}

// The definition: separate ops, recorded one by one (the CPU path, and CUDA where not fused).
Tensor composed(const Tensor& x, const Tensor& kernel, const Tensor& bias,
                DenseActivation activation, Accumulation accumulation) {
  // With 16-bit accumulation the product rounds its partial sums to x's dtype; otherwise
  // autocast_matmul reads the (float32 master) kernel in x's dtype inside the product.
  Tensor y = accumulation == Accumulation::compute_dtype && is_16bit_float(x.dtype())
                 ? matmul(x, kernel.to(x.dtype()), Transpose::no, Transpose::no,
                          Accumulation::compute_dtype)
                 : autocast_matmul(x, kernel);
  if (bias.defined()) y = y + bias.to(x.dtype());  // (N,) broadcast over (..., N)
  return activate(activation, y);
}

// The rows of x (..., K) with its batch axes folded: the product of all extents but the last.
std::int64_t folded_rows(const Shape& shape) {
  std::int64_t rows = 1;
  for (int i = 0; i + 1 < shape.rank(); ++i) rows *= shape[i];
  return rows;
}

// A variable the op reads in x's dtype: its own dtype, or a float32 master under a 16-bit x.
bool readable_in(const Tensor& v, DType dtype) {
  return v.dtype() == dtype || (v.dtype() == DType::float32 && is_16bit_float(dtype));
}

struct DenseEpilogueBackward final : autograd::Node {
  Tensor x2;     // (M, K) x in its dtype; kept when the kernel needs a gradient
  Tensor w;      // (K, N) the kernel in x's dtype; kept when x needs a gradient
  Tensor saved;  // (M, N): the pre-activation z for gelu_tanh
  SavedActivation activation = SavedActivation::none;
  Shape x_shape;
  DType kernel_dtype = DType::float32, bias_dtype = DType::float32;

  std::vector<Tensor> backward(const Tensor& g) override {  // g (..., N) in x's dtype
    const Backend& backend = backend_for(g.device());
    const Tensor g2 = reshape(g, Shape{folded_rows(x_shape), g.dim(-1)});
    Tensor dz = g2;  // dz = dy * act'(z), (M, N)
    if (activation == SavedActivation::pre_activation) {
      dz = backend.tensor->unary_backward(UnaryOp::gelu_tanh, g2, saved, saved);
    }
    const bool wants_bias = next.size() > 2 && next[2] != nullptr;
    const BiasGradRoute route = ops::detail::bias_grad_route(
        next[1] ? ops::detail::KernelGrad::needed : ops::detail::KernelGrad::not_needed,
        wants_bias ? ops::detail::BiasGrad::needed : ops::detail::BiasGrad::not_needed);
    Tensor dx, dw, db;
    // dW = x^T dz (K, N) in the kernel's dtype, with db = sum_rows(dz) (N,) riding on it.
    if (next[1]) {
      if (route == BiasGradRoute::dw_epilogue) {
        EpilogueResult r = backend.nn->matmul_epilogue(x2, dz, Transpose::yes, Transpose::no,
                                                       kernel_dtype, Epilogue::bias_grad, Tensor());
        dw = r.out;
        db = r.bias_grad;
      } else {
        dw = backend.nn->matmul(x2, dz, Transpose::yes, Transpose::no, kernel_dtype,
                                Accumulation::float32);
      }
    }
    if (route == BiasGradRoute::row_reduction) {
      // Summed in float32 (row_reduction_dtype): the widening pass reads dz once more, where a
      // 16-bit sum could overflow to inf at a large loss scale and skip the step for nothing.
      const DType sum_dtype = ops::detail::row_reduction_dtype(dz.dtype());
      const Tensor dz_sum = dz.dtype() == sum_dtype ? dz : cast(dz, sum_dtype);
      db = sum(dz_sum, {0});  // over the M rows: (N,)
    }
    if (db.defined() && db.dtype() != bias_dtype) db = cast(db, bias_dtype);
    if (next[0]) {
      dx = reshape(backend.nn->matmul(dz, w, Transpose::no, Transpose::yes, dz.dtype(),
                                      Accumulation::float32),
                   x_shape);
    }
    return {dx, dw, db};
  }
  std::string name() const override { return "DenseEpilogueBackward"; }
  void release_saved() override { x2 = w = saved = Tensor(); }
};

// One product with the plan's epilogue (the backend's matmul_epilogue), recorded as one node in
// training.
Tensor fused(const NnKernels& nn, const Tensor& x, const Tensor& kernel, const Tensor& bias,
             const ops::detail::DenseEpiloguePlan& plan, ops::detail::GradMode grad) {
  const DType dtype = x.dtype();
  const std::int64_t k = kernel.dim(0), n = kernel.dim(1);
  const Tensor x2 = reshape(x.detach(), Shape{folded_rows(x.shape()), k});  // (M, K)
  const Tensor w =
      kernel.dtype() == dtype ? kernel.detach() : cast(kernel.detach(), dtype);  // (K, N)
  Tensor b;  // (N,) in x's dtype: cuBLASLt's bias has the output's type
  if (bias.defined()) b = bias.dtype() == dtype ? bias.detach() : cast(bias.detach(), dtype);
  const EpilogueResult r =
      nn.matmul_epilogue(x2, w, Transpose::no, Transpose::no, dtype, plan.forward, b);
  std::vector<std::int64_t> dims(x.shape().begin(), x.shape().end());
  dims.back() = n;
  Tensor y = reshape(r.out, Shape(dims));  // (..., N)
  if (grad == ops::detail::GradMode::training) {
    auto node = std::make_shared<DenseEpilogueBackward>();
    node->activation = plan.saved;
    node->x_shape = x.shape();
    node->kernel_dtype = kernel.dtype();
    node->bias_dtype = bias.defined() ? bias.dtype() : dtype;
    if (kernel.requires_grad()) node->x2 = x2;
    if (x.requires_grad()) node->w = w;
    if (plan.saved == SavedActivation::pre_activation) node->saved = r.aux.detach();
    y = autograd::record(y, node, {x, kernel, bias});
  }
  switch (plan.after) {
    case ActivationAfter::none: break;
    case ActivationAfter::relu: return relu(y);
    case ActivationAfter::exact_gelu: return gelu(y, GeluApproximation::none);
  }
  return y;
}

void check_dense(const Tensor& x, const Tensor& kernel, const Tensor& bias) {
  ops::check_floating("dense", x);
  ops::check_floating("dense", kernel);
  ops::check_same_device("dense", x, kernel);
  if (x.rank() < 2 || kernel.rank() != 2 || x.dim(-1) != kernel.dim(0)) {
    throw ShapeError("dense: expected x (batch, ..., K) and a kernel (K, N), got x " +
                     ops::describe(x) + " and kernel " + ops::describe(kernel) +
                     "; the kernel's first extent must equal x's last");
  }
  if (bias.defined()) {
    ops::check_floating("dense", bias);
    ops::check_same_device("dense", x, bias);
    if (bias.rank() != 1 || bias.dim(0) != kernel.dim(1)) {
      throw ShapeError("dense: expected a bias of shape (" + std::to_string(kernel.dim(1)) +
                       ",) for a kernel " + ops::describe(kernel) + ", got " + ops::describe(bias));
    }
  }
}

}  // namespace

std::optional<DenseActivation> dense_activation_from_name(std::string_view name) {
  if (name.empty() || name == "linear") return DenseActivation::linear;
  if (name == "relu") return DenseActivation::relu;
  if (name == "gelu") return DenseActivation::gelu;
  if (name == "gelu_tanh") return DenseActivation::gelu_tanh;
  return std::nullopt;
}

Tensor dense_forward(const Tensor& x, const Tensor& kernel, const Tensor& bias,
                     DenseActivation activation, Accumulation accumulation) {
  check_dense(x, kernel, bias);
  const NnKernels& nn = *backend_for(x.device()).nn;
  if (nn.matmul_epilogue != nullptr && readable_in(kernel, x.dtype()) &&
      (!bias.defined() || readable_in(bias, x.dtype()))) {
    const ops::detail::GradMode grad = autograd::needs_record({&x, &kernel, &bias})
                                           ? ops::detail::GradMode::training
                                           : ops::detail::GradMode::inference;
    const ops::detail::DenseEpiloguePlan plan = ops::detail::plan_dense_epilogue(
        activation, grad, x.dtype(),
        bias.defined() ? ops::detail::BiasMode::added : ops::detail::BiasMode::none, accumulation);
    if (plan.fused) return fused(nn, x, kernel, bias, plan, grad);
  }
  return composed(x, kernel, bias, activation, accumulation);
}

}  // namespace mixprec
