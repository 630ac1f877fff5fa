// CPU unary ops: the per-element bodies of backend/kernel_math/elementwise_math.h (shared with
// the CUDA kernels) in chunked loops, with vectorised float loops (backend/cpu/vector_math) for
// exp, log and the activations relu, relu6, sigmoid, silu, tanh, gelu and gelu(tanh), forward and
// backward, and relu/relu6 on 16-bit storage without widening (unary_half.cpp). The other ops
// (neg, abs, sqrt, rsqrt and log's derivative; exp's derivative is vectorised) are one plain loop
// per op that the compiler vectorises (-fno-math-errno makes sqrt an instruction).
#include "backend/cpu/unary.h"

#include <type_traits>

#include "backend/cpu/contiguous_map.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/unary_half.h"
#include "backend/cpu/vector_math.h"
#include "backend/kernel_math/elementwise_math.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

// One switch per chunk, then a loop with the op a constant: float32 activations in the vectorised
// loops of vector_math (also for 16-bit storage, whose chunks arrive here as float), the other
// ops through the shared per-element body, which the compiler vectorises for the simplest ones.
template <typename C>
void forward_chunk(UnaryOp op, C* out, const C* x, std::int64_t n) {
  if (op == UnaryOp::neg) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) out[i] = -x[i];
    return;
  }
  if constexpr (std::is_same_v<C, float>) {
    if (op == UnaryOp::exp) return exp_floats(out, x, n);
    if (op == UnaryOp::log) return log_floats(out, x, n);
    if (activation_floats(op, out, x, n)) return;
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
  if constexpr (std::is_same_v<C, float>) {
    const bool again = recompute == kernel_math::RecomputeForward::yes;
    if (activation_backward_floats(op, o, g, x, y, n, again)) return;
  }
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
  if (unary_half(op, x, out)) return out;  // relu/relu6 on 16-bit storage, exact without widening
  core::dispatch_floating(x.dtype(), "unary op", [&]<typename T>() {
    using C = core::compute_t<T>;
    const auto body = [op](C* o, const C* v, std::int64_t n) { forward_chunk(op, o, v, n); };
    if (x.is_contiguous()) {
      map_contiguous<T, 1>({x.data<T>()}, out.data<T>(), x.numel(), body);
    } else {
      map_elementwise<C, T, T>({&x}, out, body);
    }
  });
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y) {
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  if (unary_backward_half(op, g, y, out)) return out;
  core::dispatch_floating(x.dtype(), "unary op backward", [&]<typename T>() {
    using C = core::compute_t<T>;
    // A 16-bit y is rounded: recompute it in float from x (kernel_math).
    constexpr auto recompute =
        core::is_half_v<T> ? kernel_math::RecomputeForward::yes : kernel_math::RecomputeForward::no;
    const auto body = [op](C* o, const C* gv, const C* xv, const C* yv, std::int64_t n) {
      backward_chunk(op, o, gv, xv, yv, n, recompute);
    };
    if (g.is_contiguous() && x.is_contiguous() && y.is_contiguous()) {
      map_contiguous<T, 3>({g.data<T>(), x.data<T>(), y.data<T>()}, out.data<T>(), x.numel(), body);
    } else {
      map_elementwise<C, T, T, T, T>({&g, &x, &y}, out, body);
    }
  });
  return out;
}

}  // namespace mixprec::cpu
