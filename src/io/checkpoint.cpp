// Training checkpoints (include/mixprec/io/checkpoint.h): capture, validation, restore.
#include "mixprec/io/checkpoint.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "distributed/data_parallel_training.h"
#include "io/checkpoint_state.h"
#include "io/json_limits.h"
#include "io/model_files.h"
#include "io/nonfinite.h"
#include "mixprec/callbacks/history.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/logging.h"
#include "mixprec/mixed_precision/loss_scale_optimizer.h"
#include "mixprec/mixed_precision/policy.h"
#include "mixprec/models/model.h"
#include "models/fit_run.h"
#include "models/model_impl.h"
#include "models/training_state.h"

namespace mixprec::io {

namespace {

using detail::TensorList;
using nlohmann::json;

constexpr const char* kFormat = "mixprec-checkpoint";
constexpr const char* kVersion = "1";
constexpr std::size_t kMaxStateDepth = 32;

// Every layer that owns a generator, by name, nested models included.
void collect_generators(const layers::Layer& layer, std::map<std::string, Generator*>& out) {
  if (Generator* g = layer.impl().own_generator()) out[layer.name()] = g;
  if (const auto* m = dynamic_cast<const models::ModelImpl*>(&layer.impl())) {
    for (const layers::Layer& l : m->layers()) collect_generators(l, out);
  }
}

optimizers::Optimizer compiled_optimizer(const Model& model, const std::string& what) {
  optimizers::Optimizer opt = model.optimizer();
  if (!opt.defined()) {
    throw ValueError(what + ": model '" + model.name() + "' is not compiled; a checkpoint holds " +
                     "the optimizer's state, so compile() the model first");
  }
  return opt;
}

// "learning_rate" (written when the optimizer's rate is a constant): a finite number >= 0.
void check_learning_rate(const json& state, const std::string& where) {
  if (!state.contains("learning_rate")) return;
  const json& rate = state["learning_rate"];
  if (!rate.is_number() || !std::isfinite(rate.get<double>()) || rate.get<double>() < 0) {
    throw IOError(where + ": state.learning_rate: must be a finite number >= 0, got " +
                  (rate.is_number() ? detail::format_number(rate.get<double>())
                                    : std::string("a JSON ") + rate.type_name()));
  }
}

// The skipped steps the optimizer's state holds (a LossScaleOptimizer's; 0 for any other).
double skipped_steps_of(const optimizers::OptimizerState& opt) {
  const auto it = opt.scalars.find("skipped_steps");
  return opt.name == "loss_scale_optimizer" && it != opt.scalars.end() ? it->second : 0.0;
}

// What a checkpoint holds, every field read and range-checked (IOError naming the file and the
// field's path otherwise).
CheckpointInfo info_from(const json& state, const TensorList& tensors, const std::string& where) {
  CheckpointInfo info;
  if (state.contains("model")) {
    if (!state["model"].is_string()) throw IOError(where + ": state.model: must be a string");
    info.model_name = state["model"].get<std::string>();
  }
  const optimizers::OptimizerState opt =
      detail::optimizer_from_json(state.at("optimizer"), "optimizer/", tensors, where);
  info.optimizer = opt.name;
  info.iterations = opt.iterations;
  if (const auto it = opt.scalars.find("loss_scale"); it != opt.scalars.end()) {
    info.loss_scale = it->second;
  }
  info.world_size = detail::world_size_from_json(state, where);
  check_learning_rate(state, where);
  if (state.contains("policy")) {
    const json& policy = state["policy"];
    if (!policy.is_string() || policy.get_ref<const std::string&>().size() > 64) {
      throw IOError(where + ": state.policy: must be a policy name (a string)");
    }
    info.policy = policy.get<std::string>();
  }
  if (state.contains("position")) {
    models::ResumePoint p = detail::position_from_json(state["position"], nullptr, where);
    if (state.contains("record")) {
      detail::record_from_json(state["record"], skipped_steps_of(opt), p, where);
    }
    info.in_fit = true;
    info.epoch = p.epoch;
    info.step = p.step;
  } else if (state.contains("record")) {
    throw IOError(where + ": state.record: present without state.position (a record belongs to " +
                  "a checkpoint written inside fit())");
  }
  return info;
}

// The metadata's state JSON, after the format checks.
json state_of(const SafetensorsContents& file, const std::string& where) {
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != kFormat) {
    throw IOError(where +
                  ": not a mixprec training checkpoint (its __metadata__ has no \"format\": "
                  "\"" +
                  std::string(kFormat) + "\"); a weights file loads with load_weights()");
  }
  const auto version = file.metadata.find("version");
  if (version == file.metadata.end() || version->second != kVersion) {
    throw IOError(where + ": checkpoint version " +
                  (version == file.metadata.end() ? std::string("(none)") : version->second) +
                  " is not supported (this mixprec reads version " + kVersion + ")");
  }
  const auto text = file.metadata.find("state");
  if (text == file.metadata.end()) throw IOError(where + ": the checkpoint has no \"state\"");
  // Checked on the text: the state is about 6 levels deep (a LossScaleOptimizer's inner state
  // inside it), and nothing may walk a deeper value, whether a key is read or not.
  if (const std::string deep = json_depth_problem(text->second, kMaxStateDepth); !deep.empty()) {
    throw IOError(where + ": __metadata__.state " + deep);
  }
  json state = json::parse(text->second, nullptr, false);
  if (state.is_discarded() || !state.is_object()) {
    throw IOError(where + ": __metadata__.state is not a valid JSON object");
  }
  if (!state.contains("optimizer")) throw IOError(where + ": state: missing \"optimizer\"");
  return state;
}

// The model's variables in variables() order, matched by name against the "model/" tensors:
// ValueError for a missing, extra, reshaped or retyped variable.
std::vector<Tensor> matched_weights(const Model& model, const TensorList& tensors,
                                    const std::string& where) {
  std::map<std::string, const Tensor*> saved;
  for (const auto& [name, t] : tensors) {
    if (name.rfind("model/", 0) == 0) saved[name.substr(6)] = &t;
  }
  std::vector<Tensor> weights;
  for (const layers::NamedVariable& v : model.named_variables()) {
    const auto it = saved.find(v.name);
    if (it == saved.end()) {
      throw ValueError(where + ": variable '" + v.name + "' of model '" + model.name() +
                       "' is not in the checkpoint; is it a checkpoint of another model?");
    }
    const Tensor& t = *it->second;
    if (t.shape() != v.value.shape() || t.dtype() != v.value.dtype()) {
      throw ValueError(where + ": variable '" + v.name + "': the checkpoint has " +
                       std::string(dtype_name(t.dtype())) + " " + t.shape().to_string() +
                       ", the model expects " + std::string(dtype_name(v.value.dtype())) + " " +
                       v.value.shape().to_string());
    }
    weights.push_back(t);
    saved.erase(it);
  }
  if (!saved.empty()) {
    throw ValueError(where + ": the checkpoint has variable '" + saved.begin()->first +
                     "', which model '" + model.name() + "' does not have (" +
                     std::to_string(saved.size()) +
                     " extra); is it a checkpoint of another model?");
  }
  return weights;
}

// The epochs a checkpoint at `next_epoch` keeps (0-based: those numbered 1..next_epoch): fit()'s
// History, and the epoch ending when the checkpoint is written from on_epoch_end (History records
// it after the other callbacks). Step times are left out (a run's worth of numbers in every file).
std::vector<EpochLog> recorded_epochs(const models::FitRun& run, int next_epoch) {
  std::vector<EpochLog> out;
  if (run.history) {
    for (const EpochLog& e : run.history->history().epochs) {
      if (e.epoch > next_epoch) continue;
      out.push_back(e);
      out.back().step_ms.clear();
    }
  }
  if (run.ending_logs && run.epoch + 1 <= next_epoch &&
      (out.empty() || out.back().epoch < run.epoch + 1)) {
    callbacks::History ending;
    ending.on_epoch_end(run.epoch, callbacks::Logs(*run.ending_logs));
    out.push_back(ending.history().epochs.back());
  }
  return out;
}

// The record of a running fit() (state "record"): its History so far and, inside an epoch, the
// epoch's running sums (in a data-parallel run the group's, gathered by gather_running_sums at
// this point; without them the record keeps none).
json record_of(const Model& model, const models::FitRun& run) {
  const models::ResumePoint next = run.next_point();
  std::optional<models::EpochSums> sums;
  const auto& training = model.model_impl().training;
  if (next.step > 0 && training) {
    if (distributed::world_size() == 1) {
      sums = models::EpochSums{training->train_metrics.sums(), run.skipped_before};
    } else if (run.group_sums && run.group_sums->epoch == next.epoch &&
               run.group_sums->step == next.step) {
      sums = run.group_sums->sums;
    }
  }
  return detail::record_to_json(recorded_epochs(run, next.epoch), sums);
}

// The record's running sums name what the model's training metrics are: ValueError otherwise
// (their sums cannot continue another metric's).
void check_sums_match(const Model& model, const models::EpochSums& sums, const std::string& where) {
  const models::MetricState& metrics = model.model_impl().training->train_metrics;
  std::string saved, compiled = "loss";
  for (const models::NamedSums& s : sums.sums) saved += (saved.empty() ? "" : ", ") + s.name;
  for (const metrics::Metric& m : metrics.metrics) compiled += ", " + m.name();
  if (saved != compiled) {
    throw ValueError(where + ": the checkpoint was taken inside an epoch whose training metrics " +
                     "were " + saved + "; model '" + model.name() + "' is compiled with " +
                     compiled + "; compile it with the metrics it was trained with");
  }
}

}  // namespace

