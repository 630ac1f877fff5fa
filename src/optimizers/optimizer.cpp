// The Optimizer handle and SlotOptimizer, the machinery shared by SGD, Adam, AdamW and RMSprop.
#include "mixprec/optimizers/optimizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>

#include "backend/backend.h"
#include "backend/training_kernels.h"
#include "core/replay_parameters.h"
#include "core/tensor_impl.h"
#include "layers/variable_names.h"
#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/optimizers.h"
#include "ops/checks.h"
#include "optimizers/optimizer_impl.h"

namespace mixprec::optimizers {

namespace {

using ops::describe;  // "float16 (32, 10)"

// A float32 host copy with its own storage (exported and imported state must not alias live
// slots); slots on a GPU are copied back (a synchronisation).
Tensor clone_float32(const Tensor& t) {
  const Tensor src = t.detach().to(Device::cpu()).to(DType::float32).contiguous();
  Tensor out = empty(t.shape());
  std::memcpy(out.data_ptr(), src.data_ptr(), out.nbytes());
  return out;
}

std::string slot_key(const std::string& slot, std::size_t variable_index) {
  return slot + "/" + std::to_string(variable_index);
}

}  // namespace

// ---- the handle ----

Optimizer::Optimizer(std::shared_ptr<detail::OptimizerImpl> impl) : impl_(std::move(impl)) {}

detail::OptimizerImpl& Optimizer::checked_impl() const {
  if (!impl_) {
    throw ValueError(
        "use of an undefined Optimizer (default-constructed); create one, e.g. "
        "mixprec::optimizers::RMSprop() or mixprec::optimizers::get(\"adam\")");
  }
  return *impl_;
}

std::string Optimizer::name() const { return checked_impl().name(); }
void Optimizer::apply_gradients(const std::vector<Tensor>& grads,
                                const std::vector<Tensor>& variables) {
  checked_impl().apply_gradients(grads, variables);
}
void Optimizer::build(const std::vector<Tensor>& variables) { checked_impl().build(variables); }
std::int64_t Optimizer::iterations() const { return checked_impl().iterations(); }
double Optimizer::learning_rate() const { return checked_impl().learning_rate(); }
bool Optimizer::learning_rate_is_schedule() const {
  return checked_impl().learning_rate_is_schedule();
}
void Optimizer::set_learning_rate(const LearningRate& learning_rate) {
  checked_impl().set_learning_rate(learning_rate);
}
void Optimizer::exclude_from_weight_decay(const std::vector<Tensor>& var_list,
                                          const std::vector<std::string>& var_names) {
  checked_impl().exclude_from_weight_decay(var_list, var_names);
}
OptimizerState Optimizer::get_state() const { return checked_impl().get_state(); }
void Optimizer::set_state(const OptimizerState& state) { checked_impl().set_state(state); }

Optimizer get(std::string_view name) {
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (key == "sgd") return SGD();
  if (key == "adam") return Adam();
  if (key == "adamw") return AdamW();
  if (key == "rmsprop") return RMSprop();
  throw ValueError("optimizers::get: unknown optimizer '" + std::string(name) +
                   "'; valid names: sgd, adam, adamw, rmsprop");
}

namespace detail {

void OptimizerImpl::exclude_from_weight_decay(const std::vector<Tensor>&,
                                              const std::vector<std::string>&) {
  throw ValueError("optimizer '" + name() +
                   "' has no weight decay, so nothing can be excluded from it; use AdamW (or leave "
                   "exclude_from_weight_decay out)");
}

void check_range(const char* optimizer, const char* option, double value, double low, double high,
                 UpperBound upper) {
  const bool ok = std::isfinite(value) && value >= low &&
                  (upper == UpperBound::inclusive ? value <= high : value < high);
  if (!ok) {
    throw ValueError(std::string(optimizer) + ": " + option + " must be in [" +
                     std::to_string(low) + ", " + std::to_string(high) +
                     (upper == UpperBound::inclusive ? "]" : ")") + ", got " +
                     std::to_string(value));
  }
}

// ---- SlotOptimizer ----

SlotOptimizer::SlotOptimizer(const char* display_name, LearningRate learning_rate, ClipOptions clip)
    : display_name_(display_name), learning_rate_(std::move(learning_rate)), clip_(clip) {
  const int count = static_cast<int>(clip.clipnorm.has_value()) +
                    static_cast<int>(clip.clipvalue.has_value()) +
                    static_cast<int>(clip.global_clipnorm.has_value());
  if (count > 1) {
    throw ValueError(std::string(display_name) +
                     ": only one of clipnorm, clipvalue and global_clipnorm can be set (as in "
                     "Keras); keep the one you mean");
  }
  for (const auto& [option, value] :
       {std::pair{"clipnorm", clip.clipnorm}, std::pair{"clipvalue", clip.clipvalue},
        std::pair{"global_clipnorm", clip.global_clipnorm}}) {
    if (value && !(std::isfinite(*value) && *value > 0.0)) {
      throw ValueError(std::string(display_name) + ": " + option +
                       " must be positive and finite, got " + std::to_string(*value) +
                       "; leave it unset for no clipping");
    }
  }
}

void SlotOptimizer::exclude_from_weight_decay(const std::vector<Tensor>& var_list,
                                              const std::vector<std::string>& var_names) {
  if (!has_weight_decay()) OptimizerImpl::exclude_from_weight_decay(var_list, var_names);
  for (std::size_t i = 0; i < var_list.size(); ++i) {
    if (!var_list[i].defined()) {
      throw ValueError(std::string(display_name_) + ": exclude_from_weight_decay: var_list[" +
                       std::to_string(i) + "] is an undefined tensor");
    }
  }
  for (const std::string& n : var_names) {
    if (n.empty()) {
      throw ValueError(std::string(display_name_) +
                       ": exclude_from_weight_decay: an empty var_names entry would match every "
                       "variable; name the weights to exclude (\"bias\", \"gamma\", ...)");
    }
  }
  for (const Tensor& v : var_list) excluded_variables_.push_back(v.impl_ptr());
  for (const std::string& n : var_names) {
    if (std::find(excluded_names_.begin(), excluded_names_.end(), n) == excluded_names_.end()) {
      excluded_names_.push_back(n);
    }
  }
}

bool SlotOptimizer::excluded_from_weight_decay(const Tensor& variable) const {
  for (const auto& w : excluded_variables_) {
    if (w.lock() == variable.impl_ptr()) return true;
  }
  if (excluded_names_.empty()) return false;
  // Keras 3 matches var_names against variable.name, the weight's own name ("bias"), not its
  // path ("dense_1/bias").
  const std::string full = layers::detail::variable_name(variable);
  const std::size_t slash = full.rfind('/');
  const std::string_view weight = slash == std::string::npos
                                      ? std::string_view(full)
                                      : std::string_view(full).substr(slash + 1);
  for (const std::string& n : excluded_names_) {
    if (weight.find(n) != std::string_view::npos) return true;
  }
  return false;
}

void SlotOptimizer::check_variables(const std::vector<Tensor>& variables) const {
  std::unordered_set<const TensorImpl*> seen;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const Tensor& v = variables[i];
    const std::string which = std::string(display_name_) + ": variable " + std::to_string(i);
    if (!v.defined()) throw ValueError(which + " is an undefined tensor");
    if (v.dtype() != DType::float32) {
      throw DTypeError(which + " is " + describe(v) +
                       "; optimizers update float32 master variables (a mixed policy stores "
                       "variables in float32 and computes in 16 bits)");
    }
    if (!(v.device() == variables[0].device())) {
      throw DeviceError(which + " is on " + v.device().to_string() + " but variable 0 is on " +
                        variables[0].device().to_string() +
                        "; one optimizer updates variables on one device: move the model (or "
                        "every variable) to the same device");
    }
    if (!v.is_leaf()) {
      throw ValueError(which + " (" + describe(v) +
                       ") is the output of a recorded op, not a leaf variable; pass the "
                       "variables themselves (model.trainable_variables())");
    }
    if (!v.is_contiguous()) {
      throw ValueError(which + " (" + describe(v) +
                       ") is a strided view; optimizers update contiguous variables in place");
    }
    if (!seen.insert(v.impl()).second) {
      throw ValueError(which + " appears more than once in the variable list");
    }
  }
}

void SlotOptimizer::check_arguments(const std::vector<Tensor>& grads,
                                    const std::vector<Tensor>& variables) const {
  if (grads.size() != variables.size()) {
    throw ValueError(std::string(display_name_) + ": apply_gradients got " +
                     std::to_string(grads.size()) + " gradients for " +
                     std::to_string(variables.size()) +
                     " variables; pass one gradient (or an undefined Tensor) per variable, in the "
                     "same order");
  }
  check_variables(variables);
  bool any = false;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    any = true;
    const std::string which = std::string(display_name_) + ": gradient " + std::to_string(i);
    if (!is_floating(g.dtype())) {
      throw DTypeError(which + " is " + describe(g) +
                       "; gradients must be floating point (float32, float16, bfloat16, float64)");
    }
    if (g.shape() != variables[i].shape()) {
      throw ShapeError(which + " has shape " + g.shape().to_string() + " but variable " +
                       std::to_string(i) + " has shape " + variables[i].shape().to_string() +
                       "; gradients and variables must be given in the same order");
    }
    if (!(g.device() == variables[i].device())) {
      throw DeviceError(which + " is on " + g.device().to_string() + " but variable " +
                        std::to_string(i) + " is on " + variables[i].device().to_string() +
                        "; compute the gradients on the variables' device");
    }
  }
  if (!variables.empty() && !any) {
    throw ValueError(std::string(display_name_) +
                     ": no gradient was provided for any variable (all are undefined); does the "
                     "loss depend on the variables?");
  }
}

