// The JSON side of a training checkpoint (src/io/checkpoint_state.h).
//
// Every value is checked against its range here, where the file and the field's path are known
// ("ckpt-3.safetensors: state.optimizer.scalars.loss_scale: must be a number in (0, 1.70141e+38],
// got 1e+40"); nothing is clamped or truncated into range, and a number too large for its type
// (an epoch of 2^32 + 2, an iteration count of 2^63) is out of range, not wrapped.
#include "io/checkpoint_state.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "mixprec/error.h"

namespace mixprec::io::detail {

namespace {

using nlohmann::json;

// The largest loss scale a LossScaleOptimizer holds (src/optimizers/loss_scale.cpp: 2^127).
constexpr double kMaxLossScale = 0x1p127;
// Counters stored as JSON numbers read back as doubles by the optimizer: integers up to 2^53
// are exact.
constexpr std::int64_t kMaxCounter = std::int64_t{1} << 53;

[[noreturn]] void bad(const std::string& where, const std::string& path,
                      const std::string& problem) {
  throw IOError(where + ": " + path + ": " + problem);
}

// A number as a message shows it: integers in full (at most 20 digits), others with %g (1e-50,
// not 0.000000; 1e+300, not 300 digits); anything else by its JSON type.
std::string shown(const json& v) {
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number_float()) return format_number(v.get<double>());
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return s.size() > 24 ? "a string \"" + s.substr(0, 21) + "...\"" : "\"" + s + "\"";
  }
  return std::string("a JSON ") + v.type_name();
}

std::string child(const std::string& path, const std::string& key) { return path + "." + key; }

const json& field(const json& j, const char* key, json::value_t type, const std::string& where,
                  const std::string& path) {
  if (!j.is_object()) bad(where, path, std::string("expected an object, got ") + shown(j));
  if (!j.contains(key)) bad(where, path, std::string("missing \"") + key + "\"");
  const json& v = j.at(key);
  const bool ok = v.type() == type || (type == json::value_t::number_float && v.is_number()) ||
                  (type == json::value_t::number_integer && v.is_number_integer()) ||
                  (type == json::value_t::number_unsigned && v.is_number_unsigned());
  if (!ok) {
    const char* expected = type == json::value_t::string           ? "a string"
                           : type == json::value_t::object         ? "an object"
                           : type == json::value_t::array          ? "an array"
                           : type == json::value_t::boolean        ? "true or false"
                           : type == json::value_t::number_float   ? "a number"
                           : type == json::value_t::number_integer ? "an integer"
                                                                   : "a non-negative integer";
    bad(where, child(path, key), std::string("must be ") + expected + ", got " + shown(v));
  }
  return v;
}

// An integer field in [lo, hi]; a float, or an integer beyond int64 (JSON unsigned), is refused
// with its value rather than converted.
std::int64_t integer_in(const json& j, const char* key, std::int64_t lo, std::int64_t hi,
                        const std::string& where, const std::string& path) {
  if (!j.is_object()) bad(where, path, std::string("expected an object, got ") + shown(j));
  if (!j.contains(key)) bad(where, path, std::string("missing \"") + key + "\"");
  const json& v = j.at(key);
  const auto out_of_range = [&] {
    bad(where, child(path, key),
        "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
            shown(v));
  };
  if (!v.is_number_integer()) out_of_range();
  if (v.is_number_unsigned() &&
      v.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    out_of_range();
  }
  const std::int64_t n = v.get<std::int64_t>();
  if (n < lo || n > hi) out_of_range();
  return n;
}

// A finite number field in [lo, hi] (lo excluded when `open_low`).
double number_in(const json& v, double lo, double hi, bool open_low, const std::string& where,
                 const std::string& path) {
  const bool ok = v.is_number() && std::isfinite(v.get<double>()) &&
                  (open_low ? v.get<double>() > lo : v.get<double>() >= lo) &&
                  v.get<double>() <= hi;
  if (!ok) {
    bad(where, path,
        "must be a number in " + std::string(open_low ? "(" : "[") + format_number(lo) + ", " +
            format_number(hi) + "], got " + shown(v));
  }
  return v.get<double>();
}

