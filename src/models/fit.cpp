// Model::fit on tensors and on a data::Pipeline (the tensor form is a pipeline without steps):
// validation of the arguments, the epoch loop, progress output and History.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "data/prefetch.h"
#include "distributed/data_parallel_training.h"
#include "mixprec/callbacks/progress_bar.h"
#include "mixprec/data/dataset.h"
#include "mixprec/data/pipeline.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/models/model.h"
#include "models/callback_list.h"
#include "models/fit_run.h"
#include "models/graphed_step.h"
#include "models/label_check.h"
#include "models/step_timer.h"
#include "models/train_step.h"
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
  if (o.initial_epoch < 0) {
    throw ValueError(who + ": initial_epoch must be >= 0, got " + std::to_string(o.initial_epoch));
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

// The training data and the validation data of fit(): Keras takes validation_data over
// validation_split, and the split takes the last samples, before any shuffling.
struct FitData {
  data::Pipeline train;
  std::optional<data::Pipeline> validation;
};

FitData split_fit_data(const data::Pipeline& all, const FitOptions& options) {
  FitData d{all, std::nullopt};
  if (options.validation_data) {
    if (const auto* xy = std::get_if<std::pair<Tensor, Tensor>>(&*options.validation_data)) {
      d.validation.emplace(xy->first, xy->second);
    } else {
      d.validation = std::get<data::Pipeline>(*options.validation_data);
    }
  } else if (options.validation_split > 0.0) {
    data::PipelineSplit split = all.split_validation(options.validation_split);
    d.train = split.train;
    d.validation = split.validation;
  }
  return d;
}

std::int64_t steps_per_epoch(const Model& model, const FitOptions& o, std::int64_t batches) {
  if (!o.steps_per_epoch) return batches;
  if (*o.steps_per_epoch <= 0 || *o.steps_per_epoch > batches) {
    throw ValueError("model '" + model.name() + "': fit(): steps_per_epoch must be in [1, " +
                     std::to_string(batches) + "] (the batches of the training data), got " +
                     std::to_string(*o.steps_per_epoch));
  }
  return *o.steps_per_epoch;
}

// The logs of a batch or an epoch: the metrics (over every rank's samples when `across_ranks`, a
// collective), then the learning rate and loss-scaling state (the same on every rank).
callbacks::Logs::Values training_logs(const models::TrainingState& state,
                                      std::int64_t skipped_before, bool across_ranks = false) {
  callbacks::Logs::Values values =
      across_ranks ? distributed::detail::results_across_ranks(state.train_metrics)
                   : state.train_metrics.results();
  values.emplace_back(callbacks::log_names::learning_rate, state.optimizer.learning_rate());
  if (const auto& lso = state.loss_scale) {
    values.emplace_back(callbacks::log_names::loss_scale, lso->loss_scale());
    values.emplace_back(callbacks::log_names::skipped_steps,
                        static_cast<double>(lso->skipped_steps() - skipped_before));
  }
  return values;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

// The progress output of fit(): only rank 0 of a data-parallel fit prints.
Verbosity fit_verbosity(const FitOptions& o) {
  if (o.distribute && distributed::rank() != 0) return Verbosity::silent;
  return models::resolve_verbosity(o.verbose);
}

// fit()'s loop over epochs and batches, with its callbacks.
class FitLoop {
 public:
  FitLoop(Model& model, models::TrainingState& state, const FitData& data,
          const FitOptions& options)
      : model_(model),
        state_(state),
        data_(data),
        options_(options),
        loader_(data.train.dataset(),
                {.batch_size = options.batch_size,
                 .shuffle = options.shuffle ? data::Shuffle::yes : data::Shuffle::no,
                 .seed = options.seed}),
        steps_(steps_per_epoch(model, options, loader_.batches_per_epoch())),
        verbose_(fit_verbosity(options)),
        callbacks_(
            model, options.callbacks, verbose_, true,
            {.epochs = options.epochs, .initial_epoch = options.initial_epoch, .steps = steps_}),
        step_(model, state),
        graphed_(step_, verbose_ == Verbosity::one_line_per_epoch),
        prefetch_(data::prefetch_options_for(step_.device)),
        timer_(prefetch_.device) {
    run_.loader = &loader_;
    run_.epoch = options.initial_epoch;
    run_.steps = steps_;
    run_.batch_size = options.batch_size;
    run_.loader_state_before = loader_.generator_state();
    run_.history = callbacks_.history();
    if (options.distribute) step_.data_parallel = &*options.distribute;
  }

  History run() {
    models::ModelImpl& impl = model_.model_impl();
    impl.stop_training = false;
    impl.fit_run = &run_;
    struct Detach {
      models::ModelImpl& impl;
      ~Detach() { impl.fit_run = nullptr; }
    } detach{impl};
    try {
      callbacks_.on_train_begin({});
      models::ResumePoint start;
      start.epoch = options_.initial_epoch;
      start.loader_state = loader_.generator_state();
      if (run_.resume) {  // a checkpoint restored by a callback
        start = *run_.resume;
        if (start.history) restore_history(*start.history);
      }
      loader_.set_generator_state(start.loader_state);
      for (int e = start.epoch; e < options_.epochs && !impl.stop_training; ++e) {
        const bool resumed = e == start.epoch;
        run_epoch(e, resumed ? start.step : 0,
                  resumed && start.epoch_sums ? &*start.epoch_sums : nullptr);
      }
      callbacks_.on_train_end(callbacks::Logs(last_logs_));  // the last epoch's logs (Keras)
    } catch (...) {
      callbacks_.interrupt();
      throw;
    }
    return callbacks_.history()->history();
  }

 private:
  // The epochs a restored checkpoint recorded, into fit()'s History as they were logged then (the
  // other callbacks saw them in the run that trained them).
  void restore_history(const std::vector<EpochLog>& epochs) {
    for (const EpochLog& log : epochs) {
      callbacks::Logs::Values values(log.metrics.begin(), log.metrics.end());
      if (log.loss_scale) values.emplace_back(callbacks::log_names::loss_scale, *log.loss_scale);
      values.emplace_back(callbacks::log_names::skipped_steps,
                          static_cast<double>(log.skipped_steps));
      values.emplace_back(callbacks::log_names::epoch_seconds, log.seconds);
      callbacks_.history()->on_epoch_end(log.epoch - 1, callbacks::Logs(std::move(values)));
    }
  }

  // Epoch `e` from batch `first_step`; `sums`: the running sums of its batches before that (a
  // checkpoint taken inside it), so that its metrics are those of the uninterrupted epoch.
  void run_epoch(int e, std::int64_t first_step, const models::EpochSums* sums) {
    const Clock::time_point epoch_start = Clock::now();
    state_.train_metrics.reset();
    std::int64_t skipped_before = state_.loss_scale ? state_.loss_scale->skipped_steps() : 0;
    if (sums) {
      // Data-parallel: the group's sums continue on rank 0 only (the epoch's metrics add every
      // rank's).
      std::vector<models::NamedSums> mine = sums->sums;
      if (data_parallel() && distributed::rank() != 0) {
        for (models::NamedSums& s : mine) s.count = s.total = 0.0;
      }
      state_.train_metrics.set_sums(mine);
      skipped_before = sums->skipped_before;
    }
    run_.epoch = e;
    run_.step = first_step;
    run_.epoch_ending = false;
    run_.skipped_before = skipped_before;
    run_.loader_state_before = loader_.generator_state();
    const data::Epoch epoch = loader_.next_epoch();  // the shuffle draws here, on this thread
    callbacks_.on_epoch_begin(e, {});
    run_batches(epoch, first_step, e, skipped_before);

    std::vector<double> step_ms = timer_.take_times();
    callbacks::Logs::Values logs = training_logs(state_, skipped_before, data_parallel());
    if (data_.validation) validate(logs);
    double total_ms = 0.0;
    for (double t : step_ms) total_ms += t;
    const std::int64_t samples = std::min(data_.train.size(), steps_ * options_.batch_size) -
                                 std::min(data_.train.size(), first_step * options_.batch_size);
    logs.emplace_back(callbacks::log_names::step_ms, median(step_ms));
    logs.emplace_back(callbacks::log_names::samples_per_s,
                      total_ms > 0.0 ? static_cast<double>(samples) / (total_ms / 1000.0) : 0.0);
    logs.emplace_back(callbacks::log_names::epoch_seconds,
                      std::chrono::duration<double>(Clock::now() - epoch_start).count());
    last_logs_ = logs;
    // A checkpoint written by a callback here keeps this epoch in its record.
    run_.ending_logs = &last_logs_;
    run_.epoch_ending = true;
    struct EndingLogs {
      models::FitRun& run;
      ~EndingLogs() { run.ending_logs = nullptr; }
    } ending{run_};
    callbacks_.on_epoch_end(e, callbacks::Logs(std::move(logs)));
    agree_on_stopping();
    callbacks_.history()->set_step_times(std::move(step_ms));
  }

  void run_batches(const data::Epoch& epoch, std::int64_t first_step, int e,
                   std::int64_t skipped_before) {
    // Batches first_step .. steps_ - 1 of this epoch's order (a resumed epoch skips those done;
    // none when it resumes at the epoch's end).
    const data::Pipeline& train = data_.train;
    const distributed::DataParallel* dp = step_.data_parallel;
    data::Prefetcher batches(
        steps_ - first_step,
        [&train, &epoch, first_step, dp](std::int64_t i) {
          // Data-parallel: only this rank's rows of the batch are gathered.
          return dp ? distributed::detail::shard_of_batch(*dp, train, epoch, first_step + i)
                    : train.apply(epoch.batch(first_step + i));
        },
        prefetch_);
    const models::TrainingState& state = state_;
    // Executions of steps_per_execution batches (the last of the epoch may be shorter); the batch
    // hooks fire once per execution, with its first and its last batch.
    const std::int64_t per_execution = state_.options.steps_per_execution;
    for (std::int64_t first = first_step; first < steps_; first += per_execution) {
      const std::int64_t end = std::min(steps_, first + per_execution);
      callbacks_.on_train_batch_begin(first, {});
      for (std::int64_t i = first; i < end; ++i) {
        // Batch assembly: the rows in this epoch's order, then the pipeline's steps.
        const data::Batch batch = batches.next();
        // step_ms: the optimisation step itself (forward, backward, update, metrics), without
        // batch assembly or callbacks; on a GPU measured there with events (step_timer.h).
        if (dp)
          step_.shard_weight = dp->shard_weight(distributed::detail::global_batch_rows(epoch, i));
        timer_.step_started();
        // train_step, or on a GPU after warm-up the step's CUDA graph replayed
        graphed_.run(batch.x, batch.y, {e + 1, i + 1});
        timer_.step_finished();
        run_.step = i + 1;
      }
      // Several batches per execution: the host waits once for them (none on the CPU); one
      // batch per execution queues the steps as they come.
      if (per_execution > 1) graphed_.sync_execution();
      // Read only when a callback looks (the progress bar: when it redraws).
      callbacks_.on_train_batch_end(end - 1, callbacks::Logs::lazy([&state, skipped_before] {
                                      return training_logs(state, skipped_before);
                                    }));
      agree_on_stopping();
      if (model_.model_impl().stop_training) break;
    }
  }

  void validate(callbacks::Logs::Values& logs) {
    const Scores scores = models::evaluate_with_callbacks(
        model_, state_, *data_.validation, options_.batch_size, callbacks_, step_.data_parallel);
    callbacks_.set_steps(steps_);
    // evaluate counts into state_.test_metrics: the training metrics keep the epoch's values.
    for (const auto& [name, value] : scores.values) logs.emplace_back("val_" + name, value);
  }

  bool data_parallel() const { return step_.data_parallel != nullptr; }
  // A callback that stops training on one rank (TerminateOnNaN on its own loss, ...) stops it on
  // every rank after the same batch, so that no rank waits for the others' next collective.
  void agree_on_stopping() {
    if (!data_parallel()) return;
    models::ModelImpl& impl = model_.model_impl();
    impl.stop_training = distributed::detail::any_rank(impl.stop_training);
  }

  Model& model_;
  models::TrainingState& state_;
  const FitData& data_;
  const FitOptions& options_;
  data::BatchLoader loader_;
  std::int64_t steps_;
  Verbosity verbose_;
  models::CallbackList callbacks_;
  // The model's device, trainable variables (listed by the first step) and loss scaling, resolved
  // once for the whole fit().
  models::StepContext step_;
  models::GraphedTrainStep graphed_;  // the training step, replayed as a CUDA graph where it can
  data::PrefetchOptions prefetch_;
  models::StepTimer timer_;
  models::FitRun run_;
  callbacks::Logs::Values last_logs_;  // of the last epoch that ended
};

}  // namespace

History Model::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  models::TrainingState& state = models::require_compiled(*this, "fit");
  validate_fit(*this, x, y, options);
  models::check_sparse_labels(*this, state, y, "fit()");
  if (options.validation_data) {
    if (const auto* xy = std::get_if<std::pair<Tensor, Tensor>>(&*options.validation_data)) {
      models::check_sparse_labels(*this, state, xy->second, "fit()", "validation_data y");
    }
  }
  if (options.distribute) distributed::detail::start_data_parallel_fit(*this, x, options);
  const FitData data = split_fit_data(data::Pipeline(data::Dataset(x, y)), options);
  return FitLoop(*this, state, data, options).run();
}

History Model::fit(const data::Pipeline& train, FitOptions options) {
  models::TrainingState& state = models::require_compiled(*this, "fit");
  validate_fit_options(*this, options);
  check_pipeline(*this, train, "fit");
  validate_split_and_validation_data(*this, options);
  if (options.distribute) {
    distributed::detail::start_data_parallel_fit(*this, train.batch(0, 1).x, options);
  }
  const FitData data = split_fit_data(train, options);
  return FitLoop(*this, state, data, options).run();
}

bool Model::stop_training() const { return model_impl().stop_training; }
void Model::set_stop_training(bool stop) { model_impl().stop_training = stop; }

}  // namespace mixprec
