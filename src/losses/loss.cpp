// The Loss handle, losses::get and the shared helpers of loss_helpers.h.
#include <algorithm>
#include <cctype>
#include <string>

#include "losses/loss_helpers.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/losses.h"
#include "mixprec/ops.h"
#include "ops/checks.h"

namespace mixprec::losses {

Loss::Loss(std::string name, Function function)
    : name_(std::move(name)), function_(std::move(function)) {
  if (!function_) throw ValueError("Loss '" + name_ + "': the loss function is empty");
}

Tensor Loss::operator()(const Tensor& y_true, const Tensor& y_pred) const {
  if (!function_) {
    throw ValueError(
        "use of an undefined Loss (default-constructed); create one, e.g. "
        "mixprec::losses::SparseCategoricalCrossentropy() or mixprec::losses::get(\"mse\")");
  }
  return function_(y_true, y_pred);
}

Loss get(std::string_view name) {
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (key == "sparse_categorical_crossentropy") return SparseCategoricalCrossentropy();
  if (key == "categorical_crossentropy") return CategoricalCrossentropy();
  if (key == "binary_crossentropy") return BinaryCrossentropy();
  if (key == "mean_squared_error" || key == "mse") return MeanSquaredError();
  throw ValueError("losses::get: unknown loss '" + std::string(name) +
                   "'; valid names: sparse_categorical_crossentropy, categorical_crossentropy, "
                   "binary_crossentropy, mean_squared_error (or mse)");
}

namespace detail {

namespace {
using ops::describe;  // "float16 (32, 10)"
}  // namespace

Tensor prediction(const char* loss, const Tensor& y_pred) {
  if (!y_pred.defined()) throw ValueError(std::string(loss) + ": y_pred is an undefined tensor");
  if (!is_floating(y_pred.dtype())) {
    throw DTypeError(std::string(loss) + ": y_pred must be floating point, got " +
                     describe(y_pred));
  }
  return y_pred.dtype() == DType::float64 ? y_pred : cast(y_pred, DType::float32);
}

Tensor target_like(const char* loss, const Tensor& y_true, const Tensor& pred) {
  if (!y_true.defined()) throw ValueError(std::string(loss) + ": y_true is an undefined tensor");
  Tensor t = y_true;
  const Shape& want = pred.shape();
  if (t.shape() != want) {
    // (N, 1) targets for (N,) predictions, or (N,) targets for (N, 1) predictions.
    const auto without_last = [](const Shape& s) {
      return Shape(std::vector<std::int64_t>(s.begin(), s.end() - 1));
    };
    const bool drop_last = t.rank() == want.rank() + 1 && t.shape()[t.rank() - 1] == 1 &&
                           without_last(t.shape()) == want;
    const bool add_last = t.rank() + 1 == want.rank() && want[want.rank() - 1] == 1 &&
                          without_last(want) == t.shape();
    if (!drop_last && !add_last) {
      throw ShapeError(std::string(loss) + ": y_true has shape " + y_true.shape().to_string() +
                       " but y_pred has shape " + want.to_string() +
                       "; they must match (up to one trailing axis of extent 1)");
    }
    t = reshape(t, want);
  }
  return t.dtype() == pred.dtype() ? t : cast(t, pred.dtype());
}

Tensor clip_probabilities(const Tensor& p) {
  // The bounds live where the probabilities do (a CUDA tensor cannot meet a CPU one).
  const Tensor low = scalar(kEpsilon, {.dtype = p.dtype(), .device = p.device()});
  const Tensor high = scalar(1.0 - kEpsilon, {.dtype = p.dtype(), .device = p.device()});
  return minimum(maximum(p, low), high);
}

Tensor log_probabilities(const Tensor& pred, FromLogits from_logits) {
  if (from_logits == FromLogits::yes) return log_softmax(pred, -1);
  return log(clip_probabilities(pred / sum(pred, {-1}, KeepDims::yes)));
}

}  // namespace detail

}  // namespace mixprec::losses