const Tensor& find_tensor(const TensorList& tensors, const std::string& name,
                          const std::string& where, const std::string& path) {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  bad(where, path, "the tensor '" + name + "' is missing");
}

// The ranges of a LossScaleOptimizer's scalars ("loss_scale_optimizer") (its set_state checks them
// again, without the file's name).
void check_loss_scale_scalars(const json& scalars, const std::string& where,
                              const std::string& path) {
  const auto get = [&](const char* key) -> const json& {
    if (!scalars.contains(key)) bad(where, path, std::string("missing \"") + key + "\"");
    return scalars.at(key);
  };
  number_in(get("loss_scale"), 0.0, kMaxLossScale, true, where, child(path, "loss_scale"));
  if (static_cast<float>(get("loss_scale").get<double>()) == 0.0f) {
    bad(where, child(path, "loss_scale"),
        "must be at least the smallest float32, got " + shown(get("loss_scale")));
  }
  double counts[3];
  const char* counters[] = {"dynamic_counter", "skipped_steps", "consecutive_skipped_steps"};
  for (int i = 0; i < 3; ++i) {
    counts[i] = number_in(get(counters[i]), 0.0, static_cast<double>(kMaxCounter), false, where,
                          child(path, counters[i]));
    if (std::floor(counts[i]) != counts[i]) {
      bad(where, child(path, counters[i]),
          "must be a whole number, got " + shown(get(counters[i])));
    }
  }
  if (counts[2] > counts[1]) {
    bad(where, child(path, "consecutive_skipped_steps"),
        "is " + format_number(counts[2]) + ", more than skipped_steps " + format_number(counts[1]));
  }
  const double last =
      number_in(get("last_step_skipped"), 0.0, 1.0, false, where, child(path, "last_step_skipped"));
  if (last != 0.0 && last != 1.0) {
    bad(where, child(path, "last_step_skipped"), "must be 0 or 1, got " + format_number(last));
  }
}

// A value of the record: a number, or "nan", "inf", "-inf" for the ones JSON cannot hold.
json any_number_to_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double any_number(const json& v, const std::string& where, const std::string& path) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  bad(where, path, "must be a number, \"nan\", \"inf\" or \"-inf\", got " + shown(v));
}

// A whole number in [0, kMaxCounter] stored as a JSON number (a sum of counts, a float).
double whole_count(const json& v, const std::string& where, const std::string& path) {
  const double n = number_in(v, 0.0, static_cast<double>(kMaxCounter), false, where, path);
  if (std::floor(n) != n) bad(where, path, "must be a whole number, got " + shown(v));
  return n;
}

// Names of metrics in the record: what a compile() could have named them.
constexpr std::size_t kMaxMetricName = 256;
constexpr std::size_t kMaxMetrics = 1024;

const std::string& metric_name(const json& v, const std::string& where, const std::string& path) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty() ||
      v.get_ref<const std::string&>().size() > kMaxMetricName) {
    bad(where, path,
        "must be a metric name (a string of 1 to " + std::to_string(kMaxMetricName) +
            " characters), got " + shown(v));
  }
  return v.get_ref<const std::string&>();
}

EpochLog epoch_from_json(const json& j, int after, int last, const std::string& where,
                         const std::string& path) {
  EpochLog log;
  log.epoch = static_cast<int>(integer_in(j, "epoch", after + 1, last, where, path));
  const json& metrics = field(j, "metrics", json::value_t::object, where, path);
  if (metrics.size() > kMaxMetrics) {
    bad(where, child(path, "metrics"),
        "holds " + std::to_string(metrics.size()) + " values, more than " +
            std::to_string(kMaxMetrics));
  }
  for (const auto& [name, value] : metrics.items()) {
    const std::string value_path = child(child(path, "metrics"), name.substr(0, kMaxMetricName));
    metric_name(json(name), where, child(path, "metrics"));
    log.metrics[name] = any_number(value, where, value_path);
  }
  log.seconds = number_in(field(j, "seconds", json::value_t::number_float, where, path), 0.0,
                          std::numeric_limits<double>::max(), false, where, child(path, "seconds"));
  if (j.contains("loss_scale")) {
    log.loss_scale =
        number_in(j.at("loss_scale"), 0.0, kMaxLossScale, true, where, child(path, "loss_scale"));
  }
  log.skipped_steps = integer_in(j, "skipped_steps", 0, kMaxCounter, where, path);
  return log;
}

}  // namespace

