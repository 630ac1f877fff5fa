// The per-element body of a cast from a floating value to an integer dtype, written once for the
// CPU cast loop (backend/cpu/cast.cpp) and the CUDA cast kernel (backend/cuda/kernels/cast.cu):
// truncate toward zero, NaN -> 0, out-of-range values saturate (a bare conversion of an
// out-of-range value is undefined behaviour). 16-bit float targets round through float on both
// devices (core::store_as; CUDA's __float2half_rn/__float2bfloat16_rn round the same way).
#pragma once

#include <limits>

#include "backend/kernel_math/elementwise_math.h"
#include "backend/kernel_math/host_device.h"

namespace mixprec::kernel_math {

template <typename C>
MIXPREC_HOST_DEVICE constexpr C power_of_two(int k) {
  C r = C(1);
  for (int i = 0; i < k; ++i) r *= C(2);
  return r;
}

// The values of C a saturating conversion to Out clamps to: lo = Out's minimum, hi = the largest C
// not above Out's maximum (int64's maximum rounds up to 2^63 in double, itself out of range, so
// hi is 2^63 - 1024 there; int32's in float is 2^31 - 128).
template <typename Out, typename C>
struct SaturationRange {
  C lo, hi;
};

template <typename Out, typename C>
MIXPREC_HOST_DEVICE constexpr SaturationRange<Out, C> saturation_range() {
  constexpr int out_digits = std::numeric_limits<Out>::digits;  // 31, 63, 8 (value bits)
  constexpr int c_digits = std::numeric_limits<C>::digits;      // 24, 53 (significand bits)
  const C lo = std::numeric_limits<Out>::is_signed ? -power_of_two<C>(out_digits) : C(0);
  const C top = power_of_two<C>(out_digits);  // Out's maximum + 1
  const C hi = out_digits <= c_digits ? top - C(1) : top - power_of_two<C>(out_digits - c_digits);
  return {lo, hi};
}

// v as Out (an integer type other than bool): truncated toward zero, NaN -> 0, saturated.
template <typename Out, typename C>
MIXPREC_HOST_DEVICE inline Out saturating_cast(C v) {
  constexpr SaturationRange<Out, C> range = saturation_range<Out, C>();
  const C t = trunc_(v);
  if (t != t) return Out(0);
  return static_cast<Out>(t <= range.lo ? range.lo : (t >= range.hi ? range.hi : t));
}

}  // namespace mixprec::kernel_math
