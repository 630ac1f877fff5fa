// Losses (keras.losses). A Loss maps (y_true, y_pred) to the mean over the batch of the per-sample
// loss, as a scalar tensor that is differentiable with respect to y_pred.
//
// Float32 island (DESIGN §2.3): y_pred is cast to float32 before anything else, so a float16 or
// bfloat16 model output gives a float32 loss computed in float32 (a float64 y_pred is computed and
// returned in float64, which is what gradient checks need). Probabilities are clipped to
// [1e-7, 1 - 1e-7] as in Keras; from_logits paths use the fused, stable log_softmax and never
// produce Inf/NaN for finite logits.
#pragma once

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
  };
  const std::optional<Config>& get_config() const { return config_; }

 protected:
  std::optional<Config> config_;

 private:
  std::string name_;
  Function function_;
};

// y_true: integer class indices (int32, int64 or uint8) of shape y_pred.shape[:-1], or that shape
// with a trailing 1 ((N,) or (N, 1) for y_pred (N, C)); a label outside [0, C) is a ValueError.
// Per sample: -log p[label], p = y_pred / sum(y_pred) clipped (or log_softmax(y_pred) from logits).
struct SparseCategoricalCrossentropyOptions {
  bool from_logits = false;
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
