// RMSprop (Keras 3 form, epsilon inside the square root): the formulas are in
// mixprec/optimizers/rmsprop.h, the loop in cpu::rmsprop_update.
#include "mixprec/optimizers/rmsprop.h"

#include <cmath>

#include "optimizers/optimizer_impl.h"
#include "optimizers/step_constants.h"

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
  void begin_step(double learning_rate, std::int64_t) override {
    step_ = detail::rmsprop_step(learning_rate, rho_, momentum_, epsilon_);
  }
  cuda::DeviceUpdate device_update() const override {
    return cuda::device_update(
        step_, momentum_ > 0.0 ? cuda::RmspropMomentum::with_momentum : cuda::RmspropMomentum::none,
        centered_ ? cuda::RmspropCentered::yes : cuda::RmspropCentered::no);
  }
  void update(const detail::UpdateArgs& a) override {
    std::size_t next = 1;
    float* momentum = momentum_ > 0.0 ? a.slots[next++] : nullptr;
    float* average = centered_ ? a.slots[next++] : nullptr;
    cpu::rmsprop_update(a.variable, a.gradient, a.slots[0], momentum, average, a.numel, a.transform,
                        step_);
  }

 private:
  double rho_, momentum_, epsilon_;
  bool centered_;
  cpu::RMSpropStep step_;
};

}  // namespace

RMSprop::RMSprop(RMSpropOptions options) : Optimizer(std::make_shared<RMSpropImpl>(options)) {
  impl()->options = options;
}

}  // namespace mixprec::optimizers
