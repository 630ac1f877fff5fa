// Elementwise float math (exp, log, sigmoid and the vectorised activation loops) written so that
// the compiler vectorises it (glibc's expf is a scalar call that keeps exp-heavy kernels far below
// memory bandwidth).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/op_kinds.h"

namespace mixprec::cpu {

// exp(hi + lo) for a correction |lo| far below 1 that the float sum hi + lo would lose: hi is
// reduced as in exp_float and lo joins the reduced argument (exp(-x^2 / 2) below without the
// rounding of x^2). NaN in hi stays NaN.
inline float exp_float_parts(float hi, float lo) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;     // 8 significant bits: k * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;  // ln2 - kLn2Hi
  const bool is_nan = hi != hi;
  float v = is_nan ? 0.0f : hi;
  v = v < -104.0f ? -104.0f : (v > 89.0f ? 89.0f : v);  // beyond these exp is 0 or inf anyway
  // Round to nearest by adding and subtracting 1.5 * 2^23 (vectorises, unlike nearbyint).
  constexpr float kRound = 12582912.0f;
  const float k = (v * kLog2e + kRound) - kRound;
  const float r = ((v - k * kLn2Hi) - k * kLn2Lo) + lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^k = 2^k1 * 2^k2 with both halves in the normal exponent range (k in [-150, 129]).
  const auto ki = static_cast<std::int32_t>(k);
  const std::int32_t k1 = ki / 2, k2 = ki - k1;
  const float s1 = std::bit_cast<float>(static_cast<std::uint32_t>(k1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<std::uint32_t>(k2 + 127) << 23);
  const float result = p * s1 * s2;
  return is_nan ? hi : result;
}

// exp(x) for float, within 2 ulp of the correctly rounded value over the whole range: x = k ln2 + r
// with k = round(x / ln2) and r reduced in two steps (Cody-Waite, ln2 split into an exactly
// representable high part and a correction), exp(r) for |r| <= ln2/2 by its degree-7 Taylor
// polynomial (truncation error < 3e-9 relative), then scaled by 2^k as two exact power-of-two
// factors so results down to the subnormals round once. Overflow gives inf, underflow 0, NaN stays.
inline float exp_float(float x) { return exp_float_parts(x, 0.0f); }

// sigmoid(x) from one exp_float of -|x| (never overflows): 1 / (1 + e) for x >= 0, e / (1 + e)
// below, each within a few ulp. NaN stays NaN.
inline float sigmoid_float(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float e = exp_float(-ax);
  const float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : (x != x ? x : e * s);
}

// log(x) for float, within 1 ulp (tests/ops/unary_accuracy_test.cpp): x = 2^k m with
// m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^23 first), log(m) = 2 atanh(s) with
// s = f / (2 + f), f = m - 1, written as f - f^2/2 + s (f^2/2 + s^2 P(s^2)) (P the atanh series to
// s^12, |s| < 0.172: truncation below 1e-11), plus k ln2 in two parts. log(+-0) = -inf,
// log(x < 0) = NaN, log(inf) = inf, NaN stays NaN.
inline float log_float(float x) {
  const bool tiny = x < 0x1p-126f;
  const float xs = tiny ? x * 0x1p23f : x;
  constexpr std::uint32_t kSqrtHalf = 0x3f3504f3u;  // sqrt(1/2)
  const std::uint32_t shifted = std::bit_cast<std::uint32_t>(xs) - kSqrtHalf;
  const std::int32_t e = static_cast<std::int32_t>(shifted) >> 23;
  const float m = std::bit_cast<float>((shifted & 0x007fffffu) + kSqrtHalf);
  const float k = static_cast<float>(e - (tiny ? 23 : 0));
  const float f = m - 1.0f;
  const float s = f / (2.0f + f);
  const float z = s * s;
  float p = 2.0f / 13.0f;
  p = p * z + 2.0f / 11.0f;
  p = p * z + 2.0f / 9.0f;
  p = p * z + 2.0f / 7.0f;
  p = p * z + 2.0f / 5.0f;
  p = p * z + 2.0f / 3.0f;
  const float hf = 0.5f * f * f;
  const float log_m = f - (hf - s * (hf + z * p));
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  const float r = k * kLn2Hi + (log_m + k * kLn2Lo);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float nonpositive = x == 0.0f ? -kInf : std::numeric_limits<float>::quiet_NaN();
  return x > 0.0f ? (x == kInf ? kInf : r) : (x != x ? x : nonpositive);
}

// out[i] = log_float(x[i]), in the widest vectors the CPU has.
void log_floats(float* out, const float* x, std::int64_t n);

// out[i] = exp_float(x[i]), in the widest vectors the CPU has.
void exp_floats(float* out, const float* x, std::int64_t n);

// out[i] = op(x[i]) in float32, one vectorised loop per op, for the activations that have one
// here (relu, relu6, sigmoid, silu, tanh, gelu, gelu(tanh)); returns false (and writes nothing)
// for the other ops.
bool activation_floats(UnaryOp op, float* out, const float* x, std::int64_t n);

// o[i] = g[i] * op'(x[i]) for the same ops and exp (false for the others). y is the forward output;
// recompute = true ignores it and recomputes the forward from x (y rounded to 16 bits).
bool activation_backward_floats(UnaryOp op, float* o, const float* g, const float* x,
                                const float* y, std::int64_t n, bool recompute);

}  // namespace mixprec::cpu
