// RMSprop (Keras 3 form, epsilon inside the square root): the formulas are in
// mixprec/optimizers/rmsprop.h, the update rule in update_constants.h.
#include "mixprec/optimizers/rmsprop.h"

#include <cmath>

#include "optimizers/optimizer_impl.h"
#include "optimizers/update_constants.h"

namespace mixprec::optimizers {

namespace {

class RMSpropImpl final : public detail::SlotOptimizer {
 public:
  explicit RMSpropImpl(const RMSpropOptions& o)
      : SlotOptimizer("RMSprop", o.learning_rate, {o.clipnorm, o.clipvalue, o.global_clipnorm}),
        rho_(o.rho),
        momentum_(o.momentum),
        epsilon_(o.epsilon),
        centered_(o.centered) {
    detail::check_range("RMSprop", "rho", o.rho, 0.0, 1.0);
    detail::check_range("RMSprop", "momentum", o.momentum, 0.0, HUGE_VAL);
    detail::check_range("RMSprop", "epsilon", o.epsilon, 0.0, HUGE_VAL);
  }
  std::string name() const override { return "rmsprop"; }

 protected:
  std::vector<std::string> slot_names() const override {
    std::vector<std::string> names = {"velocity"};
    if (momentum_ > 0.0) names.emplace_back("momentum");
    if (centered_) names.emplace_back("average_gradient");
    return names;
  }
  kernel_math::UpdateRule update_rule(double learning_rate, std::int64_t) const override {
    return detail::rmsprop_rule(
        learning_rate, rho_, momentum_, epsilon_,
        momentum_ > 0.0 ? detail::RmspropMomentum::with_momentum : detail::RmspropMomentum::none,
        centered_ ? detail::RmspropCentered::yes : detail::RmspropCentered::no);
  }

 private:
  double rho_, momentum_, epsilon_;
  bool centered_;
};

}  // namespace

RMSprop::RMSprop(RMSpropOptions options) : Optimizer(std::make_shared<RMSpropImpl>(options)) {
  impl()->options = options;
}

}  // namespace mixprec::optimizers
