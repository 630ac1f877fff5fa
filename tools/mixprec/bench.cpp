// `mixprec bench`: times training steps of the model on synthetic data (no data set needed) and
// writes one row in the DESIGN §5 schema, side by side with bench/peers/torch_mlp.py's rows
// (scripts/bench-cpu-mlp.sh merges them). The step is Model::train_on_batch: forward, loss,
// backward, loss scaling under mixed_float16, optimizer update, on one batch prepared up front
// (for the image models: synthetic images after the model's preprocessing, data/synthetic.h).
// mlp rows carry TFLOP/s; image-model rows do not (their FLOPs are not counted). Rows of a model on
// a GPU carry host_syncs_per_step (cuda::host_synchronizations() over the timed steps / steps,
// train_on_batch's loss readback included); CPU rows leave it out (no GPU to wait for).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "commands.h"
#include "datasets.h"
#include "mixprec/applications.h"
#include "mixprec/mixprec.h"
#include "models.h"
#include "options.h"
#include "report.h"
#include "run.h"

namespace mixprec::cli {

namespace {

struct BenchOptions {
  TrainOptions train;
  int steps = 20;
  int warmup = 3;
  std::string dataset;  // image models: synthetic:HxWxC:CLASSES; "" = synthetic at --input-size
  std::string json_path;
};

struct TimedSteps {
  std::vector<double> step_ms;
  std::int64_t peak_memory_bytes = 0;
  std::int64_t skipped_steps = 0;
  std::int64_t params = 0;
  // A model on a GPU: the host's waits for the GPU over the timed steps / steps
  // (cuda::host_synchronizations()); train_on_batch's loss readback is one of them. Not set for
  // the CPU, which has no GPU to wait for.
  std::optional<double> host_syncs_per_step;
};

// Compiles `model` (with `loss`), runs `warmup` untimed and `steps` timed train_on_batch steps on
// (x, y).
TimedSteps time_steps(
    Model& model, const BenchOptions& options, const std::string& optimizer, const Tensor& x,
    const Tensor& y,
    std::variant<std::string, losses::Loss> loss = std::string("sparse_categorical_crossentropy"),
    bool transformer = false) {
  optimizers::Optimizer opt =
      make_optimizer(optimizer, {.learning_rate = options.train.learning_rate});
  // As the training command does: no weight decay on biases, norms and embeddings.
  if (transformer && optimizer == "adamw") {
    opt.exclude_from_weight_decay({}, {"bias", "gamma", "beta", "embeddings"});
  }
  model.compile({.optimizer = opt, .loss = std::move(loss)});
  // Memory where the model lives (a GPU's memory for a model on one, not the host's).
  const std::vector<Tensor> variables = model.variables();
  const Device device = variables.empty() ? Device::cpu() : variables.front().device();
  // The batch lives where the model does before timing starts (a GPU run times the step, not a
  // host-to-device copy of the same batch every time).
  const Tensor x_here = x.to(device), y_here = y.to(device);
  reset_peak_memory_stats(device);
  for (int i = 0; i < options.warmup; ++i) model.train_on_batch(x_here, y_here);
  TimedSteps out;
  const std::int64_t syncs_before = cuda::host_synchronizations();
  for (int i = 0; i < options.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    model.train_on_batch(x_here,
                         y_here);  // returns the loss as a host number: the step has finished
    out.step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  if (device.is_cuda()) {
    out.host_syncs_per_step =
        static_cast<double>(cuda::host_synchronizations() - syncs_before) / options.steps;
  }
  out.peak_memory_bytes = memory_stats(device).peak_bytes;
  if (const auto scaler = mixed_precision::as_loss_scale_optimizer(model.optimizer())) {
    out.skipped_steps = scaler->skipped_steps();
  }
  out.params = model.count_params();
  return out;
}

nlohmann::ordered_json result_row(const TrainOptions& train, std::int64_t batch_size,
                                  const StepStats& s, const TimedSteps& t,
                                  std::optional<double> tflops) {
  nlohmann::ordered_json row = {
      {"system", "mixprec"},
      {"policy", train.policy},
      {"batch_size", batch_size},
      {"step_ms", {{"min", s.min_ms}, {"median", s.median_ms}, {"max", s.max_ms}}},
      {"samples_per_s", static_cast<double>(batch_size) / (s.median_ms / 1e3)}};
  if (tflops) row["tflops"] = *tflops;
  row["peak_memory_bytes"] = t.peak_memory_bytes;
  row["skipped_steps"] = t.skipped_steps;
  if (t.host_syncs_per_step) row["host_syncs_per_step"] = *t.host_syncs_per_step;
  return row;
}

// "  host syncs/step N" after a GPU row's printed line; nothing for the CPU.
std::string syncs_text(const TimedSteps& t) {
  if (!t.host_syncs_per_step) return "";
  char text[48];
  std::snprintf(text, sizeof(text), "  host syncs/step %.2f", *t.host_syncs_per_step);
  return text;
}

void write_document(const BenchOptions& options, const Invocation& invocation,
                    const RunConfig& config, nlohmann::ordered_json workload,
                    nlohmann::ordered_json row) {
  write_json(
      options.json_path,
      {{"device", config.device.name},
       {"commit", "unknown"},  // the binary does not know it; scripts/bench-cpu-mlp.sh sets it
       {"date", utc_date()},
       {"command", invocation.command_line},
       {"workload", std::move(workload)},
       {"results", nlohmann::ordered_json::array({std::move(row)})}});
}

// The mlp on a synthetic (batch, 784) batch; FLOPs as bench/peers/torch_mlp.py counts them.
void bench_mlp(const BenchOptions& options, const Invocation& invocation, const RunConfig& config) {
  const TrainOptions& train = options.train;
  constexpr std::int64_t kFeatures = 784;  // the seed's flattened 28x28 images
  const std::int64_t classes = train.classes.value_or(10);
  const applications::MlpOptions mlp_options{.units = config.units,
                                             .hidden_layers = train.hidden_layers,
                                             .input_features = kFeatures,
                                             .classes = classes};

  const mixed_precision::Policy previous = mixed_precision::global_policy();
  mixed_precision::set_global_policy(mixed_precision::Policy(train.policy));
  set_seed(train.seed);
  // Synthetic batch: uniform [0, 1) pixels as Fashion-MNIST after x / 255, uniform labels.
  Generator gen(train.seed);
  const Tensor x = random_uniform({config.batch_size, kFeatures}, 0.0, 1.0, {}, gen);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(config.batch_size));
  for (auto& label : labels) {
    label = static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(classes)));
  }
  const Tensor y = from_vector(labels, {config.batch_size});

