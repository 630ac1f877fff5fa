// Conversions between host scalars and storage types, for every dtype of the X-macro list.
#pragma once

#include <type_traits>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"

namespace mixprec::core {

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

// double -> T; 16-bit floats go through float (the value is rounded twice, which matters only for
// literals closer than 2^-29 relative to a rounding boundary).
template <typename T>
T from_double(double value) {
  if constexpr (is_half_v<T>) {
    return T(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, bool>) {
    return value != 0.0;
  } else {
    return static_cast<T>(value);
  }
}

template <typename T>
double to_double(T value) {
  if constexpr (is_half_v<T>) {
    return static_cast<double>(static_cast<float>(value));
  } else {
    return static_cast<double>(value);
  }
}

// T -> its compute type (float for 16/32-bit floats, double for float64).
template <typename C, typename T>
C load_as(T value) {
  if constexpr (is_half_v<T>) {
    return static_cast<C>(static_cast<float>(value));
  } else {
    return static_cast<C>(value);
  }
}

template <typename T, typename C>
T store_as(C value) {
  if constexpr (is_half_v<T>) {
    return T(static_cast<float>(value));
  } else {
    return static_cast<T>(value);
  }
}

}  // namespace mixprec::core
