// `mixprec train --loop custom`: the second half of seed 001 in C++, a training loop written with
// the public pieces (GradientTape, a loss object, LossScaleOptimizer, metrics) instead of
// Model::fit, reporting the same per-epoch log as fit so that both loops fill the same JSON.
#pragma once

#include <cstdint>

#include "mixprec/mixprec.h"

namespace mixprec::cli {

struct CustomLoopOptions {
  std::int64_t batch_size = 256;
  int epochs = 1;
  double validation_split = 0.0;  // the last fraction of the data, as Keras's fit
  std::uint64_t seed = 0;         // shuffling seed
  Verbosity verbose = Verbosity::one_line_per_epoch;
};

struct LossAndAccuracy {
  double loss = 0.0;
  double accuracy = 0.0;
};

// Trains `model` (float32 probabilities out, integer labels) on `train` (a pipeline: its steps run
// on every batch, as in fit) with `optimizer` on sparse categorical cross-entropy. When
// `optimizer` is a LossScaleOptimizer the loss is scaled before the tape's gradient and the
// gradients unscaled after it, as in the seed:
//   grads = opt.get_unscaled_gradients(tape.gradient(opt.get_scaled_loss(loss), variables))
// Per epoch: mean training loss and accuracy, validation loss/accuracy when split, wall seconds,
// loss scale, skipped steps and each step's wall time (batch assembly excluded, as in fit).
History custom_training_loop(Model& model, optimizers::Optimizer optimizer,
                             const data::Pipeline& train, const CustomLoopOptions& options);

// Sample-weighted mean loss and accuracy of `model` on `data`, in batches, without autograd.
LossAndAccuracy evaluate_in_batches(Model& model, const data::Pipeline& data,
                                    std::int64_t batch_size);

}  // namespace mixprec::cli