std::size_t SlotOptimizer::entry_for(const Tensor& variable) {
  const TensorImpl* key = variable.impl();
  if (auto it = index_.find(key); it != index_.end()) {
    if (entries_[it->second].variable.lock() == variable.impl_ptr()) return it->second;
    index_.erase(it);  // a dead variable's address, reused by a new tensor
  }
  const std::size_t index = bound_;
  if (index < entries_.size()) {
    // A restored entry waiting for its variable: variables bind in the order they are seen.
    if (entries_[index].shape != variable.shape()) {
      throw ShapeError(std::string(display_name_) + ": the restored state of variable " +
                       std::to_string(index) + " has shape " + entries_[index].shape.to_string() +
                       " but the variable bound to it has shape " + variable.shape().to_string() +
                       "; pass the variables in the order they had when the state was saved");
    }
  } else {
    Entry entry;
    entry.shape = variable.shape();
    for (std::size_t k = 0; k < slot_names().size(); ++k) {
      entry.slots.push_back(zeros(entry.shape, {.device = variable.device()}));
    }
    entries_.push_back(std::move(entry));
  }
  entries_[index].variable = variable.impl_ptr();
  ++bound_;
  index_[key] = index;
  return index;
}

void SlotOptimizer::place_slots(Entry& entry, Device device) {
  // Restored slots are host tensors: they move to a GPU variable's device once, on first use.
  for (Tensor& slot : entry.slots) {
    if (!(slot.device() == device)) slot = slot.to(device);
  }
}

