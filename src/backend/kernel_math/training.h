// The per-element bodies of training, written once for the host and the device: the optimizer
// updates (SGD, momentum, Nesterov, Adam/AdamW, RMSprop with momentum and/or centering), the
// gradient transform of clipping, the non-finite test of unscale-and-check and the loss-scale
// rule. The CPU loops (backend/cpu/optimizer_kernels.cpp) and the CUDA multi-tensor kernels
// (backend/cuda/kernels/optimizers.cu) both call these functions, and the host unit tests
// (tests/unit/training_math_test.cpp) check them against a double-precision reference, so every
// line the GPU runs here is also run and tested on the CPU.
//
// No CUDA header is needed: MIXPREC_HOST_DEVICE (host_device.h) expands to __host__ __device__
// under nvcc and to nothing otherwise.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/kernel_math/host_device.h"

namespace mixprec::kernel_math {

// ---- the loss-scale rule (DESIGN §2.5) and its state ----

enum class LossScaleMode : int { fixed, dynamic };

// The whole loss-scale state, one small piece of data in the variables' device memory (host memory
// on the CPU): 48 bytes, stored in an int64 tensor of 6 elements. The scale is float32, the dtype
// the scaled loss is computed in, on every device; the powers of two of dynamic scaling are exact.
// found_inf is the flag unscale-and-check sets and the optimizer updates read.
struct LossScaleState {
  float scale = 32768.0f;
  std::int32_t found_inf = 0;  // 1 when the last unscale/check saw an Inf or NaN
  std::int64_t counter = 0;    // finite steps since the scale last changed (dynamic only)
  std::int64_t skipped = 0;
  std::int64_t consecutive_skipped = 0;
  std::int64_t last_skipped = 0;  // 0 or 1
  // Consecutive skipped steps that ran at a scale that could not go lower (a dynamic scale at 1,
  // or a fixed scale): what loss_scale_stuck counts.
  std::int64_t skipped_at_floor = 0;
};
static_assert(sizeof(LossScaleState) == 6 * sizeof(std::int64_t) &&
                  offsetof(LossScaleState, scale) == 0,
              "the loss-scale state is 6 int64 elements and its scale view reads float32 byte 0");
inline constexpr std::size_t kFoundInfOffset = offsetof(LossScaleState, found_inf);

// Whether a float32 scale may double: twice it is still finite in float32 (Keras's rule), so a
// dynamic scale stops growing at 2^127 on every device. x - x is 0 for every finite x and NaN for
// +-Inf (no <cmath> call, usable in kernels).
MIXPREC_HOST_DEVICE inline bool can_double(float scale) {
  const float grown = scale * 2.0f;
  return grown - grown == 0.0f;
}

// Records one step's outcome. Non-finite: skipped += 1, consecutive += 1, last_skipped = 1 and,
// when dynamic, scale = max(scale / 2, 1) and counter = 0. Finite: consecutive = 0,
// last_skipped = 0 and, when dynamic, counter += 1, and when it reaches growth_steps: scale *= 2
// when can_double(scale), counter = 0. found_inf is left alone (the caller clears it).
MIXPREC_HOST_DEVICE inline void apply_loss_scale_rule(bool non_finite, LossScaleMode mode,
                                                      std::int64_t growth_steps,
                                                      LossScaleState& s) {
  if (non_finite) {
    const bool at_floor = mode == LossScaleMode::fixed || s.scale <= 1.0f;
    s.skipped_at_floor = at_floor ? s.skipped_at_floor + 1 : 0;
    ++s.skipped;
    ++s.consecutive_skipped;
    s.last_skipped = 1;
    if (mode == LossScaleMode::dynamic) {
      const float half = s.scale / 2.0f;
      s.scale = half < 1.0f ? 1.0f : half;
      s.counter = 0;
    }
    return;
  }
  s.consecutive_skipped = 0;
  s.skipped_at_floor = 0;
  s.last_skipped = 0;
  if (mode != LossScaleMode::dynamic) return;
  if (++s.counter >= growth_steps) {
    if (can_double(s.scale)) s.scale *= 2.0f;
    s.counter = 0;
  }
}

// The loss-scale state's step: the rule applied to the flag, then the flag cleared for the next
// step. The CPU runs it on the state in host memory, the GPU in a one-thread kernel.
MIXPREC_HOST_DEVICE inline void loss_scale_step(LossScaleMode mode, std::int64_t growth_steps,
                                                LossScaleState& s) {
  apply_loss_scale_rule(s.found_inf != 0, mode, growth_steps, s);
  s.found_inf = 0;
}

// Halving cannot help once a dynamic scale is at 1, nor ever for a fixed scale: `run` consecutive
// skipped steps that ran there (the halvings down to 1 not counted) mean training makes no
// progress.
MIXPREC_HOST_DEVICE inline bool loss_scale_stuck(const LossScaleState& s, std::int64_t run) {
  return s.skipped_at_floor >= run;
}

// ---- unscale-and-check, one element ----

// Inf or NaN: the exponent bits all ones (a test on the bits, so it vectorises as integer code and
// holds whatever the floating-point flags).
MIXPREC_HOST_DEVICE inline bool non_finite_bits(std::uint32_t bits) {
  return (bits & 0x7f800000u) == 0x7f800000u;
}
MIXPREC_HOST_DEVICE inline std::uint32_t bits_of(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
#endif
}
MIXPREC_HOST_DEVICE inline bool non_finite(float v) { return non_finite_bits(bits_of(v)); }

// One unscaled gradient: float32(double(g) * inverse), inverse = 1 / double(scale) (exact for the
// power-of-two scales of dynamic scaling; a non-power-of-two fixed scale still rounds once).
MIXPREC_HOST_DEVICE inline float unscale_element(double g, double inverse) {
  return static_cast<float>(g * inverse);
}

// ---- the optimizer updates ----

// Which formula, and its slot layout: sgd none; sgd_momentum/sgd_nesterov [momentum]; adam (and
// AdamW) [m, v]; rmsprop [velocity], then momentum when it has one, then the average gradient
// when centered.
enum class UpdateKind : int {
  sgd,
  sgd_momentum,
  sgd_nesterov,
  adam,
  rmsprop,
  rmsprop_momentum,
  rmsprop_centered,
  rmsprop_centered_momentum
};
inline constexpr int kMaxUpdateSlots = 3;

// The per-step constants, computed once per step on the host in double and rounded to float once
// (optimizers/update_constants.h), identical for every device. clip_limit is clipvalue (Inf: none).
struct UpdateConstants {
  float learning_rate = 0.0f;
  float momentum = 0.0f;
  float alpha = 0.0f;  // Adam: lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
  float one_minus_beta_1 = 0.0f;
  float one_minus_beta_2 = 0.0f;
  float epsilon = 0.0f;
  float decay = 0.0f;  // AdamW: weight_decay * lr (0 for Adam)
  float rho = 0.0f;
  float one_minus_rho = 0.0f;  // 1.0f - rho, in float
  float clip_limit = std::numeric_limits<float>::infinity();
};

// One optimizer step's update: the formula and its constants.
struct UpdateRule {
  UpdateKind kind = UpdateKind::sgd;
  UpdateConstants constants;
  // CUDA graphs (core::ReplayParameters): where set, the update reads its constants from this
  // address (device memory on a GPU, host memory on the CPU) when it runs, not from `constants`:
  // a captured step's replays each write their own step's there. Null in an eager step.
  const UpdateConstants* constants_in_memory = nullptr;
};

// The constants an update runs with: the ones in memory where the rule points to them (a replayed
// step's), else the launch's. The CUDA kernel and the CPU loop both call it.
MIXPREC_HOST_DEVICE inline UpdateConstants constants_to_use(const UpdateConstants& launched,
                                                            const UpdateConstants* in_memory) {
  return in_memory != nullptr ? *in_memory : launched;
}

MIXPREC_HOST_DEVICE constexpr int update_slot_count(UpdateKind kind) {
  switch (kind) {
    case UpdateKind::sgd: return 0;
    case UpdateKind::sgd_momentum:
    case UpdateKind::sgd_nesterov: return 1;
    case UpdateKind::adam: return 2;
    case UpdateKind::rmsprop: return 1;
    case UpdateKind::rmsprop_momentum:
    case UpdateKind::rmsprop_centered: return 2;
    case UpdateKind::rmsprop_centered_momentum: return 3;
  }
  return 0;
}

// Correctly rounded float operations never contracted into fused multiply-adds: the _rn intrinsics
// on the device (nvcc contracts a * b + c otherwise), plain operators on the host (the library is
// built without FMA contraction). A formula written with them rounds every product and sum the
// same way on both.
MIXPREC_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
MIXPREC_HOST_DEVICE inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
MIXPREC_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MIXPREC_HOST_DEVICE inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
MIXPREC_HOST_DEVICE inline float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

MIXPREC_HOST_DEVICE inline double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
MIXPREC_HOST_DEVICE inline double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// One element of a moving average (BatchNormalization's moving statistics): moving * momentum +
// value * weight, the two products and the sum each rounded to T (float or double), exactly what
// the composition of the three tensor ops gives.
template <typename T>
MIXPREC_HOST_DEVICE inline T moving_average_element(T moving, T value, T momentum, T weight) {
  return add_rn(mul_rn(moving, momentum), mul_rn(value, weight));
}

// How an update reads its gradient: g = min(max(raw * scale, -limit), limit). clipnorm and
// global_clipnorm set `scale`, clipvalue sets `limit`; NaN passes through (clipping never hides a
// non-finite gradient). Value comparisons, not std::min/max, so CPU loops if-convert to vector
// min/max.
MIXPREC_HOST_DEVICE inline float transformed_gradient(float raw, float scale, float limit) {
  float g = mul_rn(raw, scale);
  g = g < -limit ? -limit : g;
  return g > limit ? limit : g;
}

// One element of the update of kind K. var and the slots (s0, s1, s2 in the layout of UpdateKind;
// unused ones may be null) are read and written in place.
template <UpdateKind K>
MIXPREC_HOST_DEVICE inline void update_element(const UpdateConstants& c, float raw, float* var,
                                               float* s0, float* s1, float* s2, float clip_scale) {
  const float g = transformed_gradient(raw, clip_scale, c.clip_limit);
  if constexpr (K == UpdateKind::sgd) {
    *var = sub_rn(*var, mul_rn(c.learning_rate, g));
  } else if constexpr (K == UpdateKind::sgd_momentum || K == UpdateKind::sgd_nesterov) {
    const float m = sub_rn(mul_rn(c.momentum, *s0), mul_rn(c.learning_rate, g));
    *s0 = m;
    if constexpr (K == UpdateKind::sgd_momentum) {
      *var = add_rn(*var, m);
    } else {
      *var = add_rn(*var, sub_rn(mul_rn(c.momentum, m), mul_rn(c.learning_rate, g)));
    }
  } else if constexpr (K == UpdateKind::adam) {
    float w = *var;
    w = sub_rn(w, mul_rn(w, c.decay));  // AdamW's decoupled decay (0 for Adam)
    const float m = *s0, v = *s1;
    const float mi = add_rn(m, mul_rn(sub_rn(g, m), c.one_minus_beta_1));
    const float vi = add_rn(v, mul_rn(sub_rn(mul_rn(g, g), v), c.one_minus_beta_2));
    *s0 = mi;
    *s1 = vi;
    *var = sub_rn(w, div_rn(mul_rn(mi, c.alpha), add_rn(sqrt_rn(vi), c.epsilon)));
  } else {
    constexpr bool kMomentum =
        K == UpdateKind::rmsprop_momentum || K == UpdateKind::rmsprop_centered_momentum;
    constexpr bool kCentered =
        K == UpdateKind::rmsprop_centered || K == UpdateKind::rmsprop_centered_momentum;
    // Slots: velocity, then momentum when present, then the average gradient when centered.
    const float vi = add_rn(mul_rn(c.rho, *s0), mul_rn(c.one_minus_rho, mul_rn(g, g)));
    *s0 = vi;
    float denominator = add_rn(vi, c.epsilon);
    if constexpr (kCentered) {
      float* average = kMomentum ? s2 : s1;
      const float a = add_rn(mul_rn(c.rho, *average), mul_rn(c.one_minus_rho, g));
      *average = a;
      denominator = add_rn(sub_rn(vi, mul_rn(a, a)), c.epsilon);
    }
    const float increment = div_rn(mul_rn(c.learning_rate, g), sqrt_rn(denominator));
    if constexpr (kMomentum) {
      const float mom = add_rn(mul_rn(c.momentum, *s1), increment);
      *s1 = mom;
      *var = sub_rn(*var, mom);
    } else {
      *var = sub_rn(*var, increment);
    }
  }
}

// Calls f.template operator()<K>() with the compile-time kind of `kind` (one instantiation of the
// element loop per formula, on every device).
template <typename F>
decltype(auto) dispatch_update_kind(UpdateKind kind, F&& f) {
  switch (kind) {
    case UpdateKind::sgd: return f.template operator()<UpdateKind::sgd>();
    case UpdateKind::sgd_momentum: return f.template operator()<UpdateKind::sgd_momentum>();
    case UpdateKind::sgd_nesterov: return f.template operator()<UpdateKind::sgd_nesterov>();
    case UpdateKind::adam: return f.template operator()<UpdateKind::adam>();
    case UpdateKind::rmsprop: return f.template operator()<UpdateKind::rmsprop>();
    case UpdateKind::rmsprop_momentum: return f.template operator()<UpdateKind::rmsprop_momentum>();
    case UpdateKind::rmsprop_centered: return f.template operator()<UpdateKind::rmsprop_centered>();
    case UpdateKind::rmsprop_centered_momentum:
      return f.template operator()<UpdateKind::rmsprop_centered_momentum>();
  }
  return f.template operator()<UpdateKind::sgd>();
}

}  // namespace mixprec::kernel_math
