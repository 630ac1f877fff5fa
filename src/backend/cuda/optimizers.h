// Loss scaling and optimizer updates on the device (DESIGN §3: the loss-scale decision stays on the
// GPU, one fused multi-tensor pass unscales and checks every gradient, one updates every variable;
// no host synchronisation per step).
//
// This header has three parts:
//  1. plain rules and plans, usable from every build, the host unit tests and the kernels: the
//     loss-scale rule shared with mixed_precision::detail::LossScale, the device loss-scale state,
//     the multi-tensor launch tables and their planner, the per-step update constants and the
//     per-element update formulas the kernels run (host-tested against the CPU loops);
//  2. the kernel launchers of kernels/optimizers.cu (CUDA builds only);
//  3. the Tensor-level entry points the optimizers call (optimizers.cpp; in a build without CUDA,
//     throwing stubs in unavailable.cpp). Not seen by nvcc.
//
// Multi-tensor launches: every tensor is cut into chunks of kMultiTensorChunk elements and each
// thread block processes one chunk. A launch carries its table (pointers per tensor, element
// counts, and the (tensor, chunk) of each block) by value in the kernel's parameter space, so a
// launch needs no host-to-device copy and no device-side table to keep in sync with the variable
// list; a list too long for one table is split over several launches (a tensor may continue in
// the next launch). The table stays under the classic 4 KiB kernel-parameter limit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(__CUDACC__)
#define MIXPREC_HOST_DEVICE __host__ __device__
#else
#define MIXPREC_HOST_DEVICE
#endif

