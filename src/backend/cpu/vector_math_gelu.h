// tanh and the standard normal distribution (Phi and exp(-x^2 / 2)) in float, for the tanh and
// GELU activation loops: branch-free bodies on exp_float (vector_math.h) and polynomials, so that
// the compiler vectorises them (glibc's tanhf and erff are scalar calls). The polynomial
// coefficients are near-minimax fits (Chebyshev interpolation of the exact functions at 40
// digits); the error bounds stated here are those the accuracy tests assert
// (tests/ops/unary_accuracy_test.cpp).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#include "backend/cpu/vector_math.h"

namespace mixprec::cpu {

// |x| without a libm call.
inline float abs_float(float x) {
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) & 0x7fffffffu);
}

// tanh(x): x + x^3 P(x^2) for |x| < 0.55 (fit error below 4e-10 relative), else
// sign(x) (1 - 2 / (exp(2|x|) + 1)), which is >= 0.5 there, so nothing cancels. +-0 and
// subnormals give x, +-inf gives +-1, NaN stays NaN.
inline float tanh_float(float x) {
  const float a = abs_float(x);
  const float s = x * x;
  float p = 2.526390711e-03f;
  p = p * s - 8.526333058e-03f;
  p = p * s + 2.181844913e-02f;
  p = p * s - 5.396470045e-02f;
  p = p * s + 1.333332420e-01f;
  p = p * s - 3.333333330e-01f;
  const float small = a + a * s * p;  // on |x|, so that -0 keeps its sign with the others
  const float e = exp_float(2.0f * a);
  const float big = 1.0f - 2.0f / (e + 1.0f);
  const float magnitude = a < 0.55f ? small : big;
  const std::uint32_t sign = std::bit_cast<std::uint32_t>(x) & 0x80000000u;
  const float signed_result = std::bit_cast<float>(std::bit_cast<std::uint32_t>(magnitude) | sign);
  return x != x ? x : signed_result;
}

// tanh'(x) = 1 - tanh(x)^2 = 4 e / (1 + e)^2 with e = exp(-2|x|): a few ulp everywhere, also where
// tanh saturates and 1 - tanh^2 would cancel (0 for +-inf, NaN stays NaN).
inline float tanh_derivative_float(float x) {
  const float e = exp_float(-2.0f * abs_float(x));
  const float d = 1.0f + e;
  return 4.0f * e / (d * d);
}

// exp(-x^2 / 2) within a few ulp: x^2 is split exactly (the high half of x has 12 significant
// bits, so its square is exact), the remainder goes to exp_float_parts; 0 from |x| >= 14.5 on
// (below half the smallest subnormal) and for +-inf; NaN stays NaN.
inline float half_square_exp(float x) {
  const float a = abs_float(x);
  const float ac = a < 14.5f ? a : 14.5f;
  const float hi = std::bit_cast<float>(std::bit_cast<std::uint32_t>(ac) & 0xfffff000u);
  const float lo = ac - hi;
  const float e = exp_float_parts(-0.5f * hi * hi, -0.5f * lo * (ac + hi));
  return x != x ? x : (a < 14.5f ? e : 0.0f);
}

// Phi(x), the standard normal distribution function, given e = half_square_exp(x):
// 1/2 + x H(x^2) for |x| < 0.75 (fit error below 1e-11); beyond, the tail
// Phi(-|x|) = e w G(w) with w = 1 / (1 + |x|) and G a degree-11 polynomial in w (fit error below
// 2e-9 relative), and Phi(x) = 1 - Phi(-x) for x > 0. The tail keeps its relative accuracy down to
// the subnormals (no 1 + erf cancellation). Phi(-inf) = 0, Phi(inf) = 1, NaN stays NaN.
inline float normal_cdf_float(float x, float e) {
  const float s = x * x;
  float h = -8.390892710e-06f;
  h = h * s + 1.147818735e-04f;
  h = h * s - 1.187139703e-03f;
  h = h * s + 9.973532287e-03f;
  h = h * s - 6.649037888e-02f;
  h = h * s + 3.989422804e-01f;
  const float small = 0.5f + x * h;
  const float a = abs_float(x);
  const float w = 1.0f / (1.0f + a);
  const float v = w - 3.190476190e-01f;  // the middle of w's range [1/15, 1/1.75]
  float g = -3.019416581e+01f;
  g = g * v + 8.272423257e+00f;
  g = g * v + 8.512730601e+00f;
  g = g * v - 6.180175943e+00f;
  g = g * v + 1.553059418e+00f;
  g = g * v + 7.802080774e-01f;
  g = g * v - 1.206494784e+00f;
  g = g * v + 6.002730965e-01f;
  g = g * v + 1.393672628e-01f;
  g = g * v - 4.525272072e-01f;
  g = g * v + 1.938528138e-01f;
  g = g * v + 5.016285984e-01f;
  const float tail = e * (w * g);
  const float large = x < 0.0f ? tail : 1.0f - tail;
  return a < 0.75f ? small : large;
}

// 1 / sqrt(2 pi): the standard normal density is kInvSqrt2PiF * half_square_exp(x).
inline constexpr float kInvSqrt2PiF = 0.398942280401432678f;
// GELU's tanh approximation: tanh(u) with u = kGeluScaleF * x * (1 + kGeluCubicF * x^2).
inline constexpr float kGeluScaleF = 0.797884560802865355f;  // sqrt(2 / pi)
inline constexpr float kGeluCubicF = 0.044715f;

// gelu_tanh(x) = x (1 + tanh(u)) / 2 = x sigmoid(2u): no cancellation for negative x. -inf gives
// NaN (-inf * 0, as the double formula), +inf gives +inf.
inline float gelu_tanh_float(float x) {
  const float two_u = 2.0f * kGeluScaleF * x * (1.0f + kGeluCubicF * x * x);
  return x * sigmoid_float(two_u);
}

// gelu_tanh'(x) = s + 2 x s (1 - s) u'(x) with s = sigmoid(2u), u' = kGeluScaleF (1 + 3 kGeluCubicF
// x^2); x is clamped to +-20 (beyond, s is exactly 0 or 1 in float) so that 0 * inf cannot appear
// for large finite x; +-inf gives NaN as the double formula does (0 * inf there).
inline float gelu_tanh_derivative_float(float x) {
  const float xc = x < -20.0f ? -20.0f : (x > 20.0f ? 20.0f : x);
  const float s = sigmoid_float(2.0f * kGeluScaleF * xc * (1.0f + kGeluCubicF * xc * xc));
  const float du = kGeluScaleF * (1.0f + 3.0f * kGeluCubicF * xc * xc);
  const float d = s + 2.0f * xc * (s * (1.0f - s)) * du;
  return abs_float(x) == std::numeric_limits<float>::infinity()
             ? std::numeric_limits<float>::quiet_NaN()
             : d;
}

}  // namespace mixprec::cpu
