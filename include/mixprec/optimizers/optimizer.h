// The optimizer handle (keras.optimizers.Optimizer). Optimizers update float32 master variables
// in place from their gradients: `opt.apply_gradients(grads, model.trainable_variables())`.
// An Optimizer is a handle: copies share one state (iteration count, slots), like a Python
// reference, so an optimizer passed to compile() and kept by the caller is one optimizer.
//
// Semantics shared by every optimizer (DESIGN §2.3, §2.5):
//  - variables are float32 leaf tensors, updated in place through their storage (every handle to
//    them sees the new values); nothing is recorded for autograd;
//  - a gradient may be float32 or 16-bit (read as float32); an undefined gradient skips its
//    variable; a count or shape mismatch throws, naming the variable's index and both shapes;
//  - slots (momentum, velocity, ...) are float32 tensors of the variable's shape, created at the
//    first apply_gradients (or build) that sees the variable, and numbered by the order in which
//    variables were first seen;
//  - clipping (at most one of clipnorm, clipvalue, global_clipnorm, as in Keras) applies to the
//    gradients as passed (a LossScaleOptimizer passes them unscaled);
//  - iterations() counts apply_gradients calls; schedules are evaluated at it before the step;
//  - variables on a CUDA device (all on one device; a mix is a DeviceError naming both) are updated
//    by one fused multi-tensor kernel launch for all of them, slots live on that device, and the
//    step does not wait for the GPU, except clipnorm/global_clipnorm, which read the gradient norms
//    back (one synchronisation per step). get_state copies the slots to the host.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/optimizers/schedules.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::optimizers {

namespace detail {
class OptimizerImpl;
}

struct NamedTensor {
  std::string name;
  Tensor value;
};

// Everything an optimizer needs to continue bit-identically after a checkpoint restore. The
// hyperparameters (learning rate, betas, ...) are configuration, not state: restore into an
// optimizer constructed with the same options.
struct OptimizerState {
  std::string name;             // Optimizer::name() of the optimizer that produced it
  std::int64_t iterations = 0;  // apply_gradients calls so far
  // float32 copies of the slots, variable by variable in the order the optimizer first saw them,
  // each variable's slots in the optimizer's order: "momentum/0", "velocity/0", "momentum/1", ...
  std::vector<NamedTensor> slots;
  // Scalar state beyond iterations (LossScaleOptimizer: "loss_scale", "dynamic_counter", ...).
  std::map<std::string, double> scalars;
  // The wrapped optimizer's state, for a wrapper (LossScaleOptimizer); empty otherwise.
  std::vector<OptimizerState> inner;
};

class Optimizer {
 public:
  // An undefined optimizer (defined() is false); every other member throws ValueError on it.
  Optimizer() = default;
  explicit Optimizer(std::shared_ptr<detail::OptimizerImpl> impl);

  bool defined() const { return impl_ != nullptr; }
  // Keras name: "sgd", "adam", "adamw", "rmsprop", "loss_scale_optimizer".
  std::string name() const;

  // One optimizer step: updates each variable from its gradient (see the header comment).
  void apply_gradients(const std::vector<Tensor>& grads, const std::vector<Tensor>& variables);
  // Creates the slots of `variables` now (optional: apply_gradients does it on first use).
  void build(const std::vector<Tensor>& variables);

  std::int64_t iterations() const;
  // The learning rate the next step will use (the schedule at iterations()).
  double learning_rate() const;
  // Replaces the learning rate or schedule (callbacks such as ReduceLROnPlateau).
  void set_learning_rate(const LearningRate& learning_rate);
  // Whether the learning rate is a schedule of the iterations (false: a constant).
  bool learning_rate_is_schedule() const;

  // Keras 3's exclude_from_weight_decay, for optimizers with weight decay (AdamW; any other
  // throws ValueError, and a LossScaleOptimizer passes the call to its inner optimizer): the
  // variables in var_list, and those whose weight name (the part after the last '/' of the layer
  // variable's "<layer>/<weight>": "kernel", "bias", "gamma", "beta", "embeddings") contains one
  // of the var_names as a substring, take the optimizer's update without the decay (for AdamW:
  // Adam's update, bit for bit). Calls add to the exclusions; they apply from the next step. The
  // var_names are saved in the optimizer's config (compile_config_to_json); var_list is not
  // (tensors have no place in a config).
  void exclude_from_weight_decay(const std::vector<Tensor>& var_list = {},
                                 const std::vector<std::string>& var_names = {});

  // Deep copies: later steps do not change an exported state, and set_state copies in.
  OptimizerState get_state() const;
  // Restores a state exported by an optimizer of the same kind. Slots of variables this optimizer
  // has seen are overwritten; the others are bound, in order, to the next new variables it sees
  // (pass the variables in the same order as before the checkpoint). Throws ValueError when the
  // state belongs to another kind of optimizer or is incomplete, ShapeError when a slot does not
  // fit its variable.
  void set_state(const OptimizerState& state);

  // The implementation, for library code (LossScaleOptimizer, checkpoints).
  const std::shared_ptr<detail::OptimizerImpl>& impl() const { return impl_; }

 protected:
  detail::OptimizerImpl& checked_impl() const;

 private:
  std::shared_ptr<detail::OptimizerImpl> impl_;
};

// An optimizer with default options by Keras name: "sgd", "adam", "adamw", "rmsprop" (case
// insensitive). Unknown names throw ValueError listing the valid ones.
Optimizer get(std::string_view name);

}  // namespace mixprec::optimizers

#pragma GCC visibility pop
