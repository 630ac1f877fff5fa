// Checks shared by LayerNormalization and RMSNormalization (trailing-axis normalization layers).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "mixprec/dtype.h"
#include "mixprec/error.h"
#include "mixprec/layers/keras_tensor.h"

namespace mixprec::layers::detail {

// epsilon > 0 and finite.
inline void check_norm_epsilon(const std::string& layer, const char* cls, double epsilon) {
  if (!(epsilon > 0.0) || epsilon == std::numeric_limits<double>::infinity()) {
    throw ValueError(layer + ": " + cls + " epsilon must be a positive finite number, got " +
                     std::to_string(epsilon));
  }
}

// Input (batch, ..., C) with a known C, normalized over `axis` = -1 or rank - 1; `features` the
// built feature count (or -1 before the build).
inline void check_norm_input(const std::string& layer, const char* cls, int axis,
                             const PartialShape& s, std::int64_t features) {
  const int rank = static_cast<int>(s.size());
  if (rank < 2) {
    throw ShapeError(layer + ": " + cls + " expects an input (batch, ..., features), got shape " +
                     partial_shape_to_string(s) + "; add a batch axis");
  }
  if (axis != -1 && axis != rank - 1) {
    throw ValueError(layer + ": " + cls +
                     " supports only trailing-axis normalization (axis = -1 or " +
                     std::to_string(rank - 1) + " here), got axis = " + std::to_string(axis) +
                     "; move the normalized axis last (e.g. with Permute/transpose)");
  }
  if (s.back() < 0) {
    throw ShapeError(layer + ": " + cls + " needs a known last axis (the features), got shape " +
                     partial_shape_to_string(s));
  }
  if (features >= 0 && s.back() != features) {
    throw ShapeError(layer + ": expected an input with " + std::to_string(features) +
                     " features (last axis), got shape " + partial_shape_to_string(s) +
                     "; the layer was built on its first call, so feed it the same feature size "
                     "or use a new layer");
  }
}

inline void check_norm_floating(const std::string& layer, const char* cls, DType dtype) {
  if (!is_floating(dtype)) {
    throw DTypeError(layer + ": " + cls + " needs a floating input, got " +
                     std::string(dtype_name(dtype)) +
                     "; convert it first, e.g. x.to(mp::kFloat32)");
  }
}

// The parameters' dtype: float32 under every 16-bit variable dtype (DESIGN §2.3's float32
// island, as BatchNormalization), else the variable dtype (float32, float64).
inline DType norm_param_dtype(DType variable) {
  return variable == DType::float16 || variable == DType::bfloat16 ? DType::float32 : variable;
}

}  // namespace mixprec::layers::detail
