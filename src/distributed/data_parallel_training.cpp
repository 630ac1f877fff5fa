// Data-parallel fit() and evaluate() pieces (data_parallel_training.h).
#include "distributed/data_parallel_training.h"

#include <algorithm>
#include <string>

#include "mixprec/autograd.h"
#include "mixprec/creation.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/random.h"
#include "models/training_state.h"

namespace mixprec::distributed::detail {

void start_data_parallel_fit(Model& model, const Tensor& sample_x, FitOptions& options) {
  if (options.distribute->bucket_bytes <= 0) {
    throw ValueError("model '" + model.name() + "': fit(): distribute.bucket_bytes must be " +
                     "positive, got " + std::to_string(options.distribute->bucket_bytes));
  }
  options.distribute->initialize();
  if (!model.built()) {
    // An unbuilt Sequential gets its variables on its first call: make them now, then take rank
    // 0's values (inference mode: no dropout draw, no moving-statistics update).
    NoGradScope no_grad;
    model(sample_x.slice(0, 0, 1), CallOptions{.training = false});
  }
  options.distribute->broadcast_variables(model.variables());
  if (world_size() == 1) return;
  // The seed is 64 bits: broadcast as an int64 tensor (a double would lose bits above 2^53).
  const std::uint64_t mine = options.seed ? *options.seed : default_generator().next_u64();
  Tensor seed = full(Shape{1}, 0.0, {.dtype = DType::int64, .device = Device::cpu()});
  seed.data<std::int64_t>()[0] = static_cast<std::int64_t>(mine);
  broadcast(seed, 0);
  options.seed = static_cast<std::uint64_t>(seed.data<std::int64_t>()[0]);
}

std::int64_t global_batch_rows(const data::Epoch& epoch, std::int64_t i) {
  const auto n = static_cast<std::int64_t>(epoch.order().size());
  const std::int64_t start = i * epoch.batch_size();
  return std::min(start + epoch.batch_size(), n) - start;
}

data::Batch shard_of_batch(const DataParallel& dp, const data::Pipeline& pipeline,
                           const data::Epoch& epoch, std::int64_t i) {
  const data::Dataset& ds = pipeline.dataset();
  const std::int64_t start = i * epoch.batch_size();
  const ShardRange r = dp.shard_range(global_batch_rows(epoch, i));
  if (r.size() == 0) {
    data::Batch empty;
    empty.x = ds.features().slice(0, 0, 0);
    if (ds.has_targets()) empty.y = ds.targets().slice(0, 0, 0);
    return empty;
  }
  const std::vector<std::int64_t>& order = epoch.order();
  const std::vector<std::int64_t> rows(order.begin() + start + r.start,
                                       order.begin() + start + r.stop);
  data::Batch b;
  b.x = data::take_rows(ds.features(), rows);
  if (ds.has_targets()) b.y = data::take_rows(ds.targets(), rows);
  return pipeline.apply(std::move(b));
}

std::vector<std::pair<std::string, double>> results_across_ranks(const models::MetricState& state) {
  std::vector<std::pair<std::string, double>> local = state.results();
  if (world_size() == 1) return local;
  // One all-reduce of [samples, samples * value...] in float64.
  const double samples = state.loss.count;
  Tensor packed = zeros(Shape{static_cast<std::int64_t>(local.size() + 1)},
                        {.dtype = DType::float64, .device = Device::cpu()});
  double* p = packed.data<double>();
  p[0] = samples;
  for (std::size_t k = 0; k < local.size(); ++k) p[k + 1] = samples * local[k].second;
  all_reduce(packed, ReduceOp::sum);
  for (std::size_t k = 0; k < local.size(); ++k) {
    local[k].second = p[0] > 0.0 ? p[k + 1] / p[0] : 0.0;
  }
  return local;
}

std::vector<models::NamedSums> sums_across_ranks(const models::MetricState& state) {
  std::vector<models::NamedSums> sums = state.sums();
  if (world_size() == 1) return sums;
  // One all-reduce of [count, total] per running mean, in float64.
  Tensor packed = zeros(Shape{static_cast<std::int64_t>(2 * sums.size())},
                        {.dtype = DType::float64, .device = Device::cpu()});
  double* p = packed.data<double>();
  for (std::size_t k = 0; k < sums.size(); ++k) {
    p[2 * k] = sums[k].count;
    p[2 * k + 1] = sums[k].total;
  }
  all_reduce(packed, ReduceOp::sum);
  for (std::size_t k = 0; k < sums.size(); ++k) {
    sums[k].count = p[2 * k];
    sums[k].total = p[2 * k + 1];
  }
  return sums;
}

bool any_rank(bool stop) {
  if (world_size() == 1) return stop;
  return all_reduce(stop ? 1.0 : 0.0, ReduceOp::max) > 0.0;
}

}  // namespace mixprec::distributed::detail