json record_to_json(const std::vector<EpochLog>& epochs,
                    const std::optional<models::EpochSums>& sums) {
  json out;
  out["epochs"] = json::array();
  for (const EpochLog& e : epochs) {
    json metrics = json::object();
    for (const auto& [name, value] : e.metrics) metrics[name] = any_number_to_json(value);
    json entry = {{"epoch", e.epoch},
                  {"metrics", metrics},
                  {"seconds", e.seconds},
                  {"skipped_steps", e.skipped_steps}};
    if (e.loss_scale) entry["loss_scale"] = *e.loss_scale;
    out["epochs"].push_back(std::move(entry));
  }
  if (sums) {
    json list = json::array();
    for (const models::NamedSums& s : sums->sums) {
      list.push_back(
          {{"name", s.name}, {"count", s.count}, {"total", any_number_to_json(s.total)}});
    }
    out["epoch_sums"] = {{"sums", list}, {"skipped_before", sums->skipped_before}};
  }
  return out;
}

void record_from_json(const json& j, double skipped_steps, models::ResumePoint& point,
                      const std::string& where) {
  const std::string path = "state.record";
  const json& epochs = field(j, "epochs", json::value_t::array, where, path);
  if (epochs.size() > static_cast<std::size_t>(point.epoch)) {
    bad(where, child(path, "epochs"),
        "must hold at most " + std::to_string(point.epoch) + " epochs (the run stands at epoch " +
            std::to_string(point.epoch + 1) + "), got " + std::to_string(epochs.size()));
  }
  std::vector<EpochLog> history;
  int last = 0;
  for (std::size_t i = 0; i < epochs.size(); ++i) {
    history.push_back(epoch_from_json(epochs[i], last, point.epoch, where,
                                      child(path, "epochs") + "[" + std::to_string(i) + "]"));
    last = history.back().epoch;
  }
  point.history = std::move(history);
  if (!j.contains("epoch_sums")) return;
  const std::string sums_path = child(path, "epoch_sums");
  if (point.step == 0) {
    bad(where, sums_path,
        "present, but the position is the start of an epoch (state.position.step 0)");
  }
  const json& sums = field(j.at("epoch_sums"), "sums", json::value_t::array, where, sums_path);
  if (sums.empty() || sums.size() > kMaxMetrics + 1) {
    bad(where, child(sums_path, "sums"),
        "must hold the loss and at most " + std::to_string(kMaxMetrics) + " metrics, got " +
            std::to_string(sums.size()) + " entries");
  }
  models::EpochSums out;
  for (std::size_t i = 0; i < sums.size(); ++i) {
    const std::string entry_path = child(sums_path, "sums") + "[" + std::to_string(i) + "]";
    models::NamedSums s;
    s.name = metric_name(field(sums[i], "name", json::value_t::string, where, entry_path), where,
                         child(entry_path, "name"));
    if (i == 0 && s.name != "loss") {
      bad(where, child(entry_path, "name"),
          "must be \"loss\" (the loss comes first), got " + shown(sums[i].at("name")));
    }
    s.count = whole_count(field(sums[i], "count", json::value_t::number_float, where, entry_path),
                          where, child(entry_path, "count"));
    if (!sums[i].contains("total")) bad(where, entry_path, "missing \"total\"");
    s.total = any_number(sums[i].at("total"), where, child(entry_path, "total"));
    out.sums.push_back(std::move(s));
  }
  out.skipped_before =
      integer_in(j.at("epoch_sums"), "skipped_before", 0, kMaxCounter, where, sums_path);
  if (static_cast<double>(out.skipped_before) > skipped_steps) {
    bad(where, child(sums_path, "skipped_before"),
        "must be at most the optimizer's skipped steps (" + format_number(skipped_steps) +
            "), got " + std::to_string(out.skipped_before));
  }
  point.epoch_sums = std::move(out);
}

