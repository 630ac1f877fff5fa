// The GradientTape training loop of `mixprec train --loop custom` (see custom_loop.h).
#include "custom_loop.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

namespace mixprec::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void print_epoch(const EpochLog& log, int epochs) {
  std::printf("Epoch %d/%d - %.1fs", log.epoch, epochs, log.seconds);
  for (const char* name : {"loss", "accuracy", "val_loss", "val_accuracy"}) {
    auto it = log.metrics.find(name);
    if (it != log.metrics.end()) std::printf(" - %s: %.4f", name, it->second);
  }
  if (log.loss_scale) {
    std::printf(" - loss_scale: %g - skipped: %lld", *log.loss_scale,
                static_cast<long long>(log.skipped_steps));
  }
  std::printf("\n");
  std::fflush(stdout);
}

// Where the model computes: its variables' device (batches come from CPU data sets).
Device model_device(const Model& model) {
  const std::vector<Tensor> variables = model.variables();
  return variables.empty() ? Device::cpu() : variables.front().device();
}

// The pipeline's batch, assembled on the CPU (the run's default device may be a GPU), then moved
// to `device` (no copy when it is the CPU).
data::Batch on_device(const data::Pipeline& pipeline, const data::Batch& rows, Device device) {
  data::Batch batch;
  {
    DeviceScope host(Device::cpu());
    batch = pipeline.apply(rows);
  }
  batch.x = batch.x.to(device);
  if (batch.y.defined()) batch.y = batch.y.to(device);
  return batch;
}

}  // namespace

LossAndAccuracy evaluate_in_batches(Model& model, const data::Pipeline& data,
                                    std::int64_t batch_size) {
  NoGradScope no_grad;
  const losses::SparseCategoricalCrossentropy loss_object;
  metrics::SparseCategoricalAccuracy accuracy;
  // Keras weights each batch's mean loss by its size, so a short last batch counts less.
  double loss_sum = 0.0;
  std::int64_t count = 0;
  const Device device = model_device(model);
  for (const data::Batch& rows : data.dataset().batches(batch_size)) {
    const data::Batch batch = on_device(data, rows, device);
    const Tensor predictions = model(batch.x);  // (b, classes) float32
    const std::int64_t b = batch.x.dim(0);
    loss_sum += loss_object(batch.y, predictions).item() * static_cast<double>(b);
    count += b;
    accuracy.update_state(batch.y, predictions);
  }
  return {count > 0 ? loss_sum / static_cast<double>(count) : 0.0, accuracy.result()};
}

History custom_training_loop(Model& model, optimizers::Optimizer optimizer,
                             const data::Pipeline& all, const CustomLoopOptions& options) {
  auto scaler = mixed_precision::as_loss_scale_optimizer(optimizer);
  const losses::SparseCategoricalCrossentropy loss_object;
  const std::vector<Tensor> variables = model.trainable_variables();
  const Device device = model_device(model);

  data::Pipeline train = all;
  std::optional<data::Pipeline> validation;
  if (options.validation_split > 0.0) {
    auto split = all.split_validation(options.validation_split);
    train = split.train;
    validation = split.validation;
  }
  data::BatchLoader loader(
      train.dataset(),
      {.batch_size = options.batch_size, .shuffle = data::Shuffle::yes, .seed = options.seed});

  History history;
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    const auto epoch_start = Clock::now();
    const std::int64_t skipped_before = scaler ? scaler->skipped_steps() : 0;
    EpochLog log;
    log.epoch = epoch;
    metrics::Mean loss_mean;
    metrics::SparseCategoricalAccuracy accuracy;
    for (const data::Batch& rows : loader.next_epoch()) {
      const data::Batch batch = on_device(train, rows, device);
      const auto step_start = Clock::now();
      GradientTape tape;
      const Tensor predictions = model(batch.x, {.training = true});  // (b, classes) float32
      const Tensor loss = loss_object(batch.y, predictions);          // scalar float32
      if (scaler) {
        // The UnscaledGradients carry the verdict of the unscale pass: no second check.
        const auto grads =
            scaler->get_unscaled_gradients(tape.gradient(scaler->get_scaled_loss(loss), variables));
        scaler->apply_gradients(grads, variables);
      } else {
        optimizer.apply_gradients(tape.gradient(loss, variables), variables);
      }
      const double loss_value = loss.item();  // waits for the step to finish
      log.step_ms.push_back(ms_since(step_start));
      loss_mean.update_state(loss_value);
      accuracy.update_state(batch.y, predictions.detach());
    }
    log.metrics["loss"] = loss_mean.result();
    log.metrics["accuracy"] = accuracy.result();
    if (validation) {
      const auto v = evaluate_in_batches(model, *validation, options.batch_size);
      log.metrics["val_loss"] = v.loss;
      log.metrics["val_accuracy"] = v.accuracy;
    }
    log.seconds = ms_since(epoch_start) / 1e3;
    if (scaler) {
      log.loss_scale = scaler->loss_scale();
      log.skipped_steps = scaler->skipped_steps() - skipped_before;
    }
    for (const auto& [name, value] : log.metrics) history.history[name].push_back(value);
    if (options.verbose != Verbosity::silent) print_epoch(log, options.epochs);
    history.epochs.push_back(std::move(log));
  }
  return history;
}

}  // namespace mixprec::cli