  TimedSteps t;
  {
    DeviceScope on_device(config.device.device);  // the model's variables go there
    Model model = applications::mlp(mlp_options);
    t = time_steps(model, options, config.optimizer, x, y);
  }
  mixed_precision::set_global_policy(previous);

  const StepStats s = step_stats(t.step_ms);
  const double seconds = s.median_ms / 1e3;
  // The same FLOP count as bench/peers/torch_mlp.py: 6 * batch * kernel elements (forward 2,
  // backward 4 multiply-add FLOPs per weight and sample; biases and activations are not counted).
  const double flops =
      6.0 * static_cast<double>(config.batch_size) * applications::mlp_kernel_elements(mlp_options);
  const double samples_per_s = static_cast<double>(config.batch_size) / seconds;
  const double tflops = flops / seconds / 1e12;
  std::printf(
      "%-14s %-15s batch %5lld  median %8.2f ms  %10.0f samples/s  %6.3f TFLOP/s  peak %s%s\n",
      "mixprec", train.policy.c_str(), static_cast<long long>(config.batch_size), s.median_ms,
      samples_per_s, tflops, format_bytes(t.peak_memory_bytes).c_str(), syncs_text(t).c_str());
  if (options.json_path.empty()) return;
  write_document(options, invocation, config,
                 {{"model", train.model},
                  {"units", config.units},
                  {"hidden_layers", train.hidden_layers},
                  {"params", t.params},
                  {"batch_size", config.batch_size},
                  {"optimizer", config.optimizer},
                  {"steps", options.steps},
                  {"warmup", options.warmup},
                  {"threads", omp_get_max_threads()},
                  {"data", "synthetic"},
                  {"peak_memory", "mixprec::memory_stats peak tensor bytes over warmup and steps"}},
                 result_row(train, config.batch_size, s, t, tflops));
}