namespace detail {

void gather_running_sums(const Model& model) {
  if (distributed::world_size() == 1) return;
  models::FitRun* run = model.model_impl().fit_run;
  const auto& training = model.model_impl().training;
  if (!run || !training) return;
  run->group_sums.reset();
  const models::ResumePoint next = run->next_point();
  if (next.step == 0) return;  // the same on every rank: they stand at the same batch
  run->group_sums = models::FitRun::GroupSums{
      next.epoch, next.step,
      models::EpochSums{distributed::detail::sums_across_ranks(training->train_metrics),
                        run->skipped_before}};
}

}  // namespace detail

void save_checkpoint(const Model& model, const std::filesystem::path& path) {
  const optimizers::Optimizer opt = compiled_optimizer(model, "save_checkpoint");
  TensorList tensors;
  for (const layers::NamedVariable& v : model.named_variables()) {
    tensors.emplace_back("model/" + v.name, v.value.to(Device::cpu()));
  }
  json state;
  state["model"] = model.name();
  state["world_size"] = distributed::world_size();
  state["policy"] = mixed_precision::global_policy().name();
  state["optimizer"] = detail::optimizer_to_json(opt.get_state(), "optimizer/", tensors);
  if (!opt.learning_rate_is_schedule()) state["learning_rate"] = opt.learning_rate();
  state["default_generator"] = detail::generator_to_json(default_generator().state());
  std::map<std::string, Generator*> generators;
  collect_generators(model, generators);
  state["generators"] = json::object();
  for (const auto& [name, g] : generators) {
    state["generators"][name] = detail::generator_to_json(g->state());
  }
  if (const models::FitRun* run = model.model_impl().fit_run) {
    state["position"] = detail::position_to_json(*run);
    state["record"] = record_of(model, *run);
  }
  Metadata metadata{{"format", kFormat}, {"version", kVersion}, {"state", state.dump()}};
  // The architecture and compile settings too, so that load_model() reads a checkpoint as it
  // reads a saved-model directory; a model with a part that cannot be described (a custom layer)
  // is checkpointed without them.
  try {
    metadata[detail::kCheckpointModelConfigKey] = detail::saved_model_config(model);
  } catch (const ValueError&) {
  }
  save_safetensors(path, tensors, metadata);
}