namespace mixprec::cuda {

// ---- 1a. the loss-scale rule (DESIGN §2.5), one definition for the host and the device ----

enum class LossScaleMode : int { fixed, dynamic };

// Records one step's outcome in a loss-scale state. Non-finite: skipped += 1, consecutive += 1,
// last_skipped = true and, when dynamic, scale = max(scale / 2, 1) and counter = 0. Finite:
// consecutive = 0, last_skipped = false and, when dynamic, counter += 1, and when it reaches
// growth_steps: scale *= 2 unless that is not finite, counter = 0. The host runs it on its double
// and int64 state (LossScale::update), the device on its float scale (DeviceLossScale), so a float
// scale stops growing at 2^127 where the host's double would go on.
template <typename Scale, typename Count, typename Flag>
MIXPREC_HOST_DEVICE inline void apply_loss_scale_rule(bool non_finite, LossScaleMode mode,
                                                      Count growth_steps, Scale& scale,
                                                      Count& counter, Count& skipped,
                                                      Count& consecutive_skipped,
                                                      Flag& last_skipped) {
  if (non_finite) {
    ++skipped;
    ++consecutive_skipped;
    last_skipped = Flag(1);
    if (mode == LossScaleMode::dynamic) {
      const Scale half = scale / Scale(2);
      scale = half < Scale(1) ? Scale(1) : half;
      counter = 0;
    }
    return;
  }
  consecutive_skipped = 0;
  last_skipped = Flag(0);
  if (mode != LossScaleMode::dynamic) return;
  if (++counter >= growth_steps) {
    // x - x is 0 exactly for every finite x and NaN for +-Inf (no <cmath>, usable in kernels).
    const Scale grown = scale * Scale(2);
    if (grown - grown == Scale(0)) scale = grown;
    counter = 0;
  }
}

// The loss-scale state in device memory (40 bytes), seeded from the host's LossScaleState. The
// scale is float32 (the dtype the scaled loss is computed in); the powers of two of dynamic
// scaling are exact. found_inf is the flag the unscale pass sets and the update kernels read.
struct DeviceLossScale {
  float scale = 32768.0f;
  std::int32_t found_inf = 0;  // 1 when the last unscale/check saw an Inf or NaN
  std::int64_t counter = 0;
  std::int64_t skipped = 0;
  std::int64_t consecutive_skipped = 0;
  std::int64_t last_skipped = 0;  // 0 or 1
};
static_assert(sizeof(DeviceLossScale) == 40 && offsetof(DeviceLossScale, scale) == 0,
              "the loss-scale alias tensor reads the scale as float32 at byte 0");

// ---- 1b. multi-tensor launch tables ----

inline constexpr int kMultiTensorMaxTensors = 32;
inline constexpr int kMultiTensorMaxBlocks = 384;
// 16384 float32 = 64 KiB per block: 32 elements per thread of a 512-thread block, and a full table
// (384 blocks, 6.3 M elements) keeps about three blocks on each of an H100's 132 SMs.
inline constexpr std::int64_t kMultiTensorChunk = 1 << 14;
inline constexpr int kMultiTensorThreads = 512;

// What a launch receives by value. ptr[k][t]: the k-th operand of the t-th tensor of this launch
// (unscale: 0 = gradient in, 1 = float32 out (null: check only); update: 0 = gradient, 1 =
// variable, 2.. = slots; sum of squares: 0 = input). Block b processes elements
// [block_chunk[b] * kMultiTensorChunk, min(numel, (block_chunk[b] + 1) * kMultiTensorChunk)) of
// tensor block_tensor[b].
template <int L>
struct MultiTensorTable {
  void* ptr[L][kMultiTensorMaxTensors];
  std::int64_t numel[kMultiTensorMaxTensors];
  float clip_scale[kMultiTensorMaxTensors];  // update only: the gradient's clipping factor
  std::int32_t block_chunk[kMultiTensorMaxBlocks];
  std::uint8_t block_tensor[kMultiTensorMaxBlocks];
  std::int32_t tensors;
  std::int32_t blocks;
};
static_assert(sizeof(MultiTensorTable<5>) + 96 <= 4096, "a launch's parameters must fit in 4 KiB");

// One launch of a multi-tensor pass: the caller's tensor indices it covers (in table order) and,
// for each block, the position in `tensors` and the chunk index.
struct MultiTensorLaunch {
  struct Block {
    int slot = 0;            // index into `tensors`
    std::int64_t chunk = 0;  // chunk of that tensor
  };
  std::vector<int> tensors;
  std::vector<Block> blocks;
};

// Cuts tensors of numels[i] elements into chunks of `chunk` elements and packs them, in order, into
// launches of at most max_tensors tensors and max_blocks blocks. Empty tensors get no block. Every
// (tensor, chunk) appears exactly once; a tensor whose chunks do not fit in the current launch
// continues at the start of the next. Throws ValueError on a limit < 1 or a chunk index past 2^31.
std::vector<MultiTensorLaunch> plan_multi_tensor(const std::vector<std::int64_t>& numels,
                                                 int max_tensors = kMultiTensorMaxTensors,
                                                 int max_blocks = kMultiTensorMaxBlocks,
                                                 std::int64_t chunk = kMultiTensorChunk);

// The kernel table of `launch`: operands[k][i] is the k-th pointer of the caller's tensor i,
// numels[i] its element count, clip_scales[i] its clipping factor (empty: 1). `launch` must come
// from plan_multi_tensor with the default limits.
template <int L>
MultiTensorTable<L> make_multi_tensor_table(const MultiTensorLaunch& launch,
                                            const std::vector<void*> (&operands)[L],
                                            const std::vector<std::int64_t>& numels,
                                            const std::vector<float>& clip_scales = {}) {
  MultiTensorTable<L> table{};
  table.tensors = static_cast<std::int32_t>(launch.tensors.size());
  table.blocks = static_cast<std::int32_t>(launch.blocks.size());
  for (std::size_t t = 0; t < launch.tensors.size(); ++t) {
    const auto i = static_cast<std::size_t>(launch.tensors[t]);
    for (int k = 0; k < L; ++k) table.ptr[k][t] = operands[k][i];
    table.numel[t] = numels[i];
    table.clip_scale[t] = clip_scales.empty() ? 1.0f : clip_scales[i];
  }
  for (std::size_t b = 0; b < launch.blocks.size(); ++b) {
    table.block_tensor[b] = static_cast<std::uint8_t>(launch.blocks[b].slot);
    table.block_chunk[b] = static_cast<std::int32_t>(launch.blocks[b].chunk);
  }
  return table;
}

// ---- 1c. the fused optimizer updates: which formula, and its per-step constants ----

// The formulas of cpu::sgd_update, adam_update and rmsprop_update (backend/cpu/optimizer_kernels.h)
// with their slot layouts: sgd none; sgd_momentum/sgd_nesterov [momentum]; adam [m, v]; rmsprop
// [velocity], then momentum when it has one, then the average gradient when centered.
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

// Rounded to float once on the host, exactly as the CPU path rounds them (the same cpu::*Step
// structs are the source); clip_limit is clipvalue (Inf: none).
struct UpdateConstants {
  float learning_rate = 0.0f;
  float momentum = 0.0f;
  float alpha = 0.0f;  // Adam: lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
  float one_minus_beta_1 = 0.0f;
  float one_minus_beta_2 = 0.0f;
  float epsilon = 0.0f;
  float decay = 0.0f;  // AdamW: weight_decay * lr
  float rho = 0.0f;
  float one_minus_rho = 0.0f;  // 1.0f - rho, in float (as the CPU loop computes it)
  float clip_limit = std::numeric_limits<float>::infinity();
};

struct DeviceUpdate {
  UpdateKind kind = UpdateKind::sgd;
  UpdateConstants constants;
};

// Slots the update of `kind` reads and writes.
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

// ---- 1d. the per-element formulas, shared by the kernels and the host tests ----

// Correctly rounded float operations that are never contracted into fused multiply-adds: the _rn
// intrinsics on the device (nvcc contracts a * b + c otherwise), plain operators on the host (the
// CPU loops are built without FMA contraction). So a formula written with them rounds every
// product and sum exactly as the CPU loops of backend/cpu/optimizer_kernels.cpp do.
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

// cpu::GradientTransform: g = min(max(raw * scale, -limit), limit), NaN passing through.
MIXPREC_HOST_DEVICE inline float transformed_gradient(float raw, float scale, float limit) {
  float g = mul_rn(raw, scale);
  g = g < -limit ? -limit : g;
  return g > limit ? limit : g;
}

// One element of the update of kind K: the statements of cpu::sgd_update / adam_update /
// rmsprop_update in the same order. var and the slots (s0, s1, s2 in the layout of UpdateKind;
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
    float* momentum = kMomentum ? s1 : nullptr;
    float* average = kCentered ? (kMomentum ? s2 : s1) : nullptr;
    const float vi = add_rn(mul_rn(c.rho, *s0), mul_rn(c.one_minus_rho, mul_rn(g, g)));
    *s0 = vi;
    float denominator = add_rn(vi, c.epsilon);
    if constexpr (kCentered) {
      const float a = add_rn(mul_rn(c.rho, *average), mul_rn(c.one_minus_rho, g));
      *average = a;
      denominator = add_rn(sub_rn(vi, mul_rn(a, a)), c.epsilon);
    }
    const float increment = div_rn(mul_rn(c.learning_rate, g), sqrt_rn(denominator));
    if constexpr (kMomentum) {
      const float mom = add_rn(mul_rn(c.momentum, *momentum), increment);
      *momentum = mom;
      *var = sub_rn(*var, mom);
    } else {
      *var = sub_rn(*var, increment);
    }
  }
}

}  // namespace mixprec::cuda

