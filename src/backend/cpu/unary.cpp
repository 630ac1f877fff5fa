// CPU unary ops: the per-element bodies of backend/kernel_math/elementwise_math.h (shared with
// the CUDA kernels) in chunked loops, with vectorised loops for the simplest ops.
#include "backend/cpu/unary.h"

#include "backend/cpu/elementwise.h"
#include "backend/cpu/vector_math.h"
#include "backend/kernel_math/elementwise_math.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

// One switch per chunk, then a loop with the op a constant (vectorised by hand or by the compiler
// for the simplest ops).
template <typename C>
void forward_chunk(UnaryOp op, C* out, const C* x, std::int64_t n) {
  switch (op) {
    case UnaryOp::neg:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) out[i] = -x[i];
      return;
    case UnaryOp::relu:
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i)
        out[i] = x[i] > C(0) ? x[i] : (x[i] != x[i] ? x[i] : C(0));
      return;
    case UnaryOp::exp:
      if constexpr (std::is_same_v<C, float>) {
        exp_floats(out, x, n);
        return;
      }
      break;
    default: break;
  }
  switch (op) {
#define MIXPREC_UNARY_CASE(name, text)                        \
  case UnaryOp::name:                                         \
    for (std::int64_t i = 0; i < n; ++i) {                    \
      out[i] = kernel_math::unary_value(UnaryOp::name, x[i]); \
    }                                                         \
    return;
    MIXPREC_FOR_EACH_UNARY_OP(MIXPREC_UNARY_CASE)
#undef MIXPREC_UNARY_CASE
  }
}

// dx = g * op'(x) over one chunk, with the op a constant: the shared body specialises to one
// expression per op (relu's derivative ignores y, so its recomputation is dropped), which the
// compiler can vectorise, rather than a switch per element.
template <UnaryOp Op, typename C>
void backward_loop(C* o, const C* g, const C* x, const C* y, std::int64_t n,
                   kernel_math::RecomputeForward recompute) {
  for (std::int64_t i = 0; i < n; ++i) {
    o[i] = kernel_math::unary_backward_value(Op, g[i], x[i], y[i], recompute);
  }
}

template <typename C>
void backward_chunk(UnaryOp op, C* o, const C* g, const C* x, const C* y, std::int64_t n,
                    kernel_math::RecomputeForward recompute) {
  switch (op) {
#define MIXPREC_UNARY_CASE(name, text) \
  case UnaryOp::name: return backward_loop<UnaryOp::name>(o, g, x, y, n, recompute);
    MIXPREC_FOR_EACH_UNARY_OP(MIXPREC_UNARY_CASE)
#undef MIXPREC_UNARY_CASE
  }
}

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x) {
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  core::dispatch_floating(x.dtype(), "unary op", [&]<typename T>() {
    using C = core::compute_t<T>;
    map_elementwise<C, T, T>(
        {&x}, out, [op](C* o, const C* v, std::int64_t n) { forward_chunk(op, o, v, n); });
  });
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y) {
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  core::dispatch_floating(x.dtype(), "unary op backward", [&]<typename T>() {
    using C = core::compute_t<T>;
    map_elementwise<C, T, T, T, T>(
        {&g, &x, &y}, out, [op](C* o, const C* gv, const C* xv, const C* yv, std::int64_t n) {
          // A 16-bit y is rounded: recompute it in float from x (kernel_math).
          constexpr auto recompute = core::is_half_v<T> ? kernel_math::RecomputeForward::yes
                                                        : kernel_math::RecomputeForward::no;
          backward_chunk(op, o, gv, xv, yv, n, recompute);
        });
  });
  return out;
}

}  // namespace mixprec::cpu
