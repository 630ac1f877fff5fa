#include "backend/cpu/unary.h"

#include <cmath>
#include <numbers>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/vector_math.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

// sqrt(2/pi) and the cubic coefficient of the tanh approximation of GELU.
constexpr double kGeluTanhScale = 0.7978845608028654;
constexpr double kGeluTanhCubic = 0.044715;

template <typename C>
C forward_value(UnaryOp op, C x) {
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::rsqrt: return C(1) / std::sqrt(x);
    case UnaryOp::abs: return std::abs(x);
    case UnaryOp::relu: return x > C(0) ? x : C(0);  // NaN -> 0 would hide bugs: keep NaN
    case UnaryOp::relu6: return std::isnan(x) ? x : std::min(std::max(x, C(0)), C(6));
    case UnaryOp::sigmoid:
      // Split by sign so exp never overflows: for x < 0, e^x / (1 + e^x).
      if (x >= C(0))
        return C(1) / (C(1) + std::exp(-x));
      else {
        const C e = std::exp(x);
        return e / (C(1) + e);
      }
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::gelu: return C(0.5) * x * (C(1) + std::erf(x * C(std::numbers::sqrt2 / 2)));
    case UnaryOp::gelu_tanh: {
      const C inner = C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x);
      return C(0.5) * x * (C(1) + std::tanh(inner));
    }
    case UnaryOp::silu: return x * forward_value(UnaryOp::sigmoid, x);
  }
  return x;
}

// d op(x) / dx, from x and the forward output y (whichever is cheaper and more accurate).
template <typename C>
C derivative(UnaryOp op, C x, C y) {
  switch (op) {
    case UnaryOp::neg: return C(-1);
    case UnaryOp::exp: return y;
    case UnaryOp::log: return C(1) / x;
    case UnaryOp::sqrt: return C(0.5) / y;
    case UnaryOp::rsqrt: return C(-0.5) * y / x;
    case UnaryOp::abs: return x > C(0) ? C(1) : (x < C(0) ? C(-1) : C(0));
    case UnaryOp::relu: return x > C(0) ? C(1) : C(0);
    case UnaryOp::relu6: return (x > C(0) && x < C(6)) ? C(1) : C(0);
    case UnaryOp::sigmoid: return y * (C(1) - y);
    case UnaryOp::tanh: return C(1) - y * y;
    case UnaryOp::gelu: {
      const C cdf = C(0.5) * (C(1) + std::erf(x * C(std::numbers::sqrt2 / 2)));
      const C pdf = std::exp(C(-0.5) * x * x) * C(0.3989422804014327);  // 1/sqrt(2 pi)
      return cdf + x * pdf;
    }
    case UnaryOp::gelu_tanh: {
      const C t = std::tanh(C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x));
      return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * C(kGeluTanhScale) *
                                       (C(1) + C(3 * kGeluTanhCubic) * x * x);
    }
    case UnaryOp::silu: {
      const C s = forward_value(UnaryOp::sigmoid, x);
      return s * (C(1) + x * (C(1) - s));
    }
  }
  return C(0);
}

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
      for (std::int64_t i = 0; i < n; ++i) out[i] = forward_value(op, x[i]);
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
          for (std::int64_t i = 0; i < n; ++i) {
            // A 16-bit y is rounded, and derivatives such as y (1 - y) and 1 - y^2 cancel near
            // saturation: recompute y in float from x.
            const C yi = core::is_half_v<T> ? forward_value(op, xv[i]) : yv[i];
            o[i] = gv[i] * derivative(op, xv[i], yi);
          }
        });
  });
  return out;
}

}  // namespace mixprec::cpu
