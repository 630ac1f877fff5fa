// Behind the Optimizer handle. OptimizerImpl is the interface every optimizer implements
// (LossScaleOptimizer included); SlotOptimizer is the shared machinery of SGD, Adam, AdamW and
// RMSprop: argument checks, the slot registry, gradient preparation and clipping, the iteration
// count. A concrete optimizer supplies its slot names and its update rule (the formula and its
// per-step constants, update_constants.h); every device runs it through
// backend_for(device).training->multi_tensor_update.
#pragma once

#include <any>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/kernel_math/training.h"
#include "mixprec/optimizers/optimizer.h"

namespace mixprec::optimizers::detail {

class OptimizerImpl {
 public:
  virtual ~OptimizerImpl() = default;
  // The options the public handle was constructed with (SGDOptions, AdamOptions, AdamWOptions,
  // RMSpropOptions, mixed_precision::LossScaleOptions), kept for compile_config_to_json()
  // (include/mixprec/models/model_config.h); empty for an optimizer made otherwise.
  std::any options;
  virtual std::string name() const = 0;
  virtual void apply_gradients(const std::vector<Tensor>& grads,
                               const std::vector<Tensor>& variables) = 0;
  // The step of a LossScaleOptimizer, on every device: the update reads found_inf (a 0-d int32
  // tensor on the variables' device, found_inf_view of the loss-scale state; host memory on the
  // CPU) when it runs and leaves variables and slots untouched when it is non-zero; slots are
  // created and the iteration count advances either way. On a GPU this enqueues only (except
  // clipping by norm, which reads the norms back).
  virtual void apply_gradients_unless_found_inf(const std::vector<Tensor>& grads,
                                                const std::vector<Tensor>& variables,
                                                const Tensor& found_inf) = 0;
  virtual void build(const std::vector<Tensor>& variables) = 0;
  // Throws (as apply_gradients would) when the arguments are invalid.
  virtual void check_arguments(const std::vector<Tensor>& grads,
                               const std::vector<Tensor>& variables) const = 0;
  virtual std::int64_t iterations() const = 0;
  virtual double learning_rate() const = 0;
  virtual void set_learning_rate(const LearningRate& learning_rate) = 0;
  virtual bool learning_rate_is_schedule() const = 0;
  virtual OptimizerState get_state() const = 0;
  virtual void set_state(const OptimizerState& state) = 0;
  // Optimizer::exclude_from_weight_decay; the default (an optimizer without weight decay) throws
  // ValueError naming it.
  virtual void exclude_from_weight_decay(const std::vector<Tensor>& var_list,
                                         const std::vector<std::string>& var_names);
  // The var_names excluded so far (the options' and exclude_from_weight_decay's), for the config.
  virtual std::vector<std::string> weight_decay_excluded_names() const { return {}; }

  // ---- CUDA graphs (src/models/graphed_step.h) ----
  // A graph replays the kernels of its capture with the capture's arguments. Empty when a step of
  // this optimizer, captured by GraphedTrainStep (which records the per-step values of
  // core::ReplayParameters and rewrites them before each replay), does on every replay exactly
  // what the eager step would (no host read); otherwise why not, as a clause ("it clips by norm,
  // which reads the norms back"). The default: not checked, so not.
  virtual std::string graph_replay_obstacle() const {
    return "the optimizer '" + name() + "' is not known to replay correctly";
  }
  // Sets the iteration count without a step: a replayed step advances it as the eager step
  // would, and a capture that failed undoes the count its step took. The default throws
  // std::logic_error (an optimizer with an obstacle above is never replayed).
  virtual void set_iterations(std::int64_t iterations);
};

// At most one of the three, each positive and finite (Keras raises the same way).
struct ClipOptions {
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
};

class SlotOptimizer : public OptimizerImpl {
 public:
  void apply_gradients(const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& variables) override;
  void apply_gradients_unless_found_inf(const std::vector<Tensor>& grads,
                                        const std::vector<Tensor>& variables,
                                        const Tensor& found_inf) override;
  void build(const std::vector<Tensor>& variables) override;
  void check_arguments(const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& variables) const override;
  std::int64_t iterations() const override { return iterations_; }
  double learning_rate() const override { return learning_rate_(iterations_); }
  void set_learning_rate(const LearningRate& learning_rate) override {
    learning_rate_ = learning_rate;
  }
  bool learning_rate_is_schedule() const override { return !learning_rate_.is_constant(); }
  OptimizerState get_state() const override;
  void set_state(const OptimizerState& state) override;
  void exclude_from_weight_decay(const std::vector<Tensor>& var_list,
                                 const std::vector<std::string>& var_names) override;
  std::vector<std::string> weight_decay_excluded_names() const override { return excluded_names_; }
  // Empty unless clipping by norm (it reads the norms back). The update constants, which change
  // with the iteration count (Adam's and AdamW's bias correction, a schedule) or with
  // set_learning_rate, are recorded by a captured step and recomputed for each replay (step()).
  std::string graph_replay_obstacle() const override;
  void set_iterations(std::int64_t iterations) override { iterations_ = iterations; }

