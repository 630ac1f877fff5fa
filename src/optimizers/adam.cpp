// Adam and AdamW: the formulas are in mixprec/optimizers/adam.h, the update rule in
// update_constants.h.
#include "mixprec/optimizers/adam.h"

#include <cmath>

#include "optimizers/optimizer_impl.h"
#include "optimizers/update_constants.h"

namespace mixprec::optimizers {

namespace {

struct AdamConfig {
  double beta_1, beta_2, epsilon;
  double weight_decay;  // 0 for Adam
};

class AdamImpl final : public detail::SlotOptimizer {
 public:
  AdamImpl(const char* display_name, std::string name, LearningRate learning_rate,
           detail::ClipOptions clip, AdamConfig config)
      : SlotOptimizer(display_name, std::move(learning_rate), clip),
        name_(std::move(name)),
        config_(config) {
    using detail::UpperBound;
    detail::check_range(display_name, "beta_1", config.beta_1, 0.0, 1.0, UpperBound::exclusive);
    detail::check_range(display_name, "beta_2", config.beta_2, 0.0, 1.0, UpperBound::exclusive);
    detail::check_range(display_name, "epsilon", config.epsilon, 0.0, HUGE_VAL);
    detail::check_range(display_name, "weight_decay", config.weight_decay, 0.0, HUGE_VAL);
  }
  std::string name() const override { return name_; }

 protected:
  bool has_weight_decay() const override { return name_ == "adamw"; }
  std::vector<std::string> slot_names() const override { return {"momentum", "velocity"}; }
  kernel_math::UpdateRule update_rule(double learning_rate, std::int64_t iteration) const override {
    return detail::adam_rule(learning_rate, iteration, config_.beta_1, config_.beta_2,
                             config_.epsilon, config_.weight_decay);
  }

 private:
  std::string name_;
  AdamConfig config_;
};

}  // namespace

Adam::Adam(AdamOptions o)
    : Optimizer(std::make_shared<AdamImpl>(
          "Adam", "adam", o.learning_rate,
          detail::ClipOptions{o.clipnorm, o.clipvalue, o.global_clipnorm},
          AdamConfig{o.beta_1, o.beta_2, o.epsilon, 0.0})) {
  impl()->options = o;
}

AdamW::AdamW(AdamWOptions o)
    : Optimizer(std::make_shared<AdamImpl>(
          "AdamW", "adamw", o.learning_rate,
          detail::ClipOptions{o.clipnorm, o.clipvalue, o.global_clipnorm},
          AdamConfig{o.beta_1, o.beta_2, o.epsilon, o.weight_decay})) {
  if (!o.exclude_from_weight_decay.empty()) {
    impl()->exclude_from_weight_decay({}, o.exclude_from_weight_decay);
  }
  impl()->options = o;
}

}  // namespace mixprec::optimizers
