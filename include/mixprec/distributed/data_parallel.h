// Data-parallel training (issue 15), Keras-shaped: one switch, FitOptions::distribute (and
// EvaluateOptions::distribute), makes fit() and evaluate() run the same model on every process of
// the launcher's group (distributed.h), each on its own shard of every batch. The same pieces serve
// a custom training loop.
//
// What fit() does with `.distribute = mp::distributed::DataParallel{}`:
//  - joins the group (distributed::initialize()) and broadcasts every variable of the model
//    (trainable ones and non-trainable ones such as BatchNormalization's moving statistics) from
//    rank 0, so every rank starts from rank 0's weights;
//  - agrees on the shuffling seed (rank 0's, broadcast), so every rank draws the same epoch order;
//  - FitOptions::batch_size is the GLOBAL batch, as in Keras under a distribution strategy: rank r
//    of W takes rows [r*n/W, (r+1)*n/W) of each batch of n rows (the smaller last batch included),
//    so the shards are disjoint and their union is the single-process batch;
//  - the gradients (float32) are summed over the ranks in buckets of about bucket_bytes, each
//    rank's weighted by its share n_r / n of the batch (its loss is a mean over its shard), which
//    gives the gradient of the whole batch's mean loss. With `overlap` (the default) on a CPU
//    model the buckets follow the reverse order of the variables (the last layers' gradients are
//    final first, as in PyTorch DDP) and a communication thread reduces each one as soon as all
//    its gradients are final, while the backward pass goes on; otherwise (overlap = false, or a
//    model on a GPU) they are reduced after the backward pass;
//  - under loss scaling each rank unscales and checks its gradients, the gradients are reduced and
//    the Inf/NaN flag is reduced with max, so every rank skips the same steps and moves the loss
//    scale identically; the weights stay bitwise identical across ranks. When the reduction
//    overlaps the backward pass it runs on the scaled gradients, which are unscaled and checked
//    after it (exact for a power-of-two scale; an Inf or NaN of any rank reaches the sum), and
//    the flag is still reduced with max;
//  - the loss and metrics at the end of an epoch (and evaluate()'s scores) are over all ranks'
//    samples, so callbacks that change training (EarlyStopping, ReduceLROnPlateau, ...) decide
//    identically; a callback that stops training on one rank stops it on all at the same batch.
//    Between epoch ends the progress bar shows rank 0's own running values;
//  - only rank 0 prints progress and writes files (TensorBoard, CSVLogger, ModelCheckpoint,
//    BackupAndRestore; every rank restores from BackupAndRestore's files and takes the same
//    decisions); the other ranks are silent. A callback of your own runs on every rank: test
//    distributed::rank() == 0 before writing.
// In a group of one (no launcher) fit() with `distribute` trains exactly as without it.
//
// The custom loop, by hand (x, y: the global batch, the same on every rank):
//
//   mp::distributed::DataParallel dp;
//   dp.initialize();                                   // joins the group
//   dp.broadcast_variables(model.variables());         // rank 0's initial weights everywhere
//   auto opt = mp::mixed_precision::LossScaleOptimizer(mp::optimizers::SGD());
//   for (...) {
//     const mp::data::Batch shard = dp.shard({x, y});  // this rank's rows of the batch
//     mp::GradientTape tape;
//     const mp::Tensor loss = loss_fn(shard.y, model(shard.x, {.training = true}));
//     auto grads = opt.get_unscaled_gradients(tape.gradient(opt.get_scaled_loss(loss), vars));
//     dp.all_reduce_gradients(grads, dp.shard_weight(x.dim(0)), opt);  // + agrees on Inf/NaN
//     opt.apply_gradients(grads, vars);                // every rank skips the same steps
//   }
//
// Without loss scaling: dp.all_reduce_gradients(grads, dp.shard_weight(x.dim(0))) on the plain
// gradient list, then optimizer.apply_gradients(grads, vars).
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/data/dataset.h"
#include "mixprec/device.h"
#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::distributed {

// Rows [start, stop) of a batch that one rank takes.
struct ShardRange {
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::int64_t size() const { return stop - start; }
};

// Rows [rank*n/W, (rank+1)*n/W) of a batch of n rows among W ranks: disjoint, contiguous, their
// union is [0, n); sizes differ by at most one (a rank may get none when n < W). ValueError for
// n < 0, world < 1 or a rank outside [0, world).
ShardRange shard_range(std::int64_t rows, int rank, int world);

struct DataParallel {
  // Target size of one all-reduce of gradients (float32 bytes), as PyTorch DDP's bucket_cap_mb:
  // several gradients are flattened into one buffer of about this size and reduced in one call;
  // a gradient larger than this is a bucket of its own. Must be positive.
  std::int64_t bucket_bytes = std::int64_t{25} * 1024 * 1024;
  // fit(): reduce each bucket while the backward pass goes on (one communication thread per
  // process; CPU models only, a model on a GPU is reduced after the backward pass). false: after
  // the backward pass. Must be the same on every rank.
  bool overlap = true;

  // The device for this rank's model: Device::cuda(local_rank() % cuda::device_count()) when this
  // build has CUDA GPUs, else the CPU (call after initialize(): local_rank() is 0 before). fit()
  // trains wherever the model is; placing it elsewhere is the user's choice.
  Device device() const;

  // Joins the launcher's process group (distributed::initialize()).
  void initialize() const;
  // This rank's range of a batch of `rows` rows (shard_range with this process's rank and world).
  ShardRange shard_range(std::int64_t rows) const;
  // This rank's rows of a global batch (views of x and y; y may be undefined).
  data::Batch shard(const data::Batch& global) const;
  // This rank's share of a global batch of `rows` rows: shard rows / rows, the weight of its
  // gradients in the sum (1 in a group of one).
  double shard_weight(std::int64_t rows) const;

  // Every tensor set to rank 0's (root's) values, in place, in order (model.variables(): the
  // trainable and the non-trainable ones). Nothing happens in a group of one.
  void broadcast_variables(const std::vector<Tensor>& variables, int root = 0) const;

  // The gradients, in place: each multiplied by `weight` (this rank's shard_weight) and summed over
  // the ranks, in float32 buckets of about bucket_bytes. Every rank must pass gradients of the same
  // shapes in the same order; undefined ones are skipped (the same ones on every rank).
  // DTypeError for a gradient that is not float32. Nothing happens in a group of one.
  void all_reduce_gradients(const std::vector<Tensor>& gradients, double weight) const;
  // The same on the result of get_unscaled_gradients, then the optimizer's Inf/NaN flag reduced
  // with max, so that apply_gradients(grads, ...) skips the step on every rank when any rank saw
  // a non-finite gradient, and the loss scale moves identically everywhere.
  void all_reduce_gradients(const mixed_precision::UnscaledGradients& gradients, double weight,
                            mixed_precision::LossScaleOptimizer& optimizer) const;
};

}  // namespace mixprec::distributed

#pragma GCC visibility pop
