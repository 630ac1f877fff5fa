// Model::fit: validation of the arguments, the epoch loop, progress output and History.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/callbacks/progress_bar.h"
#include "mixprec/data/dataset.h"
#include "mixprec/error.h"
#include "mixprec/models/model.h"
#include "models/training_state.h"

namespace mixprec {

namespace {

using Clock = std::chrono::steady_clock;

double milliseconds(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

void validate_fit(const Model& model, const Tensor& x, const Tensor& y, const FitOptions& o) {
  const std::string who = "model '" + model.name() + "': fit()";
  if (o.batch_size <= 0) {
    throw ValueError(who + ": batch_size must be positive, got " + std::to_string(o.batch_size));
  }
  if (o.epochs < 0) {
    throw ValueError(who + ": epochs must be >= 0, got " + std::to_string(o.epochs));
  }
  models::check_samples(x, y, "fit");
  if (!(o.validation_split >= 0.0 && o.validation_split < 1.0)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", o.validation_split);
    throw ValueError(who + ": validation_split must be in [0, 1), got " + got +
                     "; 0.2 keeps the last 20% for validation");
  }
  if (o.validation_data)
    models::check_samples(o.validation_data->first, o.validation_data->second,
                          "fit (validation_data)");
}

// The running values shown while an epoch trains: the metrics, then the loss-scaling state.
std::vector<callbacks::ProgressValue> progress_values(const models::TrainingState& state,
                                                      std::int64_t skipped) {
  std::vector<callbacks::ProgressValue> values;
  for (auto& [name, value] : models::metric_results(state)) values.push_back({name, value});
  if (state.loss_scale) {
    values.push_back({"loss_scale", state.loss_scale->loss_scale(), callbacks::ValueFormat::count});
    if (skipped > 0) {
      values.push_back(
          {"skipped_steps", static_cast<double>(skipped), callbacks::ValueFormat::count});
    }
  }
  return values;
}

}  // namespace

History Model::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  models::TrainingState& state = models::require_compiled(*this, "fit");
  validate_fit(*this, x, y, options);

  // Keras: validation_data wins over validation_split; the split takes the last samples, before
  // any shuffling.
  data::Dataset train(x, y);
  std::optional<data::Dataset> validation;
  if (options.validation_data) {
    validation.emplace(options.validation_data->first, options.validation_data->second);
  } else if (options.validation_split > 0.0) {
    data::ValidationSplit split = train.split_validation(options.validation_split);
    train = split.train;
    validation = split.validation;
  }
  data::BatchLoader loader(train,
                           {.batch_size = options.batch_size,
                            .shuffle = options.shuffle ? data::Shuffle::yes : data::Shuffle::no,
                            .seed = options.seed});

  std::optional<callbacks::ProgressBar> progress = models::make_progress(options.verbose);

  const std::optional<mixed_precision::LossScaleOptimizer>& lso = state.loss_scale;
  std::optional<std::vector<Tensor>> variables;  // fetched by the first step, then reused
  History history;
  for (int e = 1; e <= options.epochs; ++e) {
    const Clock::time_point epoch_start = Clock::now();
    models::reset_metrics(state);
    const data::Epoch epoch = loader.next_epoch();
    const std::int64_t skipped_before = lso ? lso->skipped_steps() : 0;
    EpochLog log;
    log.epoch = e;
    log.step_ms.reserve(static_cast<std::size_t>(epoch.size()));
    if (progress) {
      progress->start(epoch.size(),
                      "Epoch " + std::to_string(e) + "/" + std::to_string(options.epochs));
    }

    for (std::int64_t i = 0; i < epoch.size(); ++i) {
      const data::Batch batch = epoch.batch(i);
      // step_ms: the optimisation step itself (forward, backward, update, metrics), without
      // batch assembly or printing.
      const Clock::time_point t0 = Clock::now();
      try {
        models::train_step(*this, state, batch.x, batch.y, variables, {e, i + 1});
      } catch (...) {
        if (progress) progress->interrupt();
        throw;
      }
      log.step_ms.push_back(milliseconds(Clock::now() - t0));
      // Values are gathered and formatted only when the bar redraws (at most ~10 times/s).
      if (progress && progress->due()) {
        progress->update(i + 1,
                         progress_values(state, lso ? lso->skipped_steps() - skipped_before : 0));
      }
    }

    log.skipped_steps = lso ? lso->skipped_steps() - skipped_before : 0;
    if (lso) log.loss_scale = lso->loss_scale();
    std::vector<callbacks::ProgressValue> shown = progress_values(state, log.skipped_steps);
    for (auto& [name, value] : models::metric_results(state)) log.metrics[name] = value;
    if (validation) {
      const Scores scores = models::evaluate_dataset(*this, state, *validation, options.batch_size,
                                                     Verbosity::silent);
      for (const auto& [name, value] : scores.values) {
        log.metrics["val_" + name] = value;
        shown.push_back({"val_" + name, value});
      }
    }
    log.seconds = std::chrono::duration<double>(Clock::now() - epoch_start).count();
    if (progress) progress->finish(shown);
    for (const auto& [name, value] : log.metrics) history.history[name].push_back(value);
    history.epochs.push_back(std::move(log));
  }
  return history;
}

}  // namespace mixprec
