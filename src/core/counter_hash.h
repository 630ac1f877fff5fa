// Counter-based random bits for masks (Dropout): element i of a call is decided by a stateless hash
// of (base, i), so any thread, on any device, decides any element alone. The same base gives the
// same mask on the CPU and on CUDA, bit for bit, for every thread count and launch geometry.
//
// h(base, i) is the output function of splitmix64 applied to base + (i + 1) * golden gamma, i.e.
// the (i + 1)-th output of a splitmix64 stream started at `base`. Element i is kept when its top 53
// bits, read as the integer k = h >> 11, satisfy k >= threshold with threshold = ceil(rate * 2^53):
// exactly the rule "k * 2^-53 >= rate" of a uniform double in [0, 1) (Generator::uniform), in
// integers. Usable from .cpp and .cu files (host and device functions under nvcc).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MIXPREC_COUNTER_HASH_HD __host__ __device__ __forceinline__
#else
#define MIXPREC_COUNTER_HASH_HD inline
#endif

namespace mixprec::core {

// splitmix64's increment (2^64 / golden ratio, odd) and its two finaliser multipliers.
inline constexpr std::uint64_t kCounterHashGamma = 0x9E3779B97F4A7C15ull;
inline constexpr std::uint64_t kCounterHashMul1 = 0xBF58476D1CE4E5B9ull;
inline constexpr std::uint64_t kCounterHashMul2 = 0x94D049BB133111EBull;

// 64 well-mixed bits for element `index` of the call keyed by `base` (all arithmetic mod 2^64).
MIXPREC_COUNTER_HASH_HD std::uint64_t counter_hash(std::uint64_t base, std::uint64_t index) {
  std::uint64_t z = base + (index + 1) * kCounterHashGamma;
  z = (z ^ (z >> 30)) * kCounterHashMul1;
  z = (z ^ (z >> 27)) * kCounterHashMul2;
  return z ^ (z >> 31);
}

// True when element `index` is kept: its 53-bit draw k = h >> 11 is >= threshold.
MIXPREC_COUNTER_HASH_HD bool counter_keeps(std::uint64_t base, std::uint64_t index,
                                           std::uint64_t threshold) {
  return (counter_hash(base, index) >> 11) >= threshold;
}

#undef MIXPREC_COUNTER_HASH_HD

// The threshold of a drop rate in [0, 1): the smallest integer k with k * 2^-53 >= rate, i.e.
// ceil(rate * 2^53). rate * 2^53 is exact in double (a power-of-two scaling of a value below 1,
// which stays below 2^53, so ceil of it is exact too); rate 0 gives 0 (everything kept) and the
// result is at most 2^53, so the keep probability is 1 - threshold * 2^-53 = 1 - rate up to the
// 2^-53 grid, as for `uniform() >= rate`. Host only (callers validate rate first).
inline std::uint64_t keep_threshold(double rate) {
  return static_cast<std::uint64_t>(std::ceil(rate * 0x1p53));
}

}  // namespace mixprec::core
