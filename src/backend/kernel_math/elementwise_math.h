// The per-element bodies of the elementwise kernels, written once for the CPU loops
// (backend/cpu/unary.cpp, binary.cpp) and the CUDA kernels (backend/cuda/kernels/elementwise.cu):
// each activation's value and derivative, and each binary op's value, in the compute type C
// (float for 32/16-bit storage, double for float64). CPU tests exercise them directly
// (tests/unit/elementwise_math_test.cpp).
#pragma once

#include <cmath>

#include "backend/kernel_math/host_device.h"
#include "core/op_kinds.h"

namespace mixprec::kernel_math {

// The scalar functions, float and double: the CUDA math library on the device, <cmath> on the
// host.
#if defined(__CUDA_ARCH__)
#define MIXPREC_KM_FN(name, dev_f, dev_d)                               \
  __device__ __forceinline__ float name(float x) { return ::dev_f(x); } \
  __device__ __forceinline__ double name(double x) { return ::dev_d(x); }
#define MIXPREC_KM_FN2(name, dev_f, dev_d)                                          \
  __device__ __forceinline__ float name(float x, float y) { return ::dev_f(x, y); } \
  __device__ __forceinline__ double name(double x, double y) { return ::dev_d(x, y); }
#else
#define MIXPREC_KM_FN(name, dev_f, dev_d)              \
  inline float name(float x) { return std::dev_d(x); } \
  inline double name(double x) { return std::dev_d(x); }
#define MIXPREC_KM_FN2(name, dev_f, dev_d)                         \
  inline float name(float x, float y) { return std::dev_d(x, y); } \
  inline double name(double x, double y) { return std::dev_d(x, y); }
#endif
MIXPREC_KM_FN(exp_, expf, exp)
MIXPREC_KM_FN(log_, logf, log)
MIXPREC_KM_FN(sqrt_, sqrtf, sqrt)
MIXPREC_KM_FN(tanh_, tanhf, tanh)
MIXPREC_KM_FN(erf_, erff, erf)
MIXPREC_KM_FN(fabs_, fabsf, fabs)
MIXPREC_KM_FN(trunc_, truncf, trunc)
MIXPREC_KM_FN2(pow_, powf, pow)
#undef MIXPREC_KM_FN
#undef MIXPREC_KM_FN2

// sqrt(2/pi) and the cubic coefficient of the tanh approximation of GELU; 1/sqrt(2); 1/sqrt(2 pi).
inline constexpr double kGeluTanhScale = 0.7978845608028654;
inline constexpr double kGeluTanhCubic = 0.044715;
inline constexpr double kSqrtHalf = 0.70710678118654752440;
inline constexpr double kInvSqrt2Pi = 0.3989422804014327;

template <typename C>
MIXPREC_HOST_DEVICE inline C sigmoid_value(C x) {
  // Split by sign so exp never overflows: for x < 0, e^x / (1 + e^x).
  if (x >= C(0)) return C(1) / (C(1) + exp_(-x));
  const C e = exp_(x);
  return e / (C(1) + e);
}

// y = op(x). NaN stays NaN through relu and relu6 (mapping it to 0 would hide bugs).
template <typename C>
MIXPREC_HOST_DEVICE inline C unary_value(UnaryOp op, C x) {
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return exp_(x);
    case UnaryOp::log: return log_(x);
    case UnaryOp::sqrt: return sqrt_(x);
    case UnaryOp::rsqrt: return C(1) / sqrt_(x);  // IEEE division (CUDA's rsqrtf is 2 ulp)
    case UnaryOp::abs: return fabs_(x);
    case UnaryOp::relu: return x > C(0) ? x : (x != x ? x : C(0));
    case UnaryOp::relu6: return x != x ? x : (x < C(0) ? C(0) : (x > C(6) ? C(6) : x));
    case UnaryOp::sigmoid: return sigmoid_value(x);
    case UnaryOp::tanh: return tanh_(x);
    case UnaryOp::gelu: return C(0.5) * x * (C(1) + erf_(x * C(kSqrtHalf)));
    case UnaryOp::gelu_tanh: {
      const C inner = C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x);
      return C(0.5) * x * (C(1) + tanh_(inner));
    }
    case UnaryOp::silu: return x * sigmoid_value(x);
  }
  return x;
}

// d op(x) / dx, from x and the forward output y (whichever is cheaper and more accurate).
template <typename C>
MIXPREC_HOST_DEVICE inline C unary_derivative(UnaryOp op, C x, C y) {
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
      const C cdf = C(0.5) * (C(1) + erf_(x * C(kSqrtHalf)));
      const C pdf = exp_(C(-0.5) * x * x) * C(kInvSqrt2Pi);
      return cdf + x * pdf;
    }
    case UnaryOp::gelu_tanh: {
      const C t = tanh_(C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x));
      return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * C(kGeluTanhScale) *
                                       (C(1) + C(3 * kGeluTanhCubic) * x * x);
    }
    case UnaryOp::silu: {
      const C s = sigmoid_value(x);
      return s * (C(1) + x * (C(1) - s));
    }
  }
  return C(0);
}

// dx = g * op'(x). A 16-bit y is rounded, and derivatives such as y (1 - y) and 1 - y^2 cancel
// near saturation: with RecomputeForward the forward is recomputed in C from x instead.
enum class RecomputeForward { no, yes };
template <typename C>
MIXPREC_HOST_DEVICE inline C unary_backward_value(UnaryOp op, C g, C x, C y,
                                                  RecomputeForward recompute) {
  const C yy = recompute == RecomputeForward::yes ? unary_value(op, x) : y;
  return g * unary_derivative(op, x, yy);
}

// a (op) b. maximum/minimum propagate NaN (a comparison with NaN is false: pick the NaN) and
// return a on ties.
template <typename C>
MIXPREC_HOST_DEVICE inline C binary_value(BinaryOp op, C a, C b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::pow: return pow_(a, b);
    case BinaryOp::maximum: return (a >= b || a != a) ? a : b;
    case BinaryOp::minimum: return (a <= b || a != a) ? a : b;
  }
  return a;
}

}  // namespace mixprec::kernel_math