void OptimizerImpl::set_iterations(std::int64_t) {
  throw std::logic_error("optimizer '" + name() + "': set_iterations is not supported");
}

SlotOptimizer::StepConstants SlotOptimizer::step_constants(std::int64_t iteration) const {
  StepConstants c;
  c.decayed = update_rule(learning_rate_(iteration), iteration).constants;
  if (clip_.clipvalue) c.decayed.clip_limit = static_cast<float>(*clip_.clipvalue);
  c.undecayed = c.decayed;
  c.undecayed.decay = 0.0f;
  return c;
}

std::string SlotOptimizer::graph_replay_obstacle() const {
  // The update constants (Adam's and AdamW's bias correction, a schedule's learning rate, a
  // learning rate set between steps) are recorded and rewritten before every replay (step()); the
  // formula itself (kind) never changes. Clipping by norm reads the norms back to the host.
  if (clip_.clipnorm || clip_.global_clipnorm) {
    return std::string(display_name_) + " clips by norm, which reads the norms back every step";
  }
  return {};
}

std::vector<std::size_t> SlotOptimizer::entries_for(const std::vector<Tensor>& variables) {
  std::vector<std::size_t> indices;
  indices.reserve(variables.size());
  for (const Tensor& v : variables) {
    indices.push_back(entry_for(v));
    place_slots(entries_[indices.back()], v.device());
  }
  return indices;
}

void SlotOptimizer::build(const std::vector<Tensor>& variables) {
  check_variables(variables);
  entries_for(variables);
}