CheckpointInfo load_checkpoint(Model& model, const std::filesystem::path& path,
                               const LoadOptions& options) {
  const std::string where = path.string();
  optimizers::Optimizer opt = compiled_optimizer(model, "load_checkpoint");
  const SafetensorsContents file = load_safetensors(path);
  const json state = state_of(file, where);

  // Everything is checked before anything changes; the group's size first (the other checks
  // would name a symptom of it).
  detail::check_world_size(detail::world_size_from_json(state, where), distributed::world_size(),
                           where);
  // Every field of the state read and range-checked (the position and the record included,
  // whether this load resumes a fit() or not).
  const CheckpointInfo info = info_from(state, file.tensors, where);
  const std::vector<Tensor> weights = matched_weights(model, file.tensors, where);
  // The weights and the optimizer's slots: a NaN in either trains on as NaN.
  detail::check_finite(file.tensors, "", options, where);
  const optimizers::OptimizerState opt_state =
      detail::optimizer_from_json(state.at("optimizer"), "optimizer/", file.tensors, where);
  if (opt_state.name != opt.name()) {
    throw ValueError(where + ": the checkpoint holds the state of a '" + opt_state.name +
                     "' optimizer, model '" + model.name() + "' is compiled with '" + opt.name() +
                     "'; compile it with the optimizer it was trained with");
  }
  const GeneratorState default_state = detail::generator_from_json(
      state.contains("default_generator") ? state["default_generator"] : json(), where,
      "state.default_generator");
  std::map<std::string, Generator*> generators;
  collect_generators(model, generators);
  std::map<std::string, GeneratorState> generator_states;
  for (const auto& [name, g] : generators) {
    if (!state.contains("generators") || !state["generators"].contains(name)) {
      throw ValueError(where + ": layer '" + name + "' has its own random generator, which the " +
                       "checkpoint does not hold; is it a checkpoint of another model?");
    }
    generator_states[name] =
        detail::generator_from_json(state["generators"][name], where, "state.generators." + name);
  }
  models::FitRun* run = model.model_impl().fit_run;
  std::optional<models::ResumePoint> resume;
  if (run && state.contains("position")) {
    resume = detail::position_from_json(state["position"], run, where);
    if (state.contains("record")) {
      detail::record_from_json(state["record"], skipped_steps_of(opt_state), *resume, where);
      if (resume->epoch_sums) check_sums_match(model, *resume->epoch_sums, where);
    }
  }
  const bool has_rate = state.contains("learning_rate");
  check_learning_rate(state, where);
  if (has_rate && opt.learning_rate_is_schedule()) {
    throw ValueError(where + ": the checkpoint holds a constant learning rate but the optimizer " +
                     "has a schedule; compile it with the optimizer it was trained with");
  }

  try {
    opt.set_state(opt_state);  // validates its slots against what it has seen before writing
  } catch (const ValueError& e) {
    throw ValueError(where + ": state.optimizer: " + e.what());
  }
  model.set_weights(weights);
  if (has_rate) opt.set_learning_rate(state["learning_rate"].get<double>());
  default_generator().set_state(default_state);
  for (const auto& [name, g] : generators) g->set_state(generator_states[name]);
  if (resume) {
    run->resume = resume;
    if (!resume->history && (resume->epoch > 0 || resume->step > 0)) {
      log(LogLevel::warning,
          where + ": written before checkpoints kept the run's record: the History of this fit() " +
              "(and mixprec train's --metrics-json) starts at epoch " +
              std::to_string(resume->epoch + 1) +
              (resume->step > 0
                   ? ", and that epoch's training metrics count only its batches from " +
                         std::to_string(resume->step + 1)
                   : std::string()));
    }
  }
  return info;
}

CheckpointInfo read_checkpoint_info(const std::filesystem::path& path) {
  const SafetensorsContents file = load_safetensors(path);
  try {
    return info_from(state_of(file, path.string()), file.tensors, path.string());
  } catch (const json::exception& e) {
    throw IOError(path.string() + ": the checkpoint's state is malformed (" + e.what() + ")");
  }
}

}  // namespace mixprec::io
