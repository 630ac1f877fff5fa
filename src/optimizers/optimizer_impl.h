// Behind the Optimizer handle. OptimizerImpl is the interface every optimizer implements
// (LossScaleOptimizer included); SlotOptimizer is the shared machinery of SGD, Adam, AdamW and
// RMSprop: argument checks, the slot registry, gradient preparation and clipping, the iteration
// count. A concrete optimizer supplies its slot names, one fused update per variable (CPU) and the
// formula and constants of the multi-tensor update (CUDA: backend/cuda/optimizers.h).
#pragma once

#include <any>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/optimizer_kernels.h"
#include "backend/cuda/optimizers.h"
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
  // A step that updates nothing (LossScaleOptimizer on non-finite gradients): checks the
  // arguments, creates slots for new variables, advances the iteration count.
  virtual void skip_step(const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& variables) = 0;
  // The step of a LossScaleOptimizer on CUDA variables: the update kernels read *found_inf (a
  // device int) and leave variables and slots untouched when it is non-zero; iterations advance
  // either way, as skip_step does. Enqueues only (except clipping by norm, which reads the norms
  // back). Throws DeviceError for CPU variables.
  virtual void apply_gradients_unless_found_inf(const std::vector<Tensor>& grads,
                                                const std::vector<Tensor>& variables,
                                                const int* found_inf) = 0;
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
};

// At most one of the three, each positive and finite (Keras raises the same way).
struct ClipOptions {
  std::optional<double> clipnorm;
  std::optional<double> clipvalue;
  std::optional<double> global_clipnorm;
};

// What one variable's update gets: n float32 elements of the variable and its gradient, the
// gradient transform (clipping) and the variable's slots in slot_names() order.
struct UpdateArgs {
  float* variable = nullptr;
  const float* gradient = nullptr;
  std::int64_t numel = 0;
  cpu::GradientTransform transform;
  std::span<float* const> slots;
};

class SlotOptimizer : public OptimizerImpl {
 public:
  void apply_gradients(const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& variables) override;
  void skip_step(const std::vector<Tensor>& grads, const std::vector<Tensor>& variables) override;
  void apply_gradients_unless_found_inf(const std::vector<Tensor>& grads,
                                        const std::vector<Tensor>& variables,
                                        const int* found_inf) override;
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

 protected:
  // Validates the clip options (ValueError naming `display_name`, e.g. "SGD").
  SlotOptimizer(const char* display_name, LearningRate learning_rate, ClipOptions clip);

  // Slot names in the order the update receives them ("momentum", "velocity", ...).
  virtual std::vector<std::string> slot_names() const = 0;
  // Called once per step before the updates, with the step's learning rate and the iteration
  // count before the step (Adam's bias corrections depend on it).
  virtual void begin_step(double learning_rate, std::int64_t iteration) = 0;
  virtual void update(const UpdateArgs& args) = 0;
  // The multi-tensor update of CUDA variables with the constants of the last begin_step (the
  // clip limit is filled in by SlotOptimizer).
  virtual cuda::DeviceUpdate device_update() const = 0;

  const char* display_name() const { return display_name_; }

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
  // The CUDA step: one multi-tensor update of every variable with a gradient (no host
  // synchronisation unless clipping by norm); found_inf may be null.
  void apply_on_device(const std::vector<Tensor>& grads, const std::vector<Tensor>& variables,
                       const int* found_inf);
  // Per-variable clipping factors (clipnorm, global_clipnorm) of float32 gradients; 1 otherwise.
  std::vector<float> clip_scales(const std::vector<Tensor>& g32) const;

  const char* display_name_;
  LearningRate learning_rate_;
  ClipOptions clip_;
  std::int64_t iterations_ = 0;
  std::vector<Entry> entries_;
  std::size_t bound_ = 0;  // entries_[0, bound_) are bound to a variable
  std::unordered_map<const TensorImpl*, std::size_t> index_;
};

enum class UpperBound { inclusive, exclusive };
// A ValueError naming the optimizer and option when `value` is not finite or outside [low, high]
// ([low, high) with UpperBound::exclusive).
void check_range(const char* optimizer, const char* option, double value, double low, double high,
                 UpperBound upper = UpperBound::inclusive);

}  // namespace mixprec::optimizers::detail