std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

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
                                               const TensorList& tensors, const std::string& where,
                                               const std::string& path) {
  optimizers::OptimizerState state;
  state.name = field(j, "name", json::value_t::string, where, path).get<std::string>();
  state.iterations = integer_in(j, "iterations", 0, kMaxCounter, where, path);
  const std::string scalars_path = child(path, "scalars");
  const json& scalars = field(j, "scalars", json::value_t::object, where, path);
  for (const auto& [name, value] : scalars.items()) {
    state.scalars[name] =
        number_in(value, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max(),
                  false, where, child(scalars_path, name));
  }
  if (state.name == "loss_scale_optimizer") check_loss_scale_scalars(scalars, where, scalars_path);
  const json& slots = field(j, "slots", json::value_t::array, where, path);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const std::string slot_path = child(path, "slots") + "[" + std::to_string(i) + "]";
    if (!slots[i].is_string()) bad(where, slot_path, "must be a string, got " + shown(slots[i]));
    const std::string name = slots[i].get<std::string>();
    state.slots.push_back({name, find_tensor(tensors, prefix + name, where, slot_path)});
  }
  const json& inner = field(j, "inner", json::value_t::array, where, path);
  for (std::size_t i = 0; i < inner.size(); ++i) {
    const std::string inner_prefix = prefix + "inner" + (i ? std::to_string(i) : "") + "/";
    state.inner.push_back(
        optimizer_from_json(inner[i], inner_prefix, tensors, where,
                            child(path, "inner") + "[" + std::to_string(i) + "]"));
  }
  return state;
}

json generator_to_json(const GeneratorState& state) {
  json words = json::array();
  for (std::uint64_t w : state.words) words.push_back(w);
  return {{"words", words}, {"has_spare", state.has_spare}, {"spare", state.spare}};
}

GeneratorState generator_from_json(const json& j, const std::string& where,
                                   const std::string& path) {
  GeneratorState state;
  const json& words = field(j, "words", json::value_t::array, where, path);
  if (words.size() != state.words.size()) {
    bad(where, child(path, "words"),
        "a generator state needs 4 words, got " + std::to_string(words.size()));
  }
  for (std::size_t i = 0; i < state.words.size(); ++i) {
    if (!words[i].is_number_unsigned()) {
      bad(where, child(path, "words") + "[" + std::to_string(i) + "]",
          "must be an unsigned 64-bit integer, got " + shown(words[i]));
    }
    state.words[i] = words[i].get<std::uint64_t>();
  }
  if (state.words[0] == 0 && state.words[1] == 0 && state.words[2] == 0 && state.words[3] == 0) {
    bad(where, child(path, "words"), "a generator state is all zero");
  }
  state.has_spare = field(j, "has_spare", json::value_t::boolean, where, path).get<bool>();
  state.spare = number_in(field(j, "spare", json::value_t::number_float, where, path),
                          -std::numeric_limits<double>::max(), std::numeric_limits<double>::max(),
                          false, where, child(path, "spare"));
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

models::ResumePoint position_from_json(const json& j, const models::FitRun* run,
                                       const std::string& where) {
  const std::string path = "state.position";
  models::ResumePoint p;
  p.epoch =
      static_cast<int>(integer_in(j, "epoch", 0, std::numeric_limits<int>::max(), where, path));
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const std::int64_t batch_size = integer_in(j, "batch_size", 1, max, where, path);
  const std::int64_t steps = integer_in(j, "steps_per_epoch", 1, max, where, path);
  // step == steps: the epoch's batches are done, its end (validation, on_epoch_end) is not.
  p.step = integer_in(j, "step", 0, steps, where, path);
  p.loader_state = generator_from_json(field(j, "loader", json::value_t::object, where, path),
                                       where, child(path, "loader"));
  if (run && (batch_size != run->batch_size || steps != run->steps)) {
    throw ValueError(where + ": the checkpoint was taken with batch_size " +
                     std::to_string(batch_size) + " and " + std::to_string(steps) +
                     " batches per epoch, this fit() has batch_size " +
                     std::to_string(run->batch_size) + " and " + std::to_string(run->steps) +
                     "; resume with the same data and batch size, or start a new run in "
                     "another directory");
  }
  return p;
}

int world_size_from_json(const json& state, const std::string& where) {
  if (!state.is_object() || !state.contains("world_size")) return 1;
  return static_cast<int>(integer_in(state, "world_size", 1, 1 << 24, where, "state"));
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