// ---- 2. the kernel launchers (kernels/optimizers.cu) ----
#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "mixprec/dtype.h"

namespace mixprec::cuda::kernels {

// Every launcher enqueues on `s`, checks the launch and returns without waiting; tables come from
// make_multi_tensor_table and have at least one block.

// out = float32(double(g) * (1 / double(*scale))) for gradients of `dtype` (float32, float16,
// bfloat16, float64); sets *found_inf = 1 when some out is Inf or NaN (each block ORs its threads'
// verdicts and at most one thread per block stores; never clears). With ptr[1][t] null the tensor
// is only checked; with scale null the factor is 1.
void multi_tensor_unscale(DType dtype, const MultiTensorTable<2>& table, const float* scale,
                          int* found_inf, cudaStream_t s);
// partials[b] = sum over block b's chunk of double(x)^2 (float32 inputs), b < table.blocks.
void multi_tensor_sum_of_squares(const MultiTensorTable<1>& table, double* partials,
                                 cudaStream_t s);
// The update of `update.kind` over every tensor of the table (float32 gradients, variables and
// slots); when found_inf is not null and *found_inf != 0 every block returns before touching
// memory (variables and slots stay bit-identical).
void multi_tensor_update(const DeviceUpdate& update, const MultiTensorTable<5>& table,
                         const int* found_inf, cudaStream_t s);
// One thread: apply_loss_scale_rule(state->found_inf != 0, ...) on *state, then found_inf = 0.
void loss_scale_update(DeviceLossScale* state, LossScaleMode mode, std::int64_t growth_steps,
                       cudaStream_t s);
// *state = value (by kernel parameter: no host memory is read, so it may be captured in a graph).
void loss_scale_set(DeviceLossScale* state, const DeviceLossScale& value, cudaStream_t s);

}  // namespace mixprec::cuda::kernels
#endif  // MIXPREC_HAVE_CUDA

// ---- 3. Tensor-level entry points (host code) ----
#if !defined(__CUDACC__)
#include "backend/cpu/optimizer_kernels.h"
#include "mixprec/device.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// The update constants of the CPU step structs (the CPU path's begin_step computes them); the
// variant follows the slots the optimizer keeps, as the CPU path does (a momentum slot exists
// whenever the option is non-zero, even if it rounds to 0.0f).
enum class SgdVariant { plain, momentum, nesterov };
inline DeviceUpdate device_update(const cpu::SGDStep& step, SgdVariant variant) {
  DeviceUpdate u;
  u.kind = variant == SgdVariant::plain      ? UpdateKind::sgd
           : variant == SgdVariant::momentum ? UpdateKind::sgd_momentum
                                             : UpdateKind::sgd_nesterov;
  u.constants.learning_rate = step.learning_rate;
  u.constants.momentum = step.momentum;
  return u;
}