// The synthetic images an image-model bench trains on: --dataset synthetic:HxWxC:CLASSES, or by
// default images of the model's input size with the model's channels (1 for cnn and vit, 3
// otherwise) and --classes (default 10 for cnn and vit, Fashion-MNIST's; 1000, ImageNet's, for
// efficientnet/resnet as the keras.applications and torchvision models).
data::SyntheticSpec bench_data(const BenchOptions& options, const ModelChoice& model,
                               std::int64_t input_size) {
  if (!options.dataset.empty()) return parse_dataset(options.dataset).synthetic;
  data::SyntheticSpec s;
  s.height = s.width = input_size;
  const bool fashion_mnist = model.kind == ModelKind::cnn || model.kind == ModelKind::vit;
  s.channels = fashion_mnist ? 1 : 3;
  s.classes = options.train.classes.value_or(fashion_mnist ? 10 : 1000);
  return s;
}

// The image side an image-model bench uses: --input-size; else the --dataset images' size (no
// resize); else 28 for cnn and vit (Fashion-MNIST's) and the device default for the others
// (models.h).
std::int64_t bench_input_size(const BenchOptions& options, const RunConfig& config) {
  if (options.train.input_size) return *options.train.input_size;
  if (!options.dataset.empty()) {
    const data::SyntheticSpec s = parse_dataset(options.dataset).synthetic;
    return std::max(s.height, s.width);
  }
  if (config.model.kind == ModelKind::cnn || config.model.kind == ModelKind::vit) {
    return data::kFashionMnistRows;
  }
  return default_input_size(config.model, config.device, 0);
}

// An image model on one synthetic batch. TFLOP/s are not reported: counting a CNN's FLOPs
// (convolutions, depthwise convolutions, squeeze-and-excitation, batch norm) from the layer
// graph is not implemented, so the row leaves "tflops" out rather than guess.
void bench_images(const BenchOptions& options, const Invocation& invocation, RunConfig config) {
  const TrainOptions& train = options.train;
  config.input_size = bench_input_size(options, config);
  if (config.input_size < min_input_size(config.model)) {
    throw UsageError(train.model + " needs images of at least " +
                     std::to_string(min_input_size(config.model)) + "x" +
                     std::to_string(min_input_size(config.model)) + ", got " +
                     std::to_string(config.input_size) + "; pass --input-size " +
                     std::to_string(min_input_size(config.model)) + " or more");
  }
  const data::SyntheticSpec spec = bench_data(options, config.model, config.input_size);
  const DataGeometry geometry{spec.height, spec.width, spec.channels, spec.classes, false};
  config.classes = train.classes.value_or(spec.classes);
  const ModelShape shape = model_shape(config, geometry);

  const mixed_precision::Policy previous = mixed_precision::global_policy();
  mixed_precision::set_global_policy(mixed_precision::Policy(train.policy));
  set_seed(train.seed);
  // One batch: the pool images and labels after the model's preprocessing (resize, grayscale to
  // RGB), gathered once, outside the timed steps. The pool (64 MiB at 64x64x3) is freed before
  // the steps: the peak reported is the step's memory and the one batch, not an unused data set.
  data::Batch batch;
  std::string pipeline_text;
  {
    const data::SyntheticImages images({.height = spec.height,
                                        .width = spec.width,
                                        .channels = spec.channels,
                                        .classes = spec.classes,
                                        .seed = train.seed});
    const data::Pipeline pipeline = model_pipeline(images.pipeline(config.batch_size), geometry,
                                                   config.model, config.input_size);
    batch = pipeline.batch(0, config.batch_size);
    // Own copies: a batch may be a view sharing the pool's storage.
    for (Tensor* t : {&batch.x, &batch.y}) {
      Tensor own = zeros_like(*t);
      own.assign(*t);
      *t = own;
    }
    pipeline_text = pipeline.describe();
  }

  TimedSteps t;
  {
    DeviceScope on_device(config.device.device);  // the model's variables go there
    Model model = build_model(config.model, shape);
    t = time_steps(model, options, config.optimizer, batch.x, batch.y);
  }
  mixed_precision::set_global_policy(previous);

  const StepStats s = step_stats(t.step_ms);
  const double samples_per_s = static_cast<double>(config.batch_size) / (s.median_ms / 1e3);
  std::printf("%-14s %-15s %s %s  batch %5lld  median %8.2f ms  %10.1f images/s  peak %s%s\n",
              "mixprec", train.policy.c_str(), train.model.c_str(),
              model_shape_text(config, shape).c_str(), static_cast<long long>(config.batch_size),
              s.median_ms, samples_per_s, format_bytes(t.peak_memory_bytes).c_str(),
              syncs_text(t).c_str());
  if (options.json_path.empty()) return;
  write_document(options, invocation, config,
                 {{"model", train.model},
                  {"input_size", shape.input_size},
                  {"channels", shape.channels},
                  {"classes", shape.classes},
                  {"params", t.params},
                  {"batch_size", config.batch_size},
                  {"optimizer", config.optimizer},
                  {"steps", options.steps},
                  {"warmup", options.warmup},
                  {"threads", omp_get_max_threads()},
                  {"data", "synthetic " + std::to_string(spec.height) + "x" +
                               std::to_string(spec.width) + "x" + std::to_string(spec.channels) +
                               ", " + std::to_string(spec.classes) + " classes"},
                  {"pipeline", pipeline_text},
                  {"peak_memory",
                   "mixprec::memory_stats peak tensor bytes over warmup and steps (the batch, "
                   "not the synthetic pool)"},
                  {"tflops_note", "not reported: FLOPs of the CNN models are not counted"}},
                 result_row(train, config.batch_size, s, t, std::nullopt));
}

