// autocast_matmul: matmul(x, cast(kernel, x.dtype())) in one op, for the float32 master kernel of
// a mixed-precision layer (Dense). Composed of separate ops, a mixed_float16 step on a CPU without
// a float16 matmul moves the (K, N) kernel through memory six times: cast to float16, widened to
// float32 for the forward product, widened again for the backward dX product, the dW product
// rounded to float16, widened back to float32 by the cast's backward. Here:
//   forward:  W16 = the kernel rounded to x's dtype, in the form the backend multiplies: float32
//             values rounded to float16 (one pass) when the product runs in float32, or a
//             bfloat16 tensor when oneDNN multiplies bfloat16 natively; y = x W16.
//   backward: dX = dY W16^T with the same W16; dW = x^T dY accumulated in float32 and rounded to
//             x's dtype in place, handed to the kernel in float32 (no CastBackward).
// The values are the composition's bit for bit: a product of 16-bit values accumulated in float32
// and rounded once, whichever form the 16-bit operands have in memory.
#include "autograd/node.h"
#include "backend/cpu/cast.h"
#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/matmul.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

// Whether the CPU backend multiplies `dtype` operands as such (oneDNN native bfloat16) rather than
// converting them to float32 first (float16 in oneDNN 2.6, bfloat16 without AVX512_BF16/AMX).
bool multiplies_natively(DType dtype) { return dtype == DType::bfloat16 && cpu::use_native_bf16(); }

// A 16-bit tensor as the float32 product wants it: widened (exact).
Tensor widened(const Tensor& t) { return cpu::cast(t, DType::float32); }

struct AutocastMatmulBackward final : autograd::Node {
  Tensor x;  // (M, K) compute dtype; kept when the kernel needs a gradient
  Tensor w;  // (K, N) the kernel as multiplied (see forward); kept when x needs one
  DType dtype = DType::float16;  // x's dtype
  bool native = false;           // w is a 16-bit tensor (else float32 holding 16-bit values)

  std::vector<Tensor> backward(const Tensor& g) override {  // g: (M, N) in dtype
    const Tensor g_op = native ? g : widened(g);
    Tensor dx, dw;
    if (next[0]) {
      const Tensor p = cpu::matmul(g_op, w, Transpose::no, Transpose::yes);
      dx = native ? p : cpu::cast(p, dtype);
    }
    if (next[1]) {
      const Tensor x_op = native ? x : widened(x);
      dw = cpu::matmul(x_op, g_op, Transpose::yes, Transpose::no, DType::float32);
      cpu::round_to_precision_in_place(dw, dtype);  // the float32 gradient of a 16-bit kernel
    }
    return {dx, dw};
  }
  std::string name() const override { return "AutocastMatmulBackward"; }
  void release_saved() override { x = w = Tensor(); }
};

// x (M, K) 16-bit, kernel (K, N) float32 -> (M, N) in x's dtype.
Tensor fused_2d(const Tensor& x, const Tensor& kernel) {
  const DType dtype = x.dtype();
  const bool native = multiplies_natively(dtype);
  Tensor w, y;
  if (native) {
    w = cpu::cast(kernel, dtype);
    y = cpu::matmul(x, w, Transpose::no, Transpose::no);
  } else {
    w = cpu::round_to_precision(kernel.contiguous(), dtype);
    y = cpu::cast(cpu::matmul(widened(x), w, Transpose::no, Transpose::no), dtype);
  }
  if (!autograd::needs_record({&x, &kernel})) return y;
  auto node = std::make_shared<AutocastMatmulBackward>();
  node->dtype = dtype;
  node->native = native;
  if (kernel.requires_grad()) node->x = x.detach();
  if (x.requires_grad()) node->w = w;
  return autograd::record(y, node, {x, kernel});
}

}  // namespace

Tensor autocast_matmul(const Tensor& x, const Tensor& kernel) {
  ops::check_floating("autocast_matmul", x);
  ops::check_floating("autocast_matmul", kernel);
  if (x.device().is_cuda() || kernel.device().is_cuda()) {
    // On a GPU the composition is the fused path: the cast is one cheap kernel, and cuBLASLt
    // multiplies the 16-bit operands natively with float32 accumulation.
    return matmul(x, cast(kernel, x.dtype()));
  }
  ops::check_cpu("autocast_matmul", x);
  ops::check_cpu("autocast_matmul", kernel);
  if (x.rank() < 2 || kernel.rank() != 2 || x.dim(-1) != kernel.dim(0)) {
    throw ShapeError("autocast_matmul: expected x (..., K) and a kernel (K, N), got x " +
                     ops::describe(x) + " and kernel " + ops::describe(kernel));
  }
  if (!is_16bit_float(x.dtype()) || kernel.dtype() != DType::float32) {
    return matmul(x, cast(kernel, x.dtype()));
  }
  if (x.rank() == 2) return fused_2d(x, kernel);
  // (B..., M, K): one product over the folded rows, like matmul does for a rank-2 kernel.
  std::vector<std::int64_t> out_dims(x.shape().begin(), x.shape().end());
  out_dims.back() = kernel.dim(1);
  const Tensor y = fused_2d(reshape(x, Shape{-1, x.dim(-1)}), kernel);
  return reshape(y, Shape(out_dims));
}

}  // namespace mixprec