void SlotOptimizer::apply_gradients(const std::vector<Tensor>& grads,
                                    const std::vector<Tensor>& variables) {
  check_arguments(grads, variables);
  step(grads, variables, Tensor());
}

void SlotOptimizer::apply_gradients_unless_found_inf(const std::vector<Tensor>& grads,
                                                     const std::vector<Tensor>& variables,
                                                     const Tensor& found_inf) {
  check_arguments(grads, variables);
  step(grads, variables, found_inf);
}

std::vector<float> SlotOptimizer::clip_scales(Device device, const std::vector<Tensor>& g32) const {
  // Clipping becomes a per-variable factor applied inside the fused update, so the gradients are
  // read once more at most (for their norms) and never rewritten. Keras's g * c / max(norm, c) is
  // g * min(1, c / norm). On a GPU the norms are read back: clipping by norm synchronises once a
  // step.
  std::vector<float> scales(g32.size(), 1.0f);
  if (!clip_.clipnorm && !clip_.global_clipnorm) return scales;
  const std::vector<double> sums = backend_for(device).training->sums_of_squares(device, g32);
  if (clip_.clipnorm) {
    const double c = *clip_.clipnorm;
    for (std::size_t i = 0; i < g32.size(); ++i) {
      if (g32[i].defined()) scales[i] = static_cast<float>(c / std::max(std::sqrt(sums[i]), c));
    }
  } else {
    const double c = *clip_.global_clipnorm;
    double total = 0.0;
    for (double s : sums) total += s;
    const float scale = static_cast<float>(c / std::max(std::sqrt(total), c));
    for (float& s : scales) s = scale;
  }
  return scales;
}

void SlotOptimizer::step(const std::vector<Tensor>& grads, const std::vector<Tensor>& variables,
                         const Tensor& found_inf) {
  NoGradScope no_grad;
  const std::vector<std::size_t> indices = entries_for(variables);
  const std::size_t count = variables.size();
  if (count == 0) {
    ++iterations_;
    return;
  }
  const Device device = variables[0].device();
  // Contiguous float32 gradients (16-bit and float64 ones converted once; enqueued on a GPU).
  std::vector<Tensor> g32(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (grads[i].defined()) g32[i] = grads[i].detach().to(DType::float32).contiguous();
  }
  const std::vector<float> scales = clip_scales(device, g32);
  const StepConstants constants = step_constants(iterations_);
  kernel_math::UpdateRule rule = update_rule(learning_rate_(iterations_), iterations_);
  rule.constants = constants.decayed;
  kernel_math::UpdateRule no_decay = rule;
  no_decay.constants = constants.undecayed;
  // A step captured for CUDA graph replays (models::GraphedTrainStep): the kernels read the
  // constants from the replay buffer, where each replay writes its own step's, recomputed by
  // step_constants() for the iteration count of that step (Adam's bias correction, a schedule).
  core::ReplayParameters* replay = core::ReplayParameters::active();
  if (replay != nullptr && !(replay->device() == device)) replay = nullptr;
  if (replay != nullptr) {
    const StepConstants* in_buffer = replay->record_value<StepConstants>(
        constants, [this] { return step_constants(iterations_); });
    if (in_buffer != nullptr) {
      rule.constants_in_memory = &in_buffer->decayed;
      no_decay.constants_in_memory = &in_buffer->undecayed;
    }
  }
  // Variables excluded from weight decay take the same rule with no decay, in a second update:
  // the excluded ones get the bits of the optimizer without weight decay (Adam for AdamW). A
  // recorded step always splits (its decay may be 0 now and not at a later replay, e.g. under a
  // warm-up schedule); with a decay of 0 both updates compute the same bits.
  const bool split = (replay != nullptr || rule.constants.decay != 0.0f) &&
                     (!excluded_variables_.empty() || !excluded_names_.empty());
  std::vector<UpdateOperand> operands, undecayed;
  operands.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (!g32[i].defined()) continue;
    const Entry& entry = entries_[indices[i]];
    UpdateOperand op{
        .variable = variables[i], .gradient = g32[i], .clip_scale = scales[i], .slots = {}};
    for (std::size_t k = 0; k < entry.slots.size() && k < op.slots.size(); ++k) {
      op.slots[k] = entry.slots[k];
    }
    (split && excluded_from_weight_decay(variables[i]) ? undecayed : operands)
        .push_back(std::move(op));
  }
  // On a GPU the temporaries (g32) may be freed when this returns: the caching allocator reuses
  // their blocks only for work queued later on the same stream.
  const TrainingKernels& kernels = *backend_for(device).training;
  if (!operands.empty()) kernels.multi_tensor_update(rule, operands, found_inf);
  if (!undecayed.empty()) kernels.multi_tensor_update(no_decay, undecayed, found_inf);
  ++iterations_;
}

