// Sparse categorical, categorical and binary crossentropy (Keras formulas; see mixprec/losses.h).
// Each is a short composition of differentiable ops on a float32 (or float64) y_pred.
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device_services.h"
#include "losses/loss_helpers.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/losses.h"
#include "mixprec/ops.h"
#include "ops/checks.h"
#include "ops/sparse_crossentropy.h"

namespace mixprec::losses {

namespace {

using detail::FromLogits;

FromLogits from(bool from_logits) { return from_logits ? FromLogits::yes : FromLogits::no; }

using ops::describe;  // "float16 (32, 10)"

// y_pred (..., C) -> C, checking that there is a non-empty class axis.
std::int64_t class_count(const char* loss, const Tensor& pred) {
  if (pred.rank() < 1 || pred.shape()[pred.rank() - 1] < 1) {
    throw ShapeError(std::string(loss) +
                     ": y_pred must have a class axis last, (batch, classes), " + "got shape " +
                     pred.shape().to_string());
  }
  return pred.shape()[pred.rank() - 1];
}

// Sparse labels: integer class indices of shape y_pred.shape[:-1] (or with a trailing 1), each in
// [0, classes). Returns them reshaped to y_pred.shape[:-1]. The range is checked here where
// reading the labels back costs nothing, on a device that runs work synchronously (the CPU: a
// ValueError naming the first bad label); on a device that queues work (a GPU) labels get the
// dtype and shape checks only, since reading them back would cost a host sync every step: there
// one_hot turns a bad label's row into NaN, so the loss comes out NaN (a loss-scaled step is then
// skipped).
Tensor checked_labels(const char* loss, const Tensor& labels, const Tensor& pred,
                      std::int64_t classes, std::optional<std::int64_t> ignore_class) {
  if (!labels.defined()) throw ValueError(std::string(loss) + ": y_true is an undefined tensor");
  const DType d = labels.dtype();
  if (d != DType::int32 && d != DType::int64 && d != DType::uint8) {
    throw DTypeError(std::string(loss) + ": y_true must hold integer class indices (int32, int64 " +
                     "or uint8), got " + describe(labels) +
                     "; cast with .to(mixprec::kInt64), or use CategoricalCrossentropy for " +
                     "one-hot targets");
  }
  const std::vector<std::int64_t> dims(pred.shape().begin(), pred.shape().end() - 1);
  const Shape batch_shape(dims);
  std::vector<std::int64_t> with_one = dims;
  with_one.push_back(1);
  if (labels.shape() != batch_shape && labels.shape() != Shape(with_one)) {
    throw ShapeError(std::string(loss) + ": y_true has shape " + labels.shape().to_string() +
                     " but y_pred has shape " + pred.shape().to_string() + "; expected labels of " +
                     "shape " + batch_shape.to_string() + " or " + Shape(with_one).to_string());
  }
  if (backend_for(labels.device()).services->execution == Execution::queued) {
    return reshape(labels, batch_shape);
  }
  const std::vector<std::int64_t> values = labels.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (ignore_class && values[i] == *ignore_class) continue;
    if (values[i] < 0 || values[i] >= classes) {
      throw ValueError(std::string(loss) + ": label " + std::to_string(values[i]) +
                       " (at flat position " + std::to_string(i) + ") is out of range for " +
                       std::to_string(classes) + " classes (valid: 0 to " +
                       std::to_string(classes - 1) +
                       (ignore_class ? ", or the ignore_class " + std::to_string(*ignore_class)
                                     : std::string()) +
                       "); set ignore_class to the label of positions that should not count");
    }
  }
  return reshape(labels, batch_shape);
}

}  // namespace

