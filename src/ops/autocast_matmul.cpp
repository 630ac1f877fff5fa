// autocast_matmul: matmul(x, cast(kernel, x.dtype())) in one op, for the float32 master kernel of
// a mixed-precision layer (Dense). Composed of separate ops, a mixed_float16 step on a CPU without
// a float16 matmul moves the (K, N) kernel through memory six times: cast to float16, widened to
// float32 for the forward product, widened again for the backward dX product, the dW product
// rounded to float16, widened back to float32 by the cast's backward. Here:
//   forward:  W16 = the kernel rounded to x's dtype, in the form the backend multiplies: float32
//             values rounded to float16 (one pass) when the product runs in float32, or a
//             bfloat16 tensor when oneDNN multiplies bfloat16 natively (AutocastForm); y = x W16.
//   backward: dX = dY W16^T with the same W16; dW = x^T dY accumulated in float32 and rounded to
//             x's dtype in place, handed to the kernel in float32 (no CastBackward).
// The values are the composition's bit for bit: a product of 16-bit values accumulated in float32
// and rounded once, whichever form the 16-bit operands have in memory.
// The single-pass product is a backend capability (backend/nn_kernels.h: autocast_matmul*, the
// CPU's); a backend without it (CUDA: the cast is one cheap kernel, and cuBLASLt multiplies 16-bit
// operands natively with float32 accumulation) runs the composition.
#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/nn_kernels.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

struct AutocastMatmulBackward final : autograd::Node {
  Tensor x;  // (M, K) compute dtype; kept when the kernel needs a gradient
  Tensor w;  // (K, N) the kernel as multiplied (AutocastForm); kept when x needs one
  AutocastForm form = AutocastForm::widened;

  std::vector<Tensor> backward(const Tensor& g) override {  // g: (M, N) in x's dtype
    const NnKernels& nn = *backend_for(g.device()).nn;
    Tensor dx, dw;
    if (next[0]) dx = nn.autocast_matmul_backward_data(g, w, form);
    if (next[1]) dw = nn.autocast_matmul_backward_kernel(x, g, form);
    return {dx, dw};
  }
  std::string name() const override { return "AutocastMatmulBackward"; }
  void release_saved() override { x = w = Tensor(); }
};

// x (M, K) 16-bit, kernel (K, N) float32 -> (M, N) in x's dtype.
Tensor fused_2d(const NnKernels& nn, const Tensor& x, const Tensor& kernel) {
  AutocastProduct r = nn.autocast_matmul(x, kernel);
  if (!autograd::needs_record({&x, &kernel})) return r.y;
  auto node = std::make_shared<AutocastMatmulBackward>();
  node->form = r.form;
  if (kernel.requires_grad()) node->x = x.detach();
  if (x.requires_grad()) node->w = std::move(r.w);
  return autograd::record(r.y, node, {x, kernel});
}

}  // namespace

Tensor autocast_matmul(const Tensor& x, const Tensor& kernel) {
  ops::check_floating("autocast_matmul", x);
  ops::check_floating("autocast_matmul", kernel);
  const NnKernels& nn = *backend_for(x.device()).nn;
  if (nn.autocast_matmul == nullptr || kernel.device() != x.device()) {
    // The composition (matmul reports operands on different devices).
    return matmul(x, cast(kernel, x.dtype()));
  }
  if (x.rank() < 2 || kernel.rank() != 2 || x.dim(-1) != kernel.dim(0)) {
    throw ShapeError("autocast_matmul: expected x (..., K) and a kernel (K, N), got x " +
                     ops::describe(x) + " and kernel " + ops::describe(kernel));
  }
  if (!is_16bit_float(x.dtype()) || kernel.dtype() != DType::float32) {
    return matmul(x, cast(kernel, x.dtype()));
  }
  if (x.rank() == 2) return fused_2d(nn, x, kernel);
  // (B..., M, K): one product over the folded rows, like matmul does for a rank-2 kernel.
  std::vector<std::int64_t> out_dims(x.shape().begin(), x.shape().end());
  out_dims.back() = kernel.dim(1);
  const Tensor y = fused_2d(nn, reshape(x, Shape{-1, x.dim(-1)}), kernel);
  return reshape(y, Shape(out_dims));
}

}  // namespace mixprec
