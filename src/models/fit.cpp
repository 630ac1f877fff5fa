// Model::fit on tensors and on a data::Pipeline (the tensor form is a pipeline without steps):
// validation of the arguments, the epoch loop, progress output and History.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "data/prefetch.h"
#include "mixprec/callbacks/progress_bar.h"
#include "mixprec/data/dataset.h"
#include "mixprec/data/pipeline.h"
#include "mixprec/error.h"
#include "mixprec/models/model.h"
#include "models/step_timer.h"
#include "models/training_state.h"

namespace mixprec {

namespace {

using Clock = std::chrono::steady_clock;

// A pipeline to train or validate on: targets and at least one sample.
void check_pipeline(const Model& model, const data::Pipeline& p, const char* what) {
  if (p.size() == 0 || !p.has_targets()) {
    throw ValueError("model '" + model.name() + "': " + what + " needs a data::Pipeline with " +
                     "targets and at least one sample, got " +
                     (p.size() == 0 ? std::string("an empty one")
                                    : std::to_string(p.size()) + " samples without targets") +
                     "; build it as Pipeline(x, y)");
  }
}

// The checks shared by both forms of fit(), before any work.
void validate_fit_options(const Model& model, const FitOptions& o) {
  const std::string who = "model '" + model.name() + "': fit()";
  if (o.batch_size <= 0) {
    throw ValueError(who + ": batch_size must be positive, got " + std::to_string(o.batch_size));
  }
  if (o.epochs < 0) {
    throw ValueError(who + ": epochs must be >= 0, got " + std::to_string(o.epochs));
  }
}

void validate_split_and_validation_data(const Model& model, const FitOptions& o) {
  const std::string who = "model '" + model.name() + "': fit()";
  if (!(o.validation_split >= 0.0 && o.validation_split < 1.0)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", o.validation_split);
    throw ValueError(who + ": validation_split must be in [0, 1), got " + got +
                     "; 0.2 keeps the last 20% for validation");
  }
  if (!o.validation_data) return;
  if (const auto* xy = std::get_if<std::pair<Tensor, Tensor>>(&*o.validation_data)) {
    models::check_samples(xy->first, xy->second, "fit (validation_data)");
  } else {
    check_pipeline(model, std::get<data::Pipeline>(*o.validation_data), "fit (validation_data)");
  }
}

void validate_fit(const Model& model, const Tensor& x, const Tensor& y, const FitOptions& o) {
  validate_fit_options(model, o);
  models::check_samples(x, y, "fit");
  validate_split_and_validation_data(model, o);
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

// The training loop of both forms of fit(), on arguments already validated.
History fit_pipeline(Model& model, models::TrainingState& state, const data::Pipeline& all,
                     const FitOptions& options) {
  // Keras: validation_data wins over validation_split; the split takes the last samples, before
  // any shuffling.
  data::Pipeline train = all;
  std::optional<data::Pipeline> validation;
  if (options.validation_data) {
    if (const auto* xy = std::get_if<std::pair<Tensor, Tensor>>(&*options.validation_data)) {
      validation.emplace(xy->first, xy->second);
    } else {
      validation = std::get<data::Pipeline>(*options.validation_data);
    }
  } else if (options.validation_split > 0.0) {
    data::PipelineSplit split = all.split_validation(options.validation_split);
    train = split.train;
    validation = split.validation;
  }
  data::BatchLoader loader(train.dataset(),
                           {.batch_size = options.batch_size,
                            .shuffle = options.shuffle ? data::Shuffle::yes : data::Shuffle::no,
                            .seed = options.seed});

  std::optional<callbacks::ProgressBar> progress = models::make_progress(options.verbose);

  const std::optional<mixed_precision::LossScaleOptimizer>& lso = state.loss_scale;
  std::optional<std::vector<Tensor>> variables;  // fetched by the first step, then reused
  // Batches go where the model computes. On a GPU a producer thread assembles the next batches
  // and queues their copies while this thread queues the step (data/prefetch.h); on the CPU
  // they are assembled here, in the loop, as always.
  const data::PrefetchOptions prefetch = data::prefetch_options_for(models::model_device(model));
  models::StepTimer timer(prefetch.device);
  History history;
  for (int e = 1; e <= options.epochs; ++e) {
    const Clock::time_point epoch_start = Clock::now();
    models::reset_metrics(state);
    const data::Epoch epoch = loader.next_epoch();  // the shuffle draws here, on this thread
    const std::int64_t skipped_before = lso ? lso->skipped_steps() : 0;
    EpochLog log;
    log.epoch = e;
    if (progress) {
      progress->start(epoch.size(),
                      "Epoch " + std::to_string(e) + "/" + std::to_string(options.epochs));
    }

    // Stopped and joined when this epoch's scope ends, also by an exception.
    data::Prefetcher batches(train, epoch, prefetch);
    for (std::int64_t i = 0; i < epoch.size(); ++i) {
      try {
        // Batch assembly: the rows in this epoch's order, then the pipeline's steps.
        const data::Batch batch = batches.next();
        // step_ms: the optimisation step itself (forward, backward, update, metrics), without
        // batch assembly or printing; on a GPU measured there with events (step_timer.h).
        timer.step_started();
        models::train_step(model, state, batch.x, batch.y, variables, {e, i + 1});
        timer.step_finished();
      } catch (...) {
        if (progress) progress->interrupt();
        throw;
      }
      // Values are gathered and formatted only when the bar redraws (at most ~10 times/s).
      if (progress && progress->due()) {
        progress->update(i + 1,
                         progress_values(state, lso ? lso->skipped_steps() - skipped_before : 0));
      }
    }

    log.step_ms = timer.take_times();
    log.skipped_steps = lso ? lso->skipped_steps() - skipped_before : 0;
    if (lso) log.loss_scale = lso->loss_scale();
    std::vector<callbacks::ProgressValue> shown = progress_values(state, log.skipped_steps);
    for (auto& [name, value] : models::metric_results(state)) log.metrics[name] = value;
    if (validation) {
      const Scores scores = model.evaluate(
          *validation, {.batch_size = options.batch_size, .verbose = Verbosity::silent});
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

}  // namespace

History Model::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  models::TrainingState& state = models::require_compiled(*this, "fit");
  validate_fit(*this, x, y, options);
  return fit_pipeline(*this, state, data::Pipeline(data::Dataset(x, y)), options);
}

History Model::fit(const data::Pipeline& train, FitOptions options) {
  models::TrainingState& state = models::require_compiled(*this, "fit");
  validate_fit_options(*this, options);
  check_pipeline(*this, train, "fit");
  validate_split_and_validation_data(*this, options);
  return fit_pipeline(*this, state, train, options);
}

}  // namespace mixprec