inline DeviceUpdate device_update(const cpu::AdamStep& step) {
  DeviceUpdate u;
  u.kind = UpdateKind::adam;
  u.constants.alpha = step.alpha;
  u.constants.one_minus_beta_1 = step.one_minus_beta_1;
  u.constants.one_minus_beta_2 = step.one_minus_beta_2;
  u.constants.epsilon = step.epsilon;
  u.constants.decay = step.decay;
  return u;
}

enum class RmspropMomentum { none, with_momentum };
enum class RmspropCentered { no, yes };
inline DeviceUpdate device_update(const cpu::RMSpropStep& step, RmspropMomentum momentum,
                                  RmspropCentered centered) {
  const bool with_momentum = momentum == RmspropMomentum::with_momentum;
  DeviceUpdate u;
  if (centered == RmspropCentered::yes) {
    u.kind = with_momentum ? UpdateKind::rmsprop_centered_momentum : UpdateKind::rmsprop_centered;
  } else {
    u.kind = with_momentum ? UpdateKind::rmsprop_momentum : UpdateKind::rmsprop;
  }
  u.constants.learning_rate = step.learning_rate;
  u.constants.rho = step.rho;
  u.constants.one_minus_rho = 1.0f - step.rho;  // in float, as cpu::rmsprop_update computes it
  u.constants.momentum = step.momentum;
  u.constants.epsilon = step.epsilon;
  return u;
}

// One variable of a multi-tensor update: float32 device pointers of `numel` elements each.
struct UpdateTensors {
  float* variable = nullptr;
  const float* gradient = nullptr;
  std::int64_t numel = 0;
  float clip_scale = 1.0f;  // clipnorm / global_clipnorm factor (1: none)
  float* slots[3] = {nullptr, nullptr, nullptr};
};

// The whole update of one optimizer step on `device`: one launch per table (usually one in all).
// found_inf: a device int (or null); when set the launches change nothing. Enqueues only.
void multi_tensor_update(Device device, const DeviceUpdate& update,
                         const std::vector<UpdateTensors>& variables, const int* found_inf);

// Each defined gradient (any floating dtype, any strides, all on `device`) divided by *scale
// (float32 in device memory) into a new contiguous float32 tensor; *found_inf is cleared, then set
// to 1 when some result is Inf or NaN. One launch per gradient dtype and table. Undefined
// gradients stay undefined. Enqueues only (no host synchronisation).
std::vector<Tensor> unscale_and_check(Device device, const std::vector<Tensor>& grads,
                                      const float* scale, int* found_inf);
// *found_inf cleared, then set to 1 when some defined gradient has an Inf or NaN. Enqueues only.
void check_finite(Device device, const std::vector<Tensor>& grads, int* found_inf);
// sum(x^2) in double of each float32 contiguous tensor on `device` (undefined: 0), block partials
// added in a fixed order. Synchronises: the partials are copied back to the host.
std::vector<double> sums_of_squares(Device device, const std::vector<Tensor>& tensors);

// The device loss-scale state: an int64 tensor of 5 elements holding one DeviceLossScale on
// `device`, initialised to `initial` by a kernel (enqueued, no host copy).
Tensor make_loss_scale_state(Device device, const DeviceLossScale& initial);
// Enqueues *state = value.
void set_loss_scale_state(const Tensor& state, const DeviceLossScale& value);
// The state's current value. Synchronises (waits for the work queued on the compute stream).
DeviceLossScale read_loss_scale_state(const Tensor& state);
// Enqueues apply_loss_scale_rule from the state's found_inf, then clears found_inf.
void update_loss_scale_state(const Tensor& state, LossScaleMode mode, std::int64_t growth_steps);
// A 0-d float32 tensor aliasing the state's scale (no autograd, no copy): ops that read it see the
// scale current when they run on the stream.
Tensor loss_scale_view(const Tensor& state);
// The found_inf flag inside the state.
inline int* found_inf_flag(const Tensor& state) {
  return reinterpret_cast<int*>(static_cast<char*>(Tensor(state).data_ptr()) +
                                offsetof(DeviceLossScale, found_inf));
}

}  // namespace mixprec::cuda
#endif  // !__CUDACC__