  // One step's constants: the rule's (clip_limit filled in) and the same without weight decay (for
  // the variables excluded from it). What step() runs with at `iteration` (the count before the
  // step), eager or recorded, and what a replayed step's recomputation writes.
  struct StepConstants {
    kernel_math::UpdateConstants decayed, undecayed;
  };
  StepConstants step_constants(std::int64_t iteration) const;

 protected:
  // Validates the clip options (ValueError naming `display_name`, e.g. "SGD").
  SlotOptimizer(const char* display_name, LearningRate learning_rate, ClipOptions clip);

  // Slot names in the order the update receives them ("momentum", "velocity", ...): the slot
  // layout of the rule's kernel_math::UpdateKind.
  virtual std::vector<std::string> slot_names() const = 0;
  // The step's update rule, from the step's learning rate and the iteration count before the step
  // (Adam's bias corrections depend on it); the clip limit is filled in by SlotOptimizer.
  virtual kernel_math::UpdateRule update_rule(double learning_rate,
                                              std::int64_t iteration) const = 0;

  const char* display_name() const { return display_name_; }
  // Whether the optimizer has a weight_decay option (AdamW): exclude_from_weight_decay is refused
  // otherwise.
  virtual bool has_weight_decay() const { return false; }

 private:
  // One variable the optimizer has seen (or a restored entry still waiting for its variable).
  struct Entry {
    std::weak_ptr<TensorImpl> variable;  // empty for a restored entry not bound yet
    Shape shape;
    std::vector<Tensor> slots;  // float32, `shape`, one per slot_names(), on the variable's device
  };

  // Checks what apply_gradients, skip_step and build require of the variables themselves.
  void check_variables(const std::vector<Tensor>& variables) const;
  // The index in entries_ of each variable (creating or binding entries for new ones).
  std::vector<std::size_t> entries_for(const std::vector<Tensor>& variables);
  std::size_t entry_for(const Tensor& variable);
  // Moves the entry's slots to `device` where they are elsewhere (restored host copies).
  static void place_slots(Entry& entry, Device device);
  // The step on every device: the gradients prepared (float32, contiguous), their clipping factors,
  // then one multi-tensor update of every variable with a gradient (no host synchronisation on a
  // GPU unless clipping by norm); found_inf may be undefined (never skip).
  void step(const std::vector<Tensor>& grads, const std::vector<Tensor>& variables,
            const Tensor& found_inf);
  // Per-variable clipping factors (clipnorm, global_clipnorm) of float32 gradients on `device`;
  // 1 otherwise.
  std::vector<float> clip_scales(Device device, const std::vector<Tensor>& g32) const;
  // Whether `variable` is excluded from weight decay: listed in var_list, or its name's last part
  // (the weight: "gamma" of "layer_normalization/gamma") contains one of the var_names.
  bool excluded_from_weight_decay(const Tensor& variable) const;

  const char* display_name_;
  LearningRate learning_rate_;
  ClipOptions clip_;
  std::int64_t iterations_ = 0;
  std::vector<Entry> entries_;
  std::size_t bound_ = 0;  // entries_[0, bound_) are bound to a variable
  std::unordered_map<const TensorImpl*, std::size_t> index_;
  std::vector<std::weak_ptr<TensorImpl>> excluded_variables_;
  std::vector<std::string> excluded_names_;
};

enum class UpperBound { inclusive, exclusive };
// A ValueError naming the optimizer and option when `value` is not finite or outside [low, high]
// ([low, high) with UpperBound::exclusive).
void check_range(const char* optimizer, const char* option, double value, double low, double high,
                 UpperBound upper = UpperBound::inclusive);

}  // namespace mixprec::optimizers::detail
