// SGD with optional (Nesterov) momentum: the formulas are in mixprec/optimizers/sgd.h, the update
// rule in update_constants.h.
#include "mixprec/optimizers/sgd.h"

#include "optimizers/optimizer_impl.h"
#include "optimizers/update_constants.h"

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
  kernel_math::UpdateRule update_rule(double learning_rate, std::int64_t) const override {
    return detail::sgd_rule(learning_rate, momentum_, nesterov_);
  }

 private:
  double momentum_;
  bool nesterov_;
};

}  // namespace

SGD::SGD(SGDOptions options) : Optimizer(std::make_shared<SGDImpl>(options)) {
  impl()->options = options;
}

}  // namespace mixprec::optimizers