OptimizerState SlotOptimizer::get_state() const {
  OptimizerState state;
  state.name = name();
  state.iterations = iterations_;
  const std::vector<std::string> names = slot_names();
  for (std::size_t v = 0; v < entries_.size(); ++v) {
    for (std::size_t k = 0; k < names.size(); ++k) {
      state.slots.push_back({slot_key(names[k], v), clone_float32(entries_[v].slots[k])});
    }
  }
  return state;
}

void SlotOptimizer::set_state(const OptimizerState& state) {
  const std::string who = std::string(display_name_) + ": set_state";
  if (state.name != name()) {
    throw ValueError(who + ": the state was exported by a '" + state.name +
                     "' optimizer, this one is '" + name() +
                     "'; restore into an optimizer of the same kind");
  }
  if (state.iterations < 0) {
    throw ValueError(who + ": iterations must be non-negative, got " +
                     std::to_string(state.iterations));
  }
  if (!state.scalars.empty() || !state.inner.empty()) {
    throw ValueError(who + ": the state has scalars or an inner state, which a '" + name() +
                     "' optimizer does not have");
  }
  const std::vector<std::string> names = slot_names();
  const std::size_t per_variable = names.size();
  if (per_variable == 0 ? !state.slots.empty() : state.slots.size() % per_variable != 0) {
    throw ValueError(who + ": got " + std::to_string(state.slots.size()) + " slots, expected " +
                     std::to_string(per_variable) + " per variable");
  }
  const std::size_t variables = per_variable == 0 ? 0 : state.slots.size() / per_variable;

  // Validate everything before changing anything.
  for (std::size_t v = 0; v < variables; ++v) {
    const Tensor& first = state.slots[v * per_variable].value;
    for (std::size_t k = 0; k < per_variable; ++k) {
      const NamedTensor& slot = state.slots[v * per_variable + k];
      const std::string expected = slot_key(names[k], v);
      if (slot.name != expected) {
        throw ValueError(who + ": slot " + std::to_string(v * per_variable + k) + " is named '" +
                         slot.name + "', expected '" + expected + "'");
      }
      if (!slot.value.defined() || slot.value.dtype() != DType::float32) {
        throw DTypeError(who + ": slot '" + slot.name + "' must be a float32 tensor, got " +
                         (slot.value.defined() ? describe(slot.value) : "an undefined tensor"));
      }
      if (slot.value.shape() != first.shape()) {
        throw ShapeError(who + ": slot '" + slot.name + "' has shape " +
                         slot.value.shape().to_string() + " but slot '" +
                         state.slots[v * per_variable].name + "' has shape " +
                         first.shape().to_string());
      }
    }
    if (v < entries_.size() && entries_[v].shape != first.shape()) {
      throw ShapeError(who + ": the state of variable " + std::to_string(v) + " has shape " +
                       first.shape().to_string() + " but that variable has shape " +
                       entries_[v].shape.to_string());
    }
  }

  // Entries past the state's variables are dropped (as if never seen); the others keep their
  // binding and take the restored values.
  if (entries_.size() > variables) {
    entries_.resize(variables);
    std::erase_if(index_, [&](const auto& item) { return item.second >= variables; });
    bound_ = std::min(bound_, variables);
  }
  for (std::size_t v = 0; v < variables; ++v) {
    if (v == entries_.size()) {
      entries_.push_back(Entry{});
      entries_.back().shape = state.slots[v * per_variable].value.shape();
    }
    entries_[v].slots.clear();
    for (std::size_t k = 0; k < per_variable; ++k) {
      entries_[v].slots.push_back(clone_float32(state.slots[v * per_variable + k].value));
    }
  }
  iterations_ = state.iterations;
}

}  // namespace detail

}  // namespace mixprec::optimizers