SparseCategoricalCrossentropy::SparseCategoricalCrossentropy(
    SparseCategoricalCrossentropyOptions options)
    : Loss("sparse_categorical_crossentropy",
           [logits = from(options.from_logits), ignore = options.ignore_class](
               const Tensor& y_true, const Tensor& y_pred) {
             constexpr const char* kLoss = "SparseCategoricalCrossentropy";
             if (!y_pred.defined()) {
               throw ValueError(std::string(kLoss) + ": y_pred is an undefined tensor");
             }
             if (!is_floating(y_pred.dtype())) {
               throw DTypeError(std::string(kLoss) + ": y_pred must be floating point, got " +
                                describe(y_pred));
             }
             const std::int64_t classes = class_count(kLoss, y_pred);
             // (...) integer labels, range-checked on the CPU (ignore_class allowed).
             const Tensor labels = checked_labels(kLoss, y_true, y_pred, classes, ignore);
             if (logits == FromLogits::yes) {
               // One fused op on the logits in their own dtype (float32 inside, no float32 copy).
               return ops::sparse_softmax_crossentropy(y_pred, labels, ignore);
             }
             const Tensor pred = detail::prediction(kLoss, y_pred);  // (..., C)
             const Tensor log_p = detail::log_probabilities(pred, logits);
             if (!ignore) {
               // -log p[label] per sample, picked out by a one-hot mask.
               const Tensor picked = sum(one_hot(labels, classes, pred.dtype()) * log_p, {-1});
               return neg(mean(picked));
             }
             // Keras 3's masking: ignored positions take label 0 and weight 0, and the sum is
             // divided by the number of the others (at least 1, so all-ignored gives 0). All on the
             // device: nothing is read back. Labels are compared in the compute dtype (exact for
             // |label| < 2^24).
             const TensorOptions on{.dtype = pred.dtype(), .device = pred.device()};
             const Tensor labels_f = cast(labels, pred.dtype());
             const Tensor valid =
                 cast(not_equal(labels_f, scalar(static_cast<double>(*ignore), on)), pred.dtype());
             const Tensor safe = cast(labels_f * valid, DType::int64);
             const Tensor picked =
                 sum(one_hot(safe, classes, pred.dtype()) * log_p, {-1}) * valid;  // (...)
             const Tensor count = maximum(sum(valid), scalar(1.0, on));
             return neg(sum(picked) / count);
           }) {
  config_ = Config{"SparseCategoricalCrossentropy", options.from_logits, options.ignore_class};
}

CategoricalCrossentropy::CategoricalCrossentropy(CategoricalCrossentropyOptions options)
    : Loss("categorical_crossentropy",
           [logits = from(options.from_logits)](const Tensor& y_true, const Tensor& y_pred) {
             constexpr const char* kLoss = "CategoricalCrossentropy";
             const Tensor pred = detail::prediction(kLoss, y_pred);  // (..., C)
             class_count(kLoss, pred);
             const Tensor target = detail::target_like(kLoss, y_true, pred);
             const Tensor log_p = detail::log_probabilities(pred, logits);
             return neg(mean(sum(target * log_p, {-1})));
           }) {
  config_ = Config{.class_name = "CategoricalCrossentropy",
                   .from_logits = options.from_logits,
                   .ignore_class = std::nullopt};
}

BinaryCrossentropy::BinaryCrossentropy(BinaryCrossentropyOptions options)
    : Loss("binary_crossentropy",
           [logits = from(options.from_logits)](const Tensor& y_true, const Tensor& y_pred) {
             constexpr const char* kLoss = "BinaryCrossentropy";
             const Tensor pred = detail::prediction(kLoss, y_pred);
             const Tensor t = detail::target_like(kLoss, y_true, pred);
             Tensor log_p, log_not_p;  // log p and log(1 - p), elementwise
             if (logits == FromLogits::yes) {
               // log sigmoid(x) and log sigmoid(-x) as the log_softmax of the pair (0, x):
               // softmax(0, x) = (sigmoid(-x), sigmoid(x)). Stable for any finite x, and smooth
               // at x = 0 (a max(x, 0) - x t + log(1 + exp(-|x|)) form has kinks whose
               // subgradients are wrong there).
               std::vector<std::int64_t> dims(pred.shape().begin(), pred.shape().end());
               dims.push_back(1);
               const Tensor x = reshape(pred, Shape(dims));         // (..., 1)
               const Tensor pair = concat({zeros_like(x), x}, -1);  // (..., 2)
               const Tensor log_pair = log_softmax(pair, -1);
               log_not_p = reshape(slice(log_pair, -1, 0, 1), pred.shape());
               log_p = reshape(slice(log_pair, -1, 1, 2), pred.shape());
             } else {
               const Tensor p = detail::clip_probabilities(pred);
               log_p = log(p);
               log_not_p = log(1.0 - p);
             }
             return neg(mean(t * log_p + (1.0 - t) * log_not_p));
           }) {
  config_ = Config{.class_name = "BinaryCrossentropy",
                   .from_logits = options.from_logits,
                   .ignore_class = std::nullopt};
}

}  // namespace mixprec::losses
