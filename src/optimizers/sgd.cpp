// SGD with optional (Nesterov) momentum: the formulas are in mixprec/optimizers/sgd.h, the loop in
// cpu::sgd_update.
#include "mixprec/optimizers/sgd.h"

#include "optimizers/optimizer_impl.h"
#include "optimizers/step_constants.h"

namespace mixprec::optimizers {

namespace {

class SGDImpl final : public detail::SlotOptimizer {
 public:
  explicit SGDImpl(const SGDOptions& o)
      : SlotOptimizer("SGD", o.learning_rate, {o.clipnorm, o.clipvalue, o.global_clipnorm}),
        momentum_(o.momentum),
        nesterov_(o.nesterov) {
    detail::check_range("SGD", "momentum", o.momentum, 0.0, 1.0);
  }
  std::string name() const override { return "sgd"; }

 protected:
  std::vector<std::string> slot_names() const override {
    if (momentum_ == 0.0) return {};
    return {"momentum"};
  }
  void begin_step(double learning_rate, std::int64_t) override {
    step_ = detail::sgd_step(learning_rate, momentum_, nesterov_);
  }
  cuda::DeviceUpdate device_update() const override {
    // The slots decide the variant, as on the CPU (a momentum slot exists iff momentum != 0).
    const cuda::SgdVariant variant = momentum_ == 0.0 ? cuda::SgdVariant::plain
                                     : nesterov_      ? cuda::SgdVariant::nesterov
                                                      : cuda::SgdVariant::momentum;
    return cuda::device_update(step_, variant);
  }
  void update(const detail::UpdateArgs& a) override {
    cpu::sgd_update(a.variable, a.gradient, a.slots.empty() ? nullptr : a.slots[0], a.numel,
                    a.transform, step_);
  }

 private:
  double momentum_;
  bool nesterov_;
  cpu::SGDStep step_;
};

}  // namespace

SGD::SGD(SGDOptions options) : Optimizer(std::make_shared<SGDImpl>(options)) {
  impl()->options = options;
}

}  // namespace mixprec::optimizers
