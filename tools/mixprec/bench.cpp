// `mixprec bench`: times training steps of the model on synthetic data (no data set needed) and
// writes one row in the DESIGN §5 schema, side by side with bench/peers/torch_mlp.py's rows
// (scripts/bench-cpu-mlp.sh merges them). The step is Model::train_on_batch: forward, loss,
// backward, loss scaling under mixed_float16, optimizer update.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "mixprec/applications.h"
#include "mixprec/mixprec.h"
#include "options.h"
#include "report.h"
#include "run.h"

namespace mixprec::cli {

namespace {

struct BenchOptions {
  TrainOptions train;
  int steps = 20;
  int warmup = 3;
  std::string json_path;
};

void run_bench(const BenchOptions& options, const Invocation& invocation) {
  TrainOptions train = options.train;
  check_options(train);
  if (options.steps < 1) {
    throw UsageError("--steps must be >= 1, got " + std::to_string(options.steps));
  }
  if (options.warmup < 0) {
    throw UsageError("--warmup must be >= 0, got " + std::to_string(options.warmup));
  }
  const RunConfig config = resolve_config(train, invocation.command_line);
  constexpr std::int64_t kFeatures = 784;  // the seed's flattened 28x28 images
  constexpr std::int64_t kClasses = 10;
  const applications::MlpOptions mlp_options{.units = config.units,
                                             .hidden_layers = train.hidden_layers,
                                             .input_features = kFeatures,
                                             .classes = kClasses};

  const mixed_precision::Policy previous = mixed_precision::global_policy();
  mixed_precision::set_global_policy(mixed_precision::Policy(train.policy));
  set_seed(train.seed);
  // Synthetic batch: uniform [0, 1) pixels as Fashion-MNIST after x / 255, uniform labels.
  Generator gen(train.seed);
  const Tensor x = random_uniform({config.batch_size, kFeatures}, 0.0, 1.0, {}, gen);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(config.batch_size));
  for (auto& label : labels) label = static_cast<std::int64_t>(gen.below(kClasses));
  const Tensor y = from_vector(labels, {config.batch_size});

  Model model = applications::mlp(mlp_options);
  model.compile({.optimizer = make_optimizer(train.optimizer, train.learning_rate),
                 .loss = std::string("sparse_categorical_crossentropy")});
  reset_peak_memory_stats(Device::cpu());
  for (int i = 0; i < options.warmup; ++i) model.train_on_batch(x, y);
  std::vector<double> step_ms;
  for (int i = 0; i < options.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    model.train_on_batch(x, y);  // returns the loss as a host number: the step has finished
    step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  const std::int64_t peak = memory_stats(Device::cpu()).peak_bytes;
  std::int64_t skipped = 0;
  if (const auto scaler = mixed_precision::as_loss_scale_optimizer(model.optimizer())) {
    skipped = scaler->skipped_steps();
  }
  mixed_precision::set_global_policy(previous);

  const StepStats s = step_stats(step_ms);
  const double seconds = s.median_ms / 1e3;
  // The same FLOP count as bench/peers/torch_mlp.py: 6 * batch * kernel elements (forward 2,
  // backward 4 multiply-add FLOPs per weight and sample; biases and activations are not counted).
  const double flops =
      6.0 * static_cast<double>(config.batch_size) * applications::mlp_kernel_elements(mlp_options);
  const double samples_per_s = static_cast<double>(config.batch_size) / seconds;
  const double tflops = flops / seconds / 1e12;
  std::printf(
      "%-14s %-15s batch %5lld  median %8.2f ms  %10.0f samples/s  %6.3f TFLOP/s  peak %s\n",
      "mixprec", train.policy.c_str(), static_cast<long long>(config.batch_size), s.median_ms,
      samples_per_s, tflops, format_bytes(peak).c_str());
  if (options.json_path.empty()) return;
  const nlohmann::ordered_json row = {
      {"system", "mixprec"},
      {"policy", train.policy},
      {"batch_size", config.batch_size},
      {"step_ms", {{"min", s.min_ms}, {"median", s.median_ms}, {"max", s.max_ms}}},
      {"samples_per_s", samples_per_s},
      {"tflops", tflops},
      {"peak_memory_bytes", peak},
      {"skipped_steps", skipped}};
  write_json(
      options.json_path,
      {{"device", config.device.name},
       {"commit", "unknown"},  // the binary does not know it; scripts/bench-cpu-mlp.sh sets it
       {"date", utc_date()},
       {"command", invocation.command_line},
       {"workload",
        {{"model", train.model},
         {"units", config.units},
         {"hidden_layers", train.hidden_layers},
         {"params", model.count_params()},
         {"batch_size", config.batch_size},
         {"optimizer", train.optimizer},
         {"steps", options.steps},
         {"warmup", options.warmup},
         {"threads", omp_get_max_threads()},
         {"data", "synthetic"},
         {"peak_memory", "mixprec::memory_stats peak tensor bytes over warmup and steps"}}},
       {"results", nlohmann::ordered_json::array({row})}});
}

}  // namespace

Command add_bench_command(CLI::App& app, const Invocation& invocation) {
  auto* sub = app.add_subcommand(
      "bench",
      "time training steps on synthetic data; one DESIGN §5 row (step ms, samples/s, "
      "TFLOP/s, peak memory)");
  auto options = std::make_shared<BenchOptions>();
  add_common_options(*sub, options->train, OptionSet::bench);
  sub->add_option("--policy", options->train.policy, "dtype policy to time")->capture_default_str();
  sub->add_option("--steps", options->steps, "timed steps")->capture_default_str();
  sub->add_option("--warmup", options->warmup, "untimed steps first")->capture_default_str();
  sub->add_option("--json", options->json_path, "write the result document to this JSON file");
  return {sub, [options, &invocation] { run_bench(*options, invocation); }};
}

}  // namespace mixprec::cli
