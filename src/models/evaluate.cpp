// Model::evaluate and Model::predict on tensors and on a data::Pipeline: batched inference under
// NoGradScope (the tensor forms are pipelines without steps).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "data/prefetch.h"
#include "distributed/data_parallel_training.h"
#include "mixprec/autograd.h"
#include "mixprec/callbacks/progress_bar.h"
#include "mixprec/data/dataset.h"
#include "mixprec/data/pipeline.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/models/model.h"
#include "mixprec/ops.h"
#include "models/callback_list.h"
#include "models/label_check.h"
#include "models/training_state.h"

namespace mixprec {

namespace {

void check_batch_size(const Model& model, const char* what, std::int64_t batch_size) {
  if (batch_size <= 0) {
    throw ValueError("model '" + model.name() + "': " + what + "(): batch_size must be " +
                     "positive, got " + std::to_string(batch_size));
  }
}

// predict() on a pipeline: the outputs of every batch, concatenated. A compiled model runs its
// steps_per_execution batches per execution (the callbacks and the progress see executions).
Tensor predict_pipeline(Model& model, const data::Pipeline& data, const PredictOptions& options) {
  NoGradScope no_grad;
  const data::Epoch epoch = data.dataset().batches(options.batch_size);
  // The outputs stay on the model's device (as model(x) does); the inputs are prefetched there.
  data::Prefetcher batches(data, epoch, data::prefetch_options_for(models::model_device(model)));
  std::optional<callbacks::ProgressBar> progress = models::make_progress(options.verbose);
  const auto& training = model.model_impl().training;
  const std::int64_t per_execution = training ? training->options.steps_per_execution : 1;
  models::CallbackList callbacks(model, options.callbacks, Verbosity::silent, false,
                                 {.steps = epoch.size()});
  if (progress) progress->start(epoch.size());
  std::vector<Tensor> outputs;
  outputs.reserve(static_cast<std::size_t>(epoch.size()));
  try {
    callbacks.on_predict_begin({});
    for (std::int64_t first = 0; first < epoch.size(); first += per_execution) {
      const std::int64_t end = std::min(epoch.size(), first + per_execution);
      callbacks.on_predict_batch_begin(first, {});
      for (std::int64_t i = first; i < end; ++i) {
        outputs.push_back(model(batches.next().x, CallOptions{.training = false}));
      }
      callbacks.on_predict_batch_end(end - 1, {});
      if (progress && progress->due()) progress->update(end, {});
    }
    callbacks.on_predict_end({});
  } catch (...) {
    if (progress) progress->interrupt();
    throw;
  }
  if (progress) progress->finish({});
  // concat copies even a single batch, so the result never aliases x (an identity model).
  return concat(outputs, 0);
}

}  // namespace

namespace models {

Scores evaluate_with_callbacks(Model& model, TrainingState& state, const data::Pipeline& data,
                               std::int64_t batch_size, CallbackList& callbacks,
                               const distributed::DataParallel* data_parallel) {
  MetricState& counted = state.test_metrics;  // never fit()'s training metrics
  counted.reset();
  NoGradScope no_grad;
  const data::Epoch epoch = data.dataset().batches(batch_size);
  // Batches on the model's device, prefetched by a producer thread on a GPU (data/prefetch.h);
  // data-parallel: this rank's rows of each.
  data::Prefetcher batches(
      epoch.size(),
      [&data, &epoch, data_parallel](std::int64_t i) {
        return data_parallel ? distributed::detail::shard_of_batch(*data_parallel, data, epoch, i)
                             : data.apply(epoch.batch(i));
      },
      data::prefetch_options_for(model_device(model)));
  callbacks.set_steps(epoch.size());
  callbacks.on_test_begin({});
  const std::int64_t per_execution = state.options.steps_per_execution;
  try {
    for (std::int64_t first = 0; first < epoch.size(); first += per_execution) {
      const std::int64_t end = std::min(epoch.size(), first + per_execution);
      callbacks.on_test_batch_begin(first, {});
      for (std::int64_t i = first; i < end; ++i) {
        const data::Batch batch = batches.next();
        // A data-parallel rank may have no rows of a small last batch: it counts nothing.
        if (batch.x.dim(0) > 0) {
          const Tensor y_pred = model(batch.x, CallOptions{.training = false});
          counted.update(batch_loss(state, batch.y, y_pred), batch.x.dim(0), batch.y, y_pred);
        }
      }
      // Read only when a callback looks (the progress bar: when it redraws).
      callbacks.on_test_batch_end(end - 1,
                                  callbacks::Logs::lazy([&counted] { return counted.results(); }));
    }
  } catch (...) {
    callbacks.interrupt();
    throw;
  }
  Scores scores{data_parallel ? distributed::detail::results_across_ranks(counted)
                              : counted.results()};
  callbacks.on_test_end(callbacks::Logs(scores.values));
  return scores;
}

}  // namespace models

namespace {
Scores evaluate_pipeline(Model& model, models::TrainingState& state, const data::Pipeline& data,
                         const EvaluateOptions& options) {
  const distributed::DataParallel* dp = options.distribute ? &*options.distribute : nullptr;
  if (dp) dp->initialize();
  // Data-parallel: only rank 0 prints.
  const Verbosity verbose = dp && distributed::rank() != 0
                                ? Verbosity::silent
                                : models::resolve_verbosity(options.verbose);
  models::CallbackList callbacks(model, options.callbacks, verbose, false, {});
  return models::evaluate_with_callbacks(model, state, data, options.batch_size, callbacks, dp);
}
}  // namespace

Scores Model::evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options) {
  models::TrainingState& state = models::require_compiled(*this, "evaluate");
  check_batch_size(*this, "evaluate", options.batch_size);
  models::check_samples(x, y, "evaluate");
  models::check_sparse_labels(*this, state, y, "evaluate()");
  return evaluate_pipeline(*this, state, data::Pipeline(x, y), options);
}

Scores Model::evaluate(const data::Pipeline& data, EvaluateOptions options) {
  models::TrainingState& state = models::require_compiled(*this, "evaluate");
  check_batch_size(*this, "evaluate", options.batch_size);
  if (data.size() == 0 || !data.has_targets()) {
    throw ValueError("model '" + name() + "': evaluate() needs a data::Pipeline with targets " +
                     "and at least one sample, got " +
                     (data.size() == 0 ? std::string("an empty one")
                                       : std::to_string(data.size()) + " samples without targets") +
                     "; build it as Pipeline(x, y)");
  }
  return evaluate_pipeline(*this, state, data, options);
}

Tensor Model::predict(const Tensor& x, PredictOptions options) {
  check_batch_size(*this, "predict", options.batch_size);
  if (!x.defined() || x.rank() < 1 || x.dim(0) == 0) {
    throw ValueError("model '" + name() + "': predict() needs x with at least one sample " +
                     "along the first axis, got " +
                     (x.defined() ? std::string(dtype_name(x.dtype())) + " " + x.shape().to_string()
                                  : std::string("an undefined tensor")));
  }
  return predict_pipeline(*this, data::Pipeline(data::Dataset(x)), options);
}

Tensor Model::predict(const data::Pipeline& data, PredictOptions options) {
  check_batch_size(*this, "predict", options.batch_size);
  if (data.size() == 0) {
    throw ValueError("model '" + name() + "': predict() needs a data::Pipeline with at least " +
                     "one sample, got an empty one");
  }
  return predict_pipeline(*this, data, options);
}

}  // namespace mixprec
