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

// One switch per chunk, then a tight loop the compiler can vectorise for the simple ops.
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
      [[fallthrough]];
    default:
      for (std::int64_t i = 0; i < n; ++i) out[i] = kernel_math::unary_value(op, x[i]);
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
          for (std::int64_t i = 0; i < n; ++i) {
            o[i] = kernel_math::unary_backward_value(op, gv[i], xv[i], yv[i], recompute);
          }
        });
  });
  return out;
}

}  // namespace mixprec::cpu