// A GPT (a preset, or --model gpt with --layers/--width/--heads/--vocab) on random token
// windows: tokens/s and model FLOP/s as bench/peers/torch_gpt.py counts them
// (applications::gpt_step_flops), AdamW by default.
void bench_gpt(const BenchOptions& options, const Invocation& invocation) {
  const TrainOptions& train = options.train;
  const ModelChoice model = parse_model(train.model);
  RunConfig config;
  config.options = train;
  config.model = model;
  config.policy = train.policy;
  config.device = resolve_device(device_choice(train.device));
  applications::GptConfig gpt = gpt_model_config(model, train);
  config.seq_len = train.seq_len.value_or(
      std::min<std::int64_t>(gpt.context, config.device.is_gpu ? 1024 : 128));
  gpt.context = std::max(gpt.context, config.seq_len);
  config.batch_size = train.batch_size.value_or(8);
  config.optimizer = train.optimizer.empty() ? "adamw" : train.optimizer;
  const std::int64_t b = config.batch_size, t = config.seq_len;

  const mixed_precision::Policy previous = mixed_precision::global_policy();
  mixed_precision::set_global_policy(mixed_precision::Policy(train.policy));
  set_seed(train.seed);
  Generator gen(train.seed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(b * (t + 1)));
  for (auto& id : ids)
    id = static_cast<std::int32_t>(gen.below(static_cast<std::uint64_t>(gpt.vocab)));
  const Tensor windows = from_vector(ids, {b, t + 1});
  const Tensor x = slice(windows, 1, 0, t).contiguous();
  const Tensor y = slice(windows, 1, 1, t + 1).contiguous();
  TimedSteps timed;
  {
    DeviceScope on_device(config.device.device);
    Model m = applications::gpt(gpt);
    timed = time_steps(m, options, config.optimizer, x, y,
                       losses::SparseCategoricalCrossentropy({.from_logits = true}), true);
  }
  mixed_precision::set_global_policy(previous);

  const StepStats s = step_stats(timed.step_ms);
  const double seconds = s.median_ms / 1e3;
  const double tokens_per_s = static_cast<double>(b * t) / seconds;
  const double tflops = applications::gpt_step_flops(gpt, b, t) / seconds / 1e12;
  std::printf(
      "%-14s %-15s batch %3lld x %5lld tokens  median %9.2f ms  %9.0f tokens/s  %6.3f TFLOP/s  "
      "peak %s%s\n",
      "mixprec", train.policy.c_str(), static_cast<long long>(b), static_cast<long long>(t),
      s.median_ms, tokens_per_s, tflops, format_bytes(timed.peak_memory_bytes).c_str(),
      syncs_text(timed).c_str());
  if (options.json_path.empty()) return;
  nlohmann::ordered_json row = result_row(train, b, s, timed, tflops);
  row["tokens_per_s"] = tokens_per_s;
  write_document(options, invocation, config,
                 {{"model", "gpt"},
                  {"preset", train.model},
                  {"layers", gpt.layers},
                  {"width", gpt.width},
                  {"heads", gpt.heads},
                  {"seq_len", t},
                  {"vocab", gpt.vocab},
                  {"params", timed.params},
                  {"batch_size", b},
                  {"optimizer", config.optimizer},
                  {"steps", options.steps},
                  {"warmup", options.warmup},
                  {"threads", omp_get_max_threads()},
                  {"data", "random token windows"},
                  {"flops",
                   "6 * tokens * (12 * layers * width^2 + vocab * width) + 12 * tokens * "
                   "layers * seq_len * width per step (applications::gpt_step_flops)"},
                  {"peak_memory", "mixprec::memory_stats peak tensor bytes over warmup and steps"}},
                 std::move(row));
}

