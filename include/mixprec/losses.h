// Losses (keras.losses). A Loss maps (y_true, y_pred) to the mean over the batch of the per-sample
// loss, as a scalar tensor that is differentiable with respect to y_pred.
//
// Float32 island (DESIGN §2.3): y_pred is cast to float32 before anything else, so a float16 or
// bfloat16 model output gives a float32 loss computed in float32 (a float64 y_pred is computed and
// returned in float64, which is what gradient checks need); SparseCategoricalCrossentropy from
// logits reads 16-bit logits in their own dtype and computes in float32 without a float32 copy
// (the same values as the cast would give). Probabilities are clipped to
// [1e-7, 1 - 1e-7] as in Keras; from_logits paths use the fused, stable log_softmax and never
// produce Inf/NaN for finite logits.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::losses {

class Loss {
 public:
  using Function = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

  Loss() = default;  // undefined: defined() is false, operator() throws ValueError
  // A custom loss: `function` returns the scalar batch loss.
  Loss(std::string name, Function function);

  bool defined() const { return static_cast<bool>(function_); }
  // The batch-mean loss as a scalar (rank 0) float32 tensor (float64 for a float64 y_pred).
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred) const;
  // Keras name: "sparse_categorical_crossentropy", "mean_squared_error", ...
  const std::string& name() const { return name_; }

  // Keras get_config(): the class and options of a built-in loss ("SparseCategoricalCrossentropy",
  // from_logits); nullopt for a loss made from a function, which a saved config cannot describe.
  struct Config {
    std::string class_name;
    bool from_logits = false;
    // SparseCategoricalCrossentropy's ignore_class (Keras 3): nullopt when none.
    std::optional<std::int64_t> ignore_class;
  };
  const std::optional<Config>& get_config() const { return config_; }

 protected:
  std::optional<Config> config_;

 private:
  std::string name_;
  Function function_;
};

// y_true: integer class indices (int32, int64 or uint8) of shape y_pred.shape[:-1], or that shape
// with a trailing 1 ((N,) or (N, 1) for y_pred (N, C)); y_pred of any rank >= 1: (N, C), or
// (batch, time, vocab) logits of a language model. A label outside [0, C) other than ignore_class
// is a ValueError (on a GPU, which is not waited for, it makes the loss NaN).
// Per position: -log p[label], p = y_pred / sum(y_pred) clipped (or softmax(y_pred) from logits).
//
// ignore_class (Keras 3): positions whose label equals it add neither loss nor gradient, and the
// mean divides by the number of the other positions (Keras's "sum_over_batch_size" reduction of
// a masked loss: sum over the unmasked positions / their count; Keras adds 1e-7 to the count,
// which only matters when it is 0). When every position is ignored the loss is 0 and its gradient
// is 0 (no NaN). Typical use: padding tokens, SparseCategoricalCrossentropy({.from_logits = true,
// .ignore_class = -100}) or the padding id. The value is compared with the labels as given
// (a uint8 label never equals -100).
//
// from_logits runs as one fused op (no float32 copy of 16-bit logits: one pass per row for the
// max, the log-sum-exp and the label's term in float32, float64 for float64 logits, and a
// backward that writes (softmax - onehot) * g / count in the logits' dtype). On the CPU each
// position's float32 loss has the bits of log_softmax followed by picking the label's entry; the
// mean adds the positions in double, so it may differ from mean() of those values in the last bit.
struct SparseCategoricalCrossentropyOptions {
  bool from_logits = false;
  std::optional<std::int64_t> ignore_class;
};
class SparseCategoricalCrossentropy : public Loss {
 public:
  explicit SparseCategoricalCrossentropy(SparseCategoricalCrossentropyOptions options = {});
};

// y_true: one-hot (or soft) targets of y_pred's shape (..., C).
// Per sample: -sum(y_true * log p) over the last axis, p as above.
struct CategoricalCrossentropyOptions {
  bool from_logits = false;
};
class CategoricalCrossentropy : public Loss {
 public:
  explicit CategoricalCrossentropy(CategoricalCrossentropyOptions options = {});
};

// y_true: targets in [0, 1] of y_pred's shape (or with one trailing extent-1 axis more or less).
// Elementwise -(t log p + (1 - t) log(1 - p)), p clipped; from logits the stable
// -(t log sigmoid(x) + (1 - t) log sigmoid(-x)). The batch mean is over all elements.
struct BinaryCrossentropyOptions {
  bool from_logits = false;
};
class BinaryCrossentropy : public Loss {
 public:
  explicit BinaryCrossentropy(BinaryCrossentropyOptions options = {});
};

// mean((y_true - y_pred)^2) over all elements; shapes as for BinaryCrossentropy.
class MeanSquaredError : public Loss {
 public:
  MeanSquaredError();
};

// A loss with default options by Keras name: "sparse_categorical_crossentropy",
// "categorical_crossentropy", "binary_crossentropy", "mean_squared_error" (or "mse"). Unknown
// names throw ValueError listing the valid ones.
Loss get(std::string_view name);

}  // namespace mixprec::losses

#pragma GCC visibility pop
