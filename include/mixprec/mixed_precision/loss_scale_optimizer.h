// Loss scaling (DESIGN §2.5), as keras.mixed_precision.LossScaleOptimizer. Under mixed_float16
// small gradients underflow to zero in float16; multiplying the loss by a large scale before the
// backward pass keeps them representable, and dividing the gradients by it afterwards restores
// their values.
//
//   auto opt = mp::mixed_precision::LossScaleOptimizer(mp::optimizers::RMSprop());
//   auto grads = opt.get_unscaled_gradients(tape.gradient(opt.get_scaled_loss(loss), vars));
//   opt.apply_gradients(grads, vars);  // skips the step on Inf/NaN and adjusts the scale
//
// get_unscaled_gradients returns an UnscaledGradients: the gradients together with the record that
// they were checked. apply_gradients given that object reuses the verdict of the unscale pass (no
// second pass over the gradients); given plain tensors (gradients from anywhere), it checks them
// itself first. The implementation lives in src/optimizers/ (an optimizer like the others); Keras 3
// exports the class from keras.optimizers too, hence mixprec::optimizers::LossScaleOptimizer below.
//
// Each step:
//  - non-finite gradients: the update is skipped (variables and inner slots unchanged; iterations
//    still advance, as in Keras 2), scale = max(scale / 2, 1) when dynamic, counter = 0,
//    skipped_steps += 1;
//  - finite: the inner optimizer applies them (its clipping sees the unscaled gradients),
//    counter += 1, and when counter reaches dynamic_growth_steps: scale *= 2 unless that would be
//    Inf, counter = 0.
// A fixed scale (dynamic = false) never changes, and also skips and counts non-finite steps (Keras
// applies them; we refuse to write NaN into the weights).
//
// The state (scale, counters, the Inf/NaN flag) is one small piece of data on the device of the
// tensors it is used with (host memory for CPU tensors; it follows the tensors if they move). The
// scale is float32 on every device: a dynamic scale never doubles past 2^127, and a requested
// scale above 2^127 is clamped to it. On a GPU: get_scaled_loss multiplies by the device scale,
// get_unscaled_gradients sets a device Inf/NaN flag in one fused pass over all gradients,
// apply_gradients runs the inner optimizer's fused update, which reads the flag and skips, then
// updates the scale and counters on the device. None of these waits for the GPU (except clipping
// by clipnorm/global_clipnorm, which reads the norms back once a step). The accessors below and
// get_state copy the state back and so SYNCHRONISE with the GPU (cheap, but it ends the overlap of
// host and device: a training loop should read them every few steps, not every step). set_state
// writes the device state too.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mixprec/optimizers/optimizer.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::mixed_precision {

struct LossScaleOptions {
  bool dynamic = true;
  // Default 2^15 = 32768 when dynamic; required when dynamic is false. Must be positive and finite.
  std::optional<double> initial_scale;
  // Default 2000; only meaningful (and only accepted) when dynamic.
  std::optional<std::int64_t> dynamic_growth_steps;
};

class LossScaleOptimizer;

// What get_unscaled_gradients returns: the unscaled float32 gradients (undefined where the input
// was undefined) and the record of the check that produced them. It reads as the gradient list
// (converts to const std::vector<Tensor>&, indexes, iterates). Passed back to the
// LossScaleOptimizer that made it, and before any other unscale or check of that optimizer,
// apply_gradients reuses the check's verdict (it stays on the device); otherwise the gradients
// are checked again there, so a stale or foreign object is never trusted.
class UnscaledGradients {
 public:
  const std::vector<Tensor>& gradients() const { return gradients_; }
  operator const std::vector<Tensor>&() const { return gradients_; }  // NOLINT: reads as a list
  std::size_t size() const { return gradients_.size(); }
  const Tensor& operator[](std::size_t i) const { return gradients_[i]; }
  auto begin() const { return gradients_.begin(); }
  auto end() const { return gradients_.end(); }

 private:
  friend class LossScaleOptimizer;
  struct Token {};
  UnscaledGradients(Token, std::vector<Tensor> gradients, const void* issuer, std::uint64_t check)
      : gradients_(std::move(gradients)), issuer_(issuer), check_(check) {}
  std::vector<Tensor> gradients_;
  const void* issuer_ = nullptr;  // the optimizer whose state holds the verdict
  std::uint64_t check_ = 0;       // which of its checks
};

class LossScaleOptimizer : public optimizers::Optimizer {
 public:
  // Throws ValueError when `inner` is undefined or itself a LossScaleOptimizer, or the options are
  // invalid (see LossScaleOptions).
  explicit LossScaleOptimizer(optimizers::Optimizer inner, LossScaleOptions options = {});

  // loss * loss_scale(), in the loss's dtype; differentiable (use it as the tape's target). On a
  // GPU the scale is read on the device (16-bit losses are scaled in float32 and rounded once).
  Tensor get_scaled_loss(const Tensor& loss) const;
  // Each gradient divided by loss_scale(), as a new float32 tensor, checked for Inf/NaN in the
  // same pass (one fused kernel per gradient). Undefined gradients stay undefined. The verdict is
  // kept in the state for apply_gradients(UnscaledGradients). On a GPU: one launch per gradient
  // dtype (more for very many gradients), and the verdict stays on the device.
  UnscaledGradients get_unscaled_gradients(const std::vector<Tensor>& grads) const;

  // The step with gradients from get_unscaled_gradients: skipped when they held an Inf or NaN,
  // then the loss-scale rule. The other overload (gradients from anywhere) checks them first.
  using optimizers::Optimizer::apply_gradients;
  void apply_gradients(const UnscaledGradients& grads, const std::vector<Tensor>& variables);

  // Whether the last `steps` steps were all skipped while the scale could not go lower (a dynamic
  // scale at 1, or a fixed scale): halving cannot help, training makes no progress. Reads the
  // state (a synchronisation on a GPU).
  bool stuck(std::int64_t steps) const;

  // These read the state back from the GPU when it lives there (a synchronisation; see above).
  double loss_scale() const;
  bool dynamic() const;
  std::int64_t dynamic_growth_steps() const;
  std::int64_t dynamic_counter() const;            // finite steps since the scale last changed
  std::int64_t skipped_steps() const;              // non-finite steps skipped, in total
  std::int64_t consecutive_skipped_steps() const;  // non-finite steps since the last applied one
  bool last_step_skipped() const;
  optimizers::Optimizer inner_optimizer() const;

  // apply_gradients, iterations, learning_rate, get_state/set_state come from Optimizer; the
  // state holds the scalars "loss_scale", "dynamic_counter", "skipped_steps",
  // "consecutive_skipped_steps", "last_step_skipped" and the inner optimizer's state.

 private:
  friend std::optional<LossScaleOptimizer> as_loss_scale_optimizer(const optimizers::Optimizer&);
  explicit LossScaleOptimizer(std::shared_ptr<optimizers::detail::OptimizerImpl> impl);
};

// The LossScaleOptimizer an Optimizer handle refers to (sharing its state), or nothing when it is
// another kind of optimizer (Keras: isinstance(opt, LossScaleOptimizer)).
std::optional<LossScaleOptimizer> as_loss_scale_optimizer(const optimizers::Optimizer& optimizer);

}  // namespace mixprec::mixed_precision

namespace mixprec::optimizers {
// Keras 3 exports the class from keras.optimizers as well as keras.mixed_precision.
using LossScaleOptimizer = mixed_precision::LossScaleOptimizer;
using mixed_precision::LossScaleOptions;
}  // namespace mixprec::optimizers

#pragma GCC visibility pop