void run_bench(const BenchOptions& options, const Invocation& invocation) {
  TrainOptions train = options.train;
  check_options(train);
  if (options.steps < 1) {
    throw UsageError("--steps must be >= 1, got " + std::to_string(options.steps));
  }
  if (options.warmup < 0) {
    throw UsageError("--warmup must be >= 0, got " + std::to_string(options.warmup));
  }
  const ModelChoice model = parse_model(train.model);
  if (model.is_language_model()) {
    if (!options.dataset.empty()) {
      throw UsageError(
          "--dataset does not apply to the GPT bench: it trains on random token "
          "windows (--vocab, --seq-len)");
    }
    bench_gpt(options, invocation);
    return;
  }
  if (!model.takes_images()) {
    if (!options.dataset.empty()) {
      throw UsageError(
          "--dataset applies to the image models' bench; the mlp bench uses "
          "synthetic (batch, 784) rows");
    }
    train.dataset = "synthetic:28x28x1:2";  // no data set: any --classes >= 2 is fine
    bench_mlp(options, invocation, resolve_config(train, invocation.command_line));
    return;
  }
  // resolve_config() checks --dataset (synthetic only) and --classes against it; without a
  // --dataset a two-class placeholder lets any --classes through. bench_images() then sets the
  // input size and classes.
  if (!options.dataset.empty()) {
    if (parse_dataset(options.dataset).kind != DatasetKind::synthetic) {
      throw UsageError(
          "bench times steps on synthetic data: --dataset must be "
          "synthetic:HxWxC:CLASSES, got '" +
          options.dataset + "'; train on real data with mixprec train or compare");
    }
    train.dataset = options.dataset;
  } else {
    train.dataset = "synthetic:32x32x3:2";
  }
  bench_images(options, invocation, resolve_config(train, invocation.command_line));
}

}  // namespace

Command add_bench_command(CLI::App& app, const Invocation& invocation) {
  auto* sub = app.add_subcommand("bench",
                                 "time training steps on synthetic data; one row in the format of "
                                 "bench/results/ (step ms, samples/s, "
                                 "TFLOP/s, peak memory)");
  auto options = std::make_shared<BenchOptions>();
  add_common_options(*sub, options->train, OptionSet::bench);
  sub->add_option("--policy", options->train.policy, "dtype policy to time")->capture_default_str();
  sub->add_option("--dataset", options->dataset,
                  "image models: synthetic:HxWxC:CLASSES to train on (default: synthetic images "
                  "of --input-size, 1 channel for cnn and 3 otherwise, --classes or 10 for cnn "
                  "and 1000 otherwise)");
  sub->add_option("--steps", options->steps, "timed steps")->capture_default_str();
  sub->add_option("--warmup", options->warmup, "untimed steps first")->capture_default_str();
  sub->add_option("--json", options->json_path, "write the result document to this JSON file");
  return {sub, [options, &invocation] { run_bench(*options, invocation); }};
}

}  // namespace mixprec::cli
