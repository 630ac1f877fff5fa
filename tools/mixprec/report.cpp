// Reports of the mixprec command line (see report.h).
#include "report.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <stdexcept>

#include "mixprec/version.h"

namespace mixprec::cli {

using json = nlohmann::ordered_json;

namespace {

json optional_number(const std::map<std::string, double>& metrics, const char* name) {
  auto it = metrics.find(name);
  return it == metrics.end() ? json(nullptr) : json(it->second);
}

}  // namespace

StepStats step_stats(std::vector<double> ms) {
  StepStats s;
  s.count = ms.size();
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  const std::size_t mid = ms.size() / 2;
  s.median_ms = ms.size() % 2 ? ms[mid] : 0.5 * (ms[mid - 1] + ms[mid]);
  for (double v : ms) s.total_ms += v;
  return s;
}

StepStats run_step_stats(const RunResult& run) {
  std::vector<double> all;
  for (const auto& epoch : run.history.epochs) {
    all.insert(all.end(), epoch.step_ms.begin(), epoch.step_ms.end());
  }
  return step_stats(std::move(all));
}

double seconds_per_epoch(const RunResult& run) {
  if (run.history.epochs.empty()) return 0.0;
  double total = 0.0;
  for (const auto& epoch : run.history.epochs) total += epoch.seconds;
  return total / static_cast<double>(run.history.epochs.size());
}

double samples_per_second(const RunResult& run) {
  const StepStats s = run_step_stats(run);
  if (s.total_ms <= 0.0) return 0.0;
  // The samples of the steps timed: epochs restored from a checkpoint carry no step times, and a
  // resumed epoch times only its batches after the checkpoint.
  double samples = 0.0;
  for (const auto& epoch : run.history.epochs) {
    samples += std::min(
        static_cast<double>(run.train_samples),
        static_cast<double>(epoch.step_ms.size()) * static_cast<double>(run.config.batch_size));
  }
  return samples / (s.total_ms / 1e3);
}

json run_to_json(const RunResult& run) {
  const RunConfig& c = run.config;
  const mixed_precision::Policy policy(c.policy);
  json epochs = json::array();
  for (const auto& e : run.history.epochs) {
    epochs.push_back({{"epoch", e.epoch},
                      {"loss", optional_number(e.metrics, "loss")},
                      {"accuracy", optional_number(e.metrics, "accuracy")},
                      {"val_loss", optional_number(e.metrics, "val_loss")},
                      {"val_accuracy", optional_number(e.metrics, "val_accuracy")},
                      {"seconds", e.seconds},
                      {"loss_scale", e.loss_scale ? json(*e.loss_scale) : json(nullptr)},
                      {"skipped_steps", e.skipped_steps},
                      {"steps", e.step_ms.size()}});
  }
  const StepStats steps = run_step_stats(run);
  json out = {
      {"command", c.command}, {"mixprec_version", mixprec::version()}, {"model", c.options.model}};
  if (c.model.is_language_model()) {
    const applications::GptConfig& g = run.shape.gpt;
    out["gpt"] = {{"layers", g.layers},   {"width", g.width}, {"heads", g.heads},
                  {"context", g.context}, {"vocab", g.vocab}, {"seq_len", c.seq_len}};
    // --init-from: the saved GPT the run started from (null: initialised from --seed).
    out["init_from"] = c.init ? json(c.init->source) : json(nullptr);
  } else if (c.model.takes_images()) {
    out["input_size"] = run.shape.input_size;
    out["channels"] = run.shape.channels;
    out["classes"] = run.shape.classes;
    out["pipeline"] = run.pipeline;
  } else {
    out["units"] = c.units;
    out["hidden_layers"] = c.options.hidden_layers;
  }
  out.update(json{
      {"params", run.params},
      {"world_size", distributed::world_size()},  // processes that trained it (mpirun -np)
      {"dataset", c.dataset.name},
      {"dataset_dir", c.dataset.dir},
      {"train_samples", run.train_samples},
      {"validation_samples", run.validation_samples},
      {"test_samples", run.test_samples},
      {"policy", policy.name()},
      {"compute_dtype", std::string(dtype_name(policy.compute_dtype()))},
      {"variable_dtype", std::string(dtype_name(policy.variable_dtype()))},
      {"device", c.device.device.to_string()},
      {"device_name", c.device.name},
      {"loop", c.options.loop},
      {"optimizer", c.optimizer},
      {"learning_rate", run.learning_rate},
      {"lr_schedule", c.options.lr_schedule},
      {"warmup_steps", c.options.warmup_steps},
      {"batch_size", c.batch_size},
      {"steps_per_execution", c.options.steps_per_execution},
      {"validation_split", c.options.validation_split},
      {"seed", c.options.seed},
      {"epochs", epochs},
      {"test", {{"loss", run.test_loss}, {"accuracy", run.test_accuracy}}},
      {"seconds_per_epoch", seconds_per_epoch(run)},
      {"samples_per_second", samples_per_second(run)},
      {"step_time_ms",
       {{"min", steps.min_ms},
        {"median", steps.median_ms},
        {"max", steps.max_ms},
        {"steps", steps.count}}},
      {"peak_memory_bytes", run.peak_memory_bytes},
      {"data_memory_bytes", run.data_memory_bytes},
      {"loss_scale",
       {{"final", run.final_loss_scale ? json(*run.final_loss_scale) : json(nullptr)},
        {"skipped_steps", run.skipped_steps}}},
      {"total_seconds", run.total_seconds},
  });
  return out;
}

std::string model_shape_text(const RunConfig& c, const ModelShape& s) {
  if (c.model.is_language_model()) {
    const applications::GptConfig& g = s.gpt;
    return std::to_string(g.layers) + " blocks x " + std::to_string(g.width) + " wide, " +
           std::to_string(g.heads) + " heads, " + std::to_string(c.seq_len) + " tokens, vocab " +
           std::to_string(g.vocab) + (c.init ? ", from " + c.init->source : "");
  }
  if (c.model.takes_images()) {
    return std::to_string(s.input_size) + "x" + std::to_string(s.input_size) + "x" +
           std::to_string(s.channels) + " -> " + std::to_string(s.classes);
  }
  std::string shape = std::to_string(s.features);
  for (int i = 0; i < s.hidden_layers; ++i) shape += "-" + std::to_string(s.units);
  return shape + "-" + std::to_string(s.classes);
}

std::string model_shape_text(const RunResult& run) {
  return model_shape_text(run.config, run.shape);
}

void print_compare_table(const std::vector<RunResult>& runs, std::FILE* out,
                         CompareTableStyle style) {
  // Peak memory is shown above the loaded data set (which every run shares), so the column shows
  // what the policy changes: weights, their 16-bit copies, optimizer slots, activations.
  std::fprintf(out, "%-16s ", "policy");
  if (style.batch_column) std::fprintf(out, "%6s ", "batch");
  std::fprintf(out, "%9s %11s %12s %14s %11s %8s %9s\n", "s/epoch", style.throughput, "step ms p50",
               "peak mem (run)", "loss scale", "skipped", "test acc");
  for (const RunResult& r : runs) {
    const StepStats s = run_step_stats(r);
    char scale[32] = "-";
    if (r.final_loss_scale) std::snprintf(scale, sizeof scale, "%g", *r.final_loss_scale);
    std::fprintf(out, "%-16s ", r.config.policy.c_str());
    if (style.batch_column) {
      std::fprintf(out, "%6lld ", static_cast<long long>(r.config.batch_size));
    }
    std::fprintf(out, "%9.3g %11.0f %12.3g %14s %11s %8lld %9.4f\n", seconds_per_epoch(r),
                 samples_per_second(r), s.median_ms,
                 format_bytes(r.peak_memory_bytes - r.data_memory_bytes).c_str(), scale,
                 static_cast<long long>(r.skipped_steps), r.test_accuracy);
  }
  std::fflush(out);
}

void write_json(const std::string& path, const json& document) {
  std::ofstream out(path);
  if (out) out << document.dump(2) << "\n";
  if (!out) {
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  }
}

std::string format_bytes(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &tm);
  return text;
}

std::string cpu_name() {
  for (const auto& d : list_physical_devices()) {
    if (d.kind == "CPU") return d.name;
  }
  return "unknown";
}

}  // namespace mixprec::cli
