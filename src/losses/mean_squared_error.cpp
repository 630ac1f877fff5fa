// Mean squared error: mean((y_true - y_pred)^2) over every element, in float32 (float64 for a
// float64 y_pred).
#include "losses/loss_helpers.h"
#include "mixprec/losses.h"
#include "mixprec/ops.h"

namespace mixprec::losses {

MeanSquaredError::MeanSquaredError()
    : Loss("mean_squared_error", [](const Tensor& y_true, const Tensor& y_pred) {
        constexpr const char* kLoss = "MeanSquaredError";
        const Tensor pred = detail::prediction(kLoss, y_pred);
        const Tensor d = pred - detail::target_like(kLoss, y_true, pred);
        return mean(d * d);
      }) {
  config_ =
      Config{.class_name = "MeanSquaredError", .from_logits = false, .ignore_class = std::nullopt};
}

}  // namespace mixprec::losses
