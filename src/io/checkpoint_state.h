// The JSON side of a training checkpoint (include/mixprec/io/checkpoint.h): optimizer states
// flattened to named tensors plus a JSON tree, generator states, and the fit() position. Internal
// to src/io/checkpoint.cpp; split out so that each file holds one concern.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/models/training.h"
#include "mixprec/optimizers/optimizer.h"

namespace mixprec {
class Model;
}
#include "mixprec/random.h"
#include "models/fit_run.h"

namespace mixprec::io::detail {

using TensorList = std::vector<std::pair<std::string, Tensor>>;

// The optimizer state as JSON (name, iterations, scalars, slot names, inner states); its slots are
// appended to `tensors` as "<prefix><slot name>" ("optimizer/momentum/0",
// "optimizer/inner/velocity/3").
nlohmann::json optimizer_to_json(const optimizers::OptimizerState& state, const std::string& prefix,
                                 TensorList& tensors);
// The inverse: the slots are looked up by name in `tensors`. IOError "<where>: <path>.<key>: ..."
// for a malformed tree, a value out of its range (iterations, a LossScaleOptimizer's loss scale
// and counters) or a missing slot tensor; `path` is the tree's place in the state
// ("state.optimizer").
optimizers::OptimizerState optimizer_from_json(const nlohmann::json& j, const std::string& prefix,
                                               const TensorList& tensors, const std::string& where,
                                               const std::string& path = "state.optimizer");

nlohmann::json generator_to_json(const GeneratorState& state);
GeneratorState generator_from_json(const nlohmann::json& j, const std::string& where,
                                   const std::string& path);

nlohmann::json position_to_json(const models::FitRun& run);
// The point fit() continues from, each field in its range (IOError naming it); with a `run`,
// also checked against the running fit() (batch size and batches per epoch: ValueError).
models::ResumePoint position_from_json(const nlohmann::json& j, const models::FitRun* run,
                                       const std::string& where);

// The run's record (state "record"), written with the position: the epochs fit()'s History
// recorded before the position's epoch (metrics, seconds, loss scale, skipped steps; not the step
// times) and, for a position inside an epoch, that epoch's running sums. Non-finite values are
// the strings "nan", "inf" and "-inf" (JSON has no number for them).
nlohmann::json record_to_json(const std::vector<EpochLog>& epochs,
                              const std::optional<models::EpochSums>& sums);
// The inverse, every field checked (IOError "<where>: state.record...: ..."): epochs numbered
// 1..`point.epoch`, increasing; sums only for a point inside an epoch, "loss" first, counts whole,
// the skipped steps before the epoch at most `skipped_steps` (the optimizer's). Fills
// point.history and point.epoch_sums.
void record_from_json(const nlohmann::json& j, double skipped_steps, models::ResumePoint& point,
                      const std::string& where);

// A number as messages show it: printf's %g (1e-50, 1e+40).
std::string format_number(double value);

// Data-parallel fit(): the training metrics' running sums of every rank added up and kept in the
// run (FitRun::group_sums) for a checkpoint that rank 0 then writes at this point. A collective:
// every rank calls it at the same batch, wherever a callback may checkpoint (before deciding
// whether to); nothing without a group or outside fit().
void gather_running_sums(const Model& model);

// The world size a checkpoint's state records ("world_size"; 1 when absent: checkpoints written
// before the field, all by one process). IOError for a value that is not a positive integer.
int world_size_from_json(const nlohmann::json& state, const std::string& where);
// ValueError naming both sizes when a checkpoint written by `saved` processes is loaded by a group
// of `current`: the shards, the global batch and the position in the epoch depend on it.
void check_world_size(int saved, int current, const std::string& where);

}  // namespace mixprec::io::detail
