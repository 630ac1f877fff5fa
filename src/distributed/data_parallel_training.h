// What fit() and evaluate() do differently under FitOptions::distribute / EvaluateOptions::
// distribute (include/mixprec/distributed/data_parallel.h): the start of a data-parallel fit, this
// rank's shard of an epoch's batch, the metrics over all ranks, and the agreement on stopping.
// Internal; src/distributed/data_parallel_training.cpp. Called only when the switch is on.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/data/dataset.h"
#include "mixprec/data/pipeline.h"
#include "mixprec/distributed/data_parallel.h"
#include "mixprec/models/model.h"
#include "mixprec/models/training.h"

namespace mixprec::models {
struct MetricState;
struct NamedSums;
}  // namespace mixprec::models

namespace mixprec::distributed::detail {

// The start of a data-parallel fit(): joins the group, builds an unbuilt model on one sample of
// `sample_x` (so that it has variables), broadcasts every variable from rank 0, and makes the
// shuffling seed rank 0's (drawn there when options.seed is unset).
void start_data_parallel_fit(Model& model, const Tensor& sample_x, FitOptions& options);

// This rank's rows of batch `i` of `epoch` (a pass over pipeline.dataset()), with the pipeline's
// steps applied. A rank whose share of a batch is empty gets a batch of zero rows, unprocessed.
data::Batch shard_of_batch(const DataParallel& dp, const data::Pipeline& pipeline,
                           const data::Epoch& epoch, std::int64_t i);

// The rows of batch `i` of `epoch` (the global batch).
std::int64_t global_batch_rows(const data::Epoch& epoch, std::int64_t i);

// "loss" then each metric over the samples of every rank (a collective: every rank calls it at the
// same point). Each value is the sample-weighted mean of the ranks' values: exact for the built-in
// metrics, whose counts are proportional to the samples (every sample of a batch counts the same).
std::vector<std::pair<std::string, double>> results_across_ranks(const models::MetricState& state);

// The running sums (MetricState::sums()) of every rank added up, on every rank: a collective.
std::vector<models::NamedSums> sums_across_ranks(const models::MetricState& state);

// Whether any rank wants to stop (a collective; in a group of one, `stop` itself).
bool any_rank(bool stop);

}  // namespace mixprec::distributed::detail
