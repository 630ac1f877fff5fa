// The JSON side of a training checkpoint (src/io/checkpoint_state.h).
#include "io/checkpoint_state.h"

#include <string>

#include "mixprec/error.h"

namespace mixprec::io::detail {

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& problem) {
  throw IOError(where + ": " + problem);
}

const json& field(const json& j, const char* key, json::value_t type, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) bad(where, std::string("missing \"") + key + "\"");
  const json& v = j.at(key);
  const bool ok = v.type() == type || (type == json::value_t::number_float && v.is_number()) ||
                  (type == json::value_t::number_integer && v.is_number_integer()) ||
                  (type == json::value_t::number_unsigned && v.is_number_unsigned());
  if (!ok) bad(where, std::string("\"") + key + "\" has the wrong type");
  return v;
}

const Tensor& find_tensor(const TensorList& tensors, const std::string& name,
                          const std::string& where) {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  bad(where, "the tensor '" + name + "' is missing");
}

}  // namespace

json optimizer_to_json(const optimizers::OptimizerState& state, const std::string& prefix,
                       TensorList& tensors) {
  json j;
  j["name"] = state.name;
  j["iterations"] = state.iterations;
  j["scalars"] = json::object();
  for (const auto& [name, value] : state.scalars) j["scalars"][name] = value;
  j["slots"] = json::array();
  for (const optimizers::NamedTensor& slot : state.slots) {
    j["slots"].push_back(slot.name);
    tensors.emplace_back(prefix + slot.name, slot.value);
  }
  j["inner"] = json::array();
  for (std::size_t i = 0; i < state.inner.size(); ++i) {
    const std::string inner_prefix = prefix + "inner" + (i ? std::to_string(i) : "") + "/";
    j["inner"].push_back(optimizer_to_json(state.inner[i], inner_prefix, tensors));
  }
  return j;
}

optimizers::OptimizerState optimizer_from_json(const json& j, const std::string& prefix,
                                               const TensorList& tensors,
                                               const std::string& where) {
  optimizers::OptimizerState state;
  state.name = field(j, "name", json::value_t::string, where).get<std::string>();
  state.iterations =
      field(j, "iterations", json::value_t::number_integer, where).get<std::int64_t>();
  if (state.iterations < 0) bad(where, "negative optimizer iterations");
  for (const auto& [name, value] : field(j, "scalars", json::value_t::object, where).items()) {
    if (!value.is_number()) bad(where, "optimizer scalar '" + name + "' is not a number");
    state.scalars[name] = value.get<double>();
  }
  for (const json& slot : field(j, "slots", json::value_t::array, where)) {
    if (!slot.is_string()) bad(where, "an optimizer slot name is not a string");
    const std::string name = slot.get<std::string>();
    state.slots.push_back({name, find_tensor(tensors, prefix + name, where)});
  }
  const json& inner = field(j, "inner", json::value_t::array, where);
  for (std::size_t i = 0; i < inner.size(); ++i) {
    const std::string inner_prefix = prefix + "inner" + (i ? std::to_string(i) : "") + "/";
    state.inner.push_back(optimizer_from_json(inner[i], inner_prefix, tensors, where));
  }
  return state;
}

json generator_to_json(const GeneratorState& state) {
  json words = json::array();
  for (std::uint64_t w : state.words) words.push_back(w);
  return {{"words", words}, {"has_spare", state.has_spare}, {"spare", state.spare}};
}

GeneratorState generator_from_json(const json& j, const std::string& where) {
  GeneratorState state;
  const json& words = field(j, "words", json::value_t::array, where);
  if (words.size() != state.words.size()) bad(where, "a generator state needs 4 words");
  for (std::size_t i = 0; i < state.words.size(); ++i) {
    if (!words[i].is_number_unsigned()) bad(where, "a generator word is not an unsigned integer");
    state.words[i] = words[i].get<std::uint64_t>();
  }
  if (state.words[0] == 0 && state.words[1] == 0 && state.words[2] == 0 && state.words[3] == 0) {
    bad(where, "a generator state is all zero");
  }
  state.has_spare = field(j, "has_spare", json::value_t::boolean, where).get<bool>();
  state.spare = field(j, "spare", json::value_t::number_float, where).get<double>();
  return state;
}

json position_to_json(const models::FitRun& run) {
  const models::ResumePoint p = run.next_point();
  return {{"epoch", p.epoch},
          {"step", p.step},
          {"loader", generator_to_json(p.loader_state)},
          {"batch_size", run.batch_size},
          {"steps_per_epoch", run.steps}};
}

models::ResumePoint position_from_json(const json& j, const models::FitRun& run,
                                       const std::string& where) {
  models::ResumePoint p;
  p.epoch = field(j, "epoch", json::value_t::number_integer, where).get<int>();
  p.step = field(j, "step", json::value_t::number_integer, where).get<std::int64_t>();
  p.loader_state = generator_from_json(field(j, "loader", json::value_t::object, where), where);
  const auto batch_size =
      field(j, "batch_size", json::value_t::number_integer, where).get<std::int64_t>();
  const auto steps =
      field(j, "steps_per_epoch", json::value_t::number_integer, where).get<std::int64_t>();
  if (p.epoch < 0 || p.step < 0 || p.step >= steps) bad(where, "the position is out of range");
  if (batch_size != run.batch_size || steps != run.steps) {
    throw ValueError(where + ": the checkpoint was taken with batch_size " +
                     std::to_string(batch_size) + " and " + std::to_string(steps) +
                     " batches per epoch, this fit() has batch_size " +
                     std::to_string(run.batch_size) + " and " + std::to_string(run.steps) +
                     "; resume with the same data and batch size, or start a new run in "
                     "another directory");
  }
  return p;
}

int world_size_from_json(const json& state, const std::string& where) {
  if (!state.is_object() || !state.contains("world_size")) return 1;
  const json& v = state.at("world_size");
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > (1 << 24)) {
    bad(where, "\"world_size\" is not a positive integer");
  }
  return v.get<int>();
}

void check_world_size(int saved, int current, const std::string& where) {
  if (saved == current) return;
  throw ValueError(where + ": the checkpoint was written by a group of " + std::to_string(saved) +
                   " process" + (saved == 1 ? "" : "es") + " (world size " + std::to_string(saved) +
                   "), this run has world size " + std::to_string(current) +
                   "; resume it with mpirun -np " + std::to_string(saved) +
                   (saved == 1 ? " or without mpirun" : "") +
                   ", or start a new run in another directory");
}

}  // namespace mixprec::io::detail
