// Broadcasting binary arithmetic: forward through the operands' backend (TensorKernels::binary),
// backward composed of ops and reduced back to each operand's shape with sum_to.
#include <cmath>
#include <utility>

#include "autograd/node.h"
#include "backend/backend.h"
#include "backend/channel_geometry.h"
#include "backend/nn_kernels.h"
#include "backend/tensor_kernels.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec {

namespace {

struct BinaryBackward final : autograd::Node {
  BinaryOp op;
  Tensor a, b, out;  // saved only where the gradient formula needs them
  Shape a_shape, b_shape;

  std::vector<Tensor> backward(const Tensor& g) override {
    if (op == BinaryOp::mul)
      return {product_gradient(g, b, a_shape), product_gradient(g, a, b_shape)};
    // div's and pow's gradients take several ops; for 16-bit dtypes they run in float32 and are
    // rounded once at the end (each 16-bit step would round, and pow's b - 1 feeds an exponent).
    const DType dtype = g.dtype();
    const bool widen = is_16bit_float(dtype) && (op == BinaryOp::div || op == BinaryOp::pow);
    const auto up = [&](const Tensor& t) {
      return widen && t.defined() ? cast(t, DType::float32) : t;
    };
    const auto down = [&](const Tensor& t) { return widen ? cast(t, dtype) : t; };
    // pow's saved 16-bit output is rounded: recompute it in float32.
    const Tensor out_c = widen && op == BinaryOp::pow ? pow(up(a), up(b)) : out;
    auto [ga, gb] = gradients(up(g), up(a), up(b), out_c);
    return {down(sum_to(ga, a_shape)), down(sum_to(gb, b_shape))};
  }

  // d own for out = own * other: g * other summed back to own's shape. A per-channel own (the
  // squeeze-and-excitation gate) takes the device's one-pass kernel where it has one, without
  // materialising g * other.
  static Tensor product_gradient(const Tensor& g, const Tensor& other, const Shape& own_shape) {
    if (own_shape == g.shape()) return mul(g, other);
    const NnKernels& nn = *backend_for(g.device()).nn;
    if (nn.channel_gate_backward != nullptr && other.shape() == g.shape() &&
        other.dtype() == g.dtype() && g.is_contiguous() && other.is_contiguous() &&
        channel_geometry(g.shape(), own_shape)) {
      return nn.channel_gate_backward(g, other, own_shape);
    }
    // A 16-bit reduction of products: the products and their sum in float32, rounded once
    // (DESIGN §2), not each product rounded to 16 bits before the sum.
    if (is_16bit_float(g.dtype())) {
      return cast(sum_to(mul(cast(g, DType::float32), cast(other, DType::float32)), own_shape),
                  g.dtype());
    }
    return sum_to(mul(g, other), own_shape);
  }

  std::pair<Tensor, Tensor> gradients(const Tensor& g, const Tensor& a, const Tensor& b,
                                      const Tensor& out) const {
    Tensor ga, gb;
    switch (op) {
      case BinaryOp::add: ga = g, gb = g; break;
      case BinaryOp::sub: ga = g, gb = neg(g); break;
      case BinaryOp::mul: ga = mul(g, b), gb = mul(g, a); break;
      case BinaryOp::div:
        ga = div(g, b);
        gb = neg(mul(ga, div(a, b)));  // -g * a / b^2
        break;
      case BinaryOp::pow: {
        // d/da = b * a^(b-1); d/db = a^b * log(a), taken as 0 where a <= 0 (log undefined there).
        ga = mul(g, mul(b, pow(a, sub(b, ones_like(b)))));
        const Tensor zero = zeros_like(a);
        const Tensor safe_log =
            where(greater(a, zero), log(where(greater(a, zero), a, ones_like(a))), zero);
        gb = mul(g, mul(out, safe_log));
        break;
      }
      case BinaryOp::maximum:
      case BinaryOp::minimum: {
        // The gradient goes to the selected operand; to a on ties (as the forward picks a).
        const Tensor pick_a = op == BinaryOp::maximum ? greater_equal(a, b) : less_equal(a, b);
        const Tensor zero = zeros_like(g);
        ga = where(pick_a, g, zero);
        gb = where(pick_a, zero, g);
        break;
      }
    }
    return {ga, gb};
  }
  std::string name() const override { return std::string(op_name(op)) + "Backward"; }
  void release_saved() override { a = b = out = Tensor(); }
};

Tensor binary_op(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  ops::check_same_dtype_device(name, a, b);
  ops::check_floating(name, a);
  broadcast_shapes(a.shape(), b.shape(), name);  // throws naming this op and both shapes
  Tensor out = backend_for(a.device()).tensor->binary(op, a, b);
  if (!autograd::needs_record({&a, &b})) return out;
  auto node = std::make_shared<BinaryBackward>();
  node->op = op;
  node->a_shape = a.shape();
  node->b_shape = b.shape();
  const bool saves_operands = op != BinaryOp::add && op != BinaryOp::sub;
  if (saves_operands) node->a = a.detach(), node->b = b.detach();
  if (op == BinaryOp::pow) node->out = out.detach();
  return autograd::record(out, node, {a, b});
}

Tensor scalar_like(const Tensor& t, double value) {
  ops::check_defined("scalar operand", t);
  return scalar(value, {.dtype = t.dtype(), .device = t.device()});
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary_op(BinaryOp::minimum, a, b); }
Tensor pow(const Tensor& a, double exponent) { return pow(a, scalar_like(a, exponent)); }
Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(b, a), b); }
Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace mixprec
