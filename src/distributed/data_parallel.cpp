// distributed::DataParallel (include/mixprec/distributed/data_parallel.h): the shard of a batch,
// the broadcast of the initial weights, and the gradient all-reduce in float32 buckets with the
// loss-scaling verdict agreed over the ranks.
#include "mixprec/distributed/data_parallel.h"

#include <string>
#include <vector>

#include "distributed/gradient_buckets.h"
#include "mixprec/cuda.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "optimizers/loss_scale_agreement.h"

namespace mixprec::distributed {

ShardRange shard_range(std::int64_t rows, int rank, int world) {
  if (rows < 0 || world < 1 || rank < 0 || rank >= world) {
    throw ValueError(
        "distributed::shard_range: needs rows >= 0, world >= 1 and 0 <= rank < world, "
        "got rows " +
        std::to_string(rows) + ", rank " + std::to_string(rank) + ", world " +
        std::to_string(world));
  }
  // rank * rows / world without overflow for any batch that fits in memory.
  return {rank * rows / world, (rank + 1) * rows / world};
}

void DataParallel::initialize() const { distributed::initialize(); }

Device DataParallel::device() const {
  const int gpus = cuda::device_count();
  return gpus > 0 ? Device::cuda(local_rank() % gpus) : Device::cpu();
}

ShardRange DataParallel::shard_range(std::int64_t rows) const {
  return distributed::shard_range(rows, rank(), world_size());
}

data::Batch DataParallel::shard(const data::Batch& global) const {
  if (!global.x.defined() || global.x.rank() < 1) {
    throw ValueError("DataParallel::shard: the batch needs defined features with a sample axis");
  }
  if (world_size() == 1) return global;
  const ShardRange r = shard_range(global.x.dim(0));
  data::Batch b;
  b.x = global.x.slice(0, r.start, r.stop);
  if (global.y.defined()) b.y = global.y.slice(0, r.start, r.stop);
  return b;
}

double DataParallel::shard_weight(std::int64_t rows) const {
  if (rows <= 0) {
    throw ValueError("DataParallel::shard_weight: the global batch needs at least one row, got " +
                     std::to_string(rows));
  }
  return static_cast<double>(shard_range(rows).size()) / static_cast<double>(rows);
}

void DataParallel::broadcast_variables(const std::vector<Tensor>& variables, int root) const {
  if (world_size() == 1) return;
  for (const Tensor& v : variables) {
    Tensor target = v;
    if (target.is_contiguous()) {
      broadcast(target, root);
    } else {
      Tensor staged = v.contiguous();
      broadcast(staged, root);
      v.assign(staged);
    }
  }
}

void DataParallel::all_reduce_gradients(const std::vector<Tensor>& gradients, double weight) const {
  if (bucket_bytes <= 0) {
    throw ValueError("DataParallel: bucket_bytes must be positive, got " +
                     std::to_string(bucket_bytes));
  }
  if (world_size() == 1) return;
  detail::all_reduce_in_buckets(gradients, weight, bucket_bytes);
}

void DataParallel::all_reduce_gradients(const mixed_precision::UnscaledGradients& gradients,
                                        double weight,
                                        mixed_precision::LossScaleOptimizer& optimizer) const {
  all_reduce_gradients(gradients.gradients(), weight);
  if (world_size() == 1) return;
  // Any rank's Inf/NaN skips the step everywhere (and the scale moves the same way everywhere).
  optimizers::detail::combine_found_inf(optimizer,
                                        [](Tensor& flag) { all_reduce(flag, ReduceOp::max); });
}

}  // namespace mixprec::distributed
