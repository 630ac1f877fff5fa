// Parsing, checking and resolving the shared options (see options.h).
#include "options.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "mixprec/distributed/distributed.h"
#include "models.h"

namespace mixprec::cli {

namespace {

const char* const kDatasetForms =
    "fashion_mnist[:DIR], cifar10:DIR, cifar100:DIR, synthetic:HxWxC:CLASSES[:SAMPLES], "
    "text:PATH";

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  for (const auto& i : items) {
    if (i == item) return true;
  }
  return false;
}

}  // namespace

void add_common_options(CLI::App& app, TrainOptions& o, OptionSet what) {
  // A repeated option takes its last value (`make demo ARGS="--epochs 1"` can override).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--model", o.model,
                 "model to build: mlp (seed 001's Dense-ReLU network), cnn (a small Fashion-MNIST "
                 "CNN), efficientnet-b0 .. efficientnet-b7 (seed 002), resnet50, vit (a Vision "
                 "Transformer), gpt-nano, gpt-micro, gpt-mini, gpt2 (GPT language models, with "
                 "--dataset text:PATH), gpt (--layers/--width/--heads)")
      ->capture_default_str();
  app.add_option("--units", o.units,
                 "mlp: hidden-layer width (default 4096 on a GPU, 512 on the CPU)");
  app.add_option("--hidden-layers", o.hidden_layers, "mlp: number of hidden Dense layers")
      ->capture_default_str();
  app.add_option("--input-size", o.input_size,
                 "CNNs: image side S, images are resized to SxS per batch (default: cnn the data "
                 "set's size; efficientnet/resnet 224 on a GPU, 32 on the CPU, where 224 takes "
                 "hours per epoch)");
  app.add_option("--classes", o.classes, "output classes (default: the data set's)");
  app.add_option("--patch-size", o.patch_size, "vit: patch side (default 4)");
  app.add_option("--pooling", o.pooling,
                 "vit: mean (of the patch tokens, default) or token (a learned class token)")
      ->check(CLI::IsMember({"mean", "token"}));
  app.add_option("--seq-len", o.seq_len,
                 "gpt: tokens per training sequence (default: the model's context, at most 128 "
                 "on the CPU, 1024 on a GPU)");
  app.add_option("--layers", o.layers,
                 "gpt, vit: Transformer blocks (default: the preset's; vit 4)");
  app.add_option("--width", o.width, "gpt, vit: model width (default: the preset's; vit 64)");
  app.add_option("--heads", o.heads, "gpt, vit: attention heads (default: the preset's; vit 4)");
  if (what == OptionSet::bench) {
    app.add_option("--vocab", o.vocab, "gpt: vocabulary size (default: the preset's)");
  }
  if (what == OptionSet::train) {
    app.add_option("--policy", o.policy,
                   "dtype policy: float32, mixed_float16, mixed_bfloat16, float16, bfloat16, "
                   "float64")
        ->capture_default_str();
  }
  app.add_option("--batch-size", o.batch_size,
                 "samples per training step (default: mlp 8192 on a GPU, 256 on the CPU; cnn 128; "
                 "efficientnet/resnet 128)");
  app.add_option("--optimizer", o.optimizer,
                 "sgd, adam, adamw or rmsprop (default: rmsprop for mlp, adam for the CNNs)")
      ->check(CLI::IsMember({"sgd", "adam", "adamw", "rmsprop"}, CLI::ignore_case));
  app.add_option("--learning-rate", o.learning_rate,
                 "learning rate (default: the optimizer's Keras default)");
  if (what != OptionSet::bench) {
    app.add_option("--lr-schedule", o.lr_schedule,
                   "constant, or cosine: Keras's CosineDecay from the learning rate to 0 over all "
                   "the run's steps (Transformers are usually trained so)")
        ->check(CLI::IsMember({"constant", "cosine"}))
        ->capture_default_str();
    app.add_option("--warmup-steps", o.warmup_steps,
                   "with --lr-schedule cosine: steps of linear warm-up from 0 to the learning rate "
                   "before the decay")
        ->capture_default_str();
    app.add_option("--init-from", o.init_from,
                   "with --model gpt: start from the configuration and weights of a GPT saved by "
                   "`train --save DIR` (fine-tuning; the position table keeps its context)");
    app.add_flag("--hf-gpt2", o.hf_gpt2,
                 "with --init-from: DIR is a Hugging Face GPT-2 directory (config.json, "
                 "model.safetensors); train on a token file of GPT-2's BPE (tokenize --encoder "
                 "--vocab)");
  }
  app.add_option("--seed", o.seed, "seed of the weights, the shuffling and synthetic data")
      ->capture_default_str();
  app.add_option("--device", o.device, "auto, cpu or cuda (auto: a GPU when one is usable)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  if (what == OptionSet::bench) return;

  app.add_option("--dataset", o.dataset,
                 std::string(kDatasetForms) + " (fashion_mnist's default DIR " +
                     data::default_fashion_mnist_dir() +
                     "; CIFAR DIR: the extracted binary version)")
      ->capture_default_str();
  app.add_option("--max-samples", o.max_samples,
                 "use only the first N training and the first N test samples (quick runs)");
  app.add_option("--epochs", o.epochs, "passes over the training data")->capture_default_str();
  app.add_option("--loop", o.loop,
                 "fit (Model::fit) or custom (GradientTape + LossScaleOptimizer, seed 001)")
      ->check(CLI::IsMember({"fit", "custom"}))
      ->capture_default_str();
  app.add_option("--steps-per-execution", o.steps_per_execution,
                 "batches per execution of fit (Keras's steps_per_execution): callbacks and the "
                 "progress see one event per N batches; on a GPU the steps replay as CUDA graphs")
      ->capture_default_str();
  app.add_option("--validation-split", o.validation_split,
                 "fraction of the training data held out for validation, taken from the end "
                 "(seed 001 uses 0.2; 0 = none)")
      ->capture_default_str();
  app.add_option("--verbose", o.verbose,
                 "progress: auto (bar on a terminal, else a line per epoch), 0, 1 or 2")
      ->check(CLI::IsMember({"auto", "0", "1", "2"}))
      ->capture_default_str();
  if (what == OptionSet::train) {
    app.add_option("--metrics-json", o.metrics_json, "write the run's metrics to this JSON file");
  }
  app.add_option("--tensorboard", o.tensorboard,
                 what == OptionSet::train
                     ? "write TensorBoard event files to DIR/train and DIR/validation"
                     : "write TensorBoard event files, one run per policy: DIR/<policy>/train, "
                       "DIR/<policy>/validation (the policies overlay in TensorBoard)");
  app.add_option("--histogram-freq", o.histogram_freq,
                 "with --tensorboard: histograms of every variable every N epochs (0: none)");
  if (what != OptionSet::train) return;
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "keep training checkpoints in DIR; the same command run again resumes where it "
                 "stopped (Keras BackupAndRestore)");
  app.add_option("--save-freq", o.save_freq,
                 "with --checkpoint-dir: a checkpoint every epoch or every N batches (default: "
                 "epoch)");
  app.add_flag("--restart", o.restart,
               "with --checkpoint-dir: start a new run even when DIR holds checkpoints (kept, "
               "not restored)");
  app.add_flag("--allow-nonfinite", o.allow_nonfinite,
               "with --checkpoint-dir: restore a checkpoint whose weights hold NaN or Inf");
  app.add_option("--save", o.save_model,
                 "save the trained model (config and weights, Model::save) to this directory; "
                 "mixprec evaluate/predict --model DIR load it");
}

std::vector<std::string> split_list(const std::string& text, const std::string& option) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) {
      throw UsageError(option + " expects a comma-separated list without empty items, got '" +
                       text + "'");
    }
    items.push_back(item);
  }
  if (items.empty()) throw UsageError(option + " expects at least one item");
  return items;
}

void check_policy_name(const std::string& name) {
  if (!contains(mixed_precision::Policy::valid_names(), name)) {
    throw UsageError("unknown policy '" + name +
                     "'; valid policies: " + join(mixed_precision::Policy::valid_names()));
  }
}

std::int64_t parse_positive(const std::string& text, const std::string& option) {
  const bool digits =
      !text.empty() && text.size() <= 18 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoll(text) <= 0) {
    throw UsageError(option + " expects positive whole numbers, got '" + text + "'");
  }
  return std::stoll(text);
}

DatasetSpec parse_dataset(const std::string& spec) {
  const auto colon = spec.find(':');
  DatasetSpec out;
  out.name = spec.substr(0, colon);
  const std::string rest = colon == std::string::npos ? std::string() : spec.substr(colon + 1);
  if (out.name == "synthetic") {
    out.kind = DatasetKind::synthetic;
    try {
      out.synthetic = data::parse_synthetic_spec(spec);
    } catch (const ValueError& e) {
      throw UsageError(std::string("--dataset: ") + e.what());
    }
    return out;
  }
  if (out.name == "fashion_mnist") {
    out.kind = DatasetKind::fashion_mnist;
    out.dir = colon == std::string::npos ? data::default_fashion_mnist_dir() : rest;
  } else if (out.name == "cifar10" || out.name == "cifar100") {
    out.kind = out.name == "cifar10" ? DatasetKind::cifar10 : DatasetKind::cifar100;
    if (colon == std::string::npos) {
      throw UsageError("--dataset " + spec +
                       " needs the directory of the extracted binary files: " + out.name +
                       ":DIR (e.g. " + out.name + ":" +
                       (out.name == "cifar10" ? "cifar-10-batches-bin" : "cifar-100-binary") + ")");
    }
    out.dir = rest;
  } else if (out.name == "text") {
    out.kind = DatasetKind::text;
    if (colon == std::string::npos) {
      throw UsageError(
          "--dataset text needs a path: text:FILE.tok (from mixprec tokenize), "
          "text:FILE.txt or text:DIR of fortune databases (e.g. text:" +
          std::string(data::kFortunesDir) + ")");
    }
    out.dir = rest;
  } else {
    throw UsageError("unknown dataset '" + out.name + "'; valid datasets: " + kDatasetForms);
  }
  if (out.dir.empty()) {
    throw UsageError("--dataset " + spec + ": the " +
                     (out.kind == DatasetKind::text ? "path" : "directory") +
                     " after ':' is empty");
  }
  return out;
}

std::int64_t parse_save_freq(const std::string& text) {
  if (text.empty() || text == "epoch") return 0;
  const bool digits = text.size() <= 18 && std::all_of(text.begin(), text.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoll(text) <= 0) {
    throw UsageError("--save-freq expects 'epoch' or a positive number of batches, got '" + text +
                     "'");
  }
  return std::stoll(text);
}

void check_keep_options(const TrainOptions& o) {
  if (o.histogram_freq && o.tensorboard.empty()) {
    throw UsageError("--histogram-freq needs --tensorboard DIR (where the histograms go)");
  }
  if (o.histogram_freq && *o.histogram_freq < 0) {
    throw UsageError("--histogram-freq must be >= 0, got " + std::to_string(*o.histogram_freq));
  }
  if (!o.save_freq.empty() && o.checkpoint_dir.empty()) {
    throw UsageError("--save-freq needs --checkpoint-dir DIR (where the checkpoints go)");
  }
  parse_save_freq(o.save_freq);
  if (o.restart && o.checkpoint_dir.empty()) {
    throw UsageError("--restart needs --checkpoint-dir DIR (the run it starts over)");
  }
  if (o.allow_nonfinite && o.checkpoint_dir.empty()) {
    throw UsageError("--allow-nonfinite needs --checkpoint-dir DIR (it applies to restoring)");
  }
  const std::vector<std::pair<std::string, std::string>> dirs = {
      {"--tensorboard", o.tensorboard},
      {"--checkpoint-dir", o.checkpoint_dir},
      {"--save", o.save_model}};
  for (const auto& [option, dir] : dirs) {
    if (!dir.empty() && o.loop != "fit") {
      throw UsageError(option + " needs --loop fit (the custom loop runs no callbacks)");
    }
  }
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    for (std::size_t j = i + 1; j < dirs.size(); ++j) {
      if (dirs[i].second.empty() || dirs[j].second.empty()) continue;
      std::error_code ec;
      const auto a = std::filesystem::weakly_canonical(dirs[i].second, ec);
      const auto b = std::filesystem::weakly_canonical(dirs[j].second, ec);
      if (a == b) {
        throw UsageError(dirs[i].first + " and " + dirs[j].first + " name the same directory '" +
                         dirs[i].second + "'; give each its own");
      }
    }
  }
}

void check_options(const TrainOptions& o) {
  const ModelChoice model = parse_model(o.model);
  if (o.units && *o.units <= 0) {
    throw UsageError("--units must be positive, got " + std::to_string(*o.units));
  }
  if (o.units && model.takes_images()) {
    throw UsageError("--units applies to --model mlp, not " + o.model +
                     " (the zoo's CNNs have fixed widths)");
  }
  if (o.hidden_layers < 0) {
    throw UsageError("--hidden-layers must be >= 0, got " + std::to_string(o.hidden_layers));
  }
  if (o.input_size && !model.takes_images()) {
    throw UsageError(
        "--input-size applies to the image models (cnn, efficientnet-b*, resnet50), "
        "not mlp, which takes flattened rows");
  }
  if (o.input_size && *o.input_size < min_input_size(model)) {
    throw UsageError("--input-size for " + o.model +
                     " must be >= " + std::to_string(min_input_size(model)) + ", got " +
                     std::to_string(*o.input_size));
  }
  if (o.classes && *o.classes < 2) {
    throw UsageError("--classes must be >= 2, got " + std::to_string(*o.classes));
  }
  if (o.classes && model.is_language_model()) {
    throw UsageError("--classes does not apply to " + o.model +
                     ": a language model predicts the data set's tokens");
  }
  if (o.patch_size && model.kind != ModelKind::vit) {
    throw UsageError("--patch-size applies to --model vit, not " + o.model);
  }
  if (o.patch_size && *o.patch_size <= 0) {
    throw UsageError("--patch-size must be positive, got " + std::to_string(*o.patch_size));
  }
  if (o.pooling && model.kind != ModelKind::vit) {
    throw UsageError("--pooling applies to --model vit, not " + o.model);
  }
  const bool gpt_shape = o.seq_len || o.vocab;
  if (gpt_shape && !model.is_language_model()) {
    throw UsageError(
        "--seq-len and --vocab apply to the GPT models (gpt-nano, ..., gpt2, gpt), not " + o.model);
  }
  if (o.hf_gpt2 && o.init_from.empty()) {
    throw UsageError("--hf-gpt2 says what --init-from DIR holds; give --init-from DIR");
  }
  if (!o.init_from.empty()) {
    if (o.model != "gpt") {
      throw UsageError(
          "--init-from starts from a saved GPT and takes its shape: pass --model gpt, "
          "not " +
          o.model);
    }
    if (o.layers || o.width || o.heads) {
      throw UsageError(
          "--layers, --width and --heads do not apply with --init-from: the model "
          "has the saved GPT's shape");
    }
  }
  const bool block_shape = o.layers || o.width || o.heads;
  if (block_shape && !model.is_language_model() && model.kind != ModelKind::vit) {
    throw UsageError(
        "--layers, --width and --heads apply to the Transformers (gpt-nano, ..., gpt2, gpt, vit), "
        "not " +
        o.model);
  }
  for (const auto& [name, value] :
       {std::pair<const char*, std::optional<std::int64_t>>{"--seq-len", o.seq_len},
        {"--layers", o.layers},
        {"--width", o.width},
        {"--heads", o.heads},
        {"--vocab", o.vocab}}) {
    if (value && *value <= 0) {
      throw UsageError(std::string(name) + " must be positive, got " + std::to_string(*value));
    }
  }
  if (o.max_samples && *o.max_samples <= 0) {
    throw UsageError("--max-samples must be positive, got " + std::to_string(*o.max_samples));
  }
  if (o.steps_per_execution < 1) {
    throw UsageError("--steps-per-execution must be >= 1, got " +
                     std::to_string(o.steps_per_execution));
  }
  if (o.steps_per_execution != 1 && o.loop != "fit") {
    throw UsageError(
        "--steps-per-execution needs --loop fit (the custom loop runs one step at a "
        "time)");
  }
  if (o.batch_size && *o.batch_size <= 0) {
    throw UsageError("--batch-size must be positive, got " + std::to_string(*o.batch_size));
  }
  if (o.epochs < 0) {
    throw UsageError("--epochs must be >= 0, got " + std::to_string(o.epochs));
  }
  if (o.learning_rate && !(*o.learning_rate > 0.0)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", *o.learning_rate);
    throw UsageError(std::string("--learning-rate must be positive, got ") + text);
  }
  if (o.warmup_steps < 0) {
    throw UsageError("--warmup-steps must be >= 0, got " + std::to_string(o.warmup_steps));
  }
  if (o.warmup_steps > 0 && o.lr_schedule != "cosine") {
    throw UsageError("--warmup-steps needs --lr-schedule cosine");
  }
  if (!(o.validation_split >= 0.0 && o.validation_split < 1.0)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", o.validation_split);
    throw UsageError(std::string("--validation-split must be in [0, 1), got ") + text);
  }
  check_policy_name(o.policy);
  parse_dataset(o.dataset);
  check_keep_options(o);
}

ResolvedDevice resolve_device(DeviceChoice choice) {
  const auto devices = list_physical_devices();
  const PhysicalDevice* cpu = nullptr;
  std::vector<const PhysicalDevice*> gpus;
  for (const auto& d : devices) {
    if (d.kind == "CPU" && !cpu) cpu = &d;
    if (d.kind == "GPU") gpus.push_back(&d);
  }
  // One process trains on one GPU: the first, or under mpirun the local rank's (one process per
  // GPU, as DataParallel::device()).
  const PhysicalDevice* gpu =
      gpus.empty() ? nullptr
                   : gpus[static_cast<std::size_t>(distributed::local_rank()) % gpus.size()];
  const ResolvedDevice on_cpu{Device::cpu(), cpu ? cpu->name : "unknown", false};
  if (choice == DeviceChoice::cpu) return on_cpu;
  // A build without the backend lists no GPU, so `auto` is the CPU there.
  if (choice == DeviceChoice::cuda) {
    if (!MIXPREC_HAVE_CUDA) {
      throw DeviceError("this build of mixprec has no CUDA backend; use --device cpu");
    }
    if (!gpu) {
      throw DeviceError(
          "--device cuda: no usable CUDA GPU was found (check the driver with nvidia-smi); use "
          "--device cpu");
    }
  }
  if (MIXPREC_HAVE_CUDA && gpu) return {gpu->device, gpu->name, true};
  return on_cpu;  // automatic without a usable GPU
}

std::int64_t default_units(const ResolvedDevice& device) { return device.is_gpu ? 4096 : 512; }
std::int64_t default_batch_size(const ResolvedDevice& device) { return device.is_gpu ? 8192 : 256; }

DeviceChoice device_choice(const std::string& text) {
  if (text == "cpu") return DeviceChoice::cpu;
  if (text == "cuda") return DeviceChoice::cuda;
  return DeviceChoice::automatic;  // "auto" (the parser admits nothing else)
}

Loop loop_choice(const std::string& text) { return text == "custom" ? Loop::custom : Loop::fit; }

Verbosity parse_verbosity(const std::string& text) {
  if (text == "0") return Verbosity::silent;
  if (text == "1") return Verbosity::progress_bar;
  if (text == "2") return Verbosity::one_line_per_epoch;
  return Verbosity::automatic;
}

optimizers::Optimizer make_optimizer(const std::string& name, const LearningRatePlan& plan) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!plan.learning_rate && plan.schedule == "constant") return optimizers::get(lower);
  const double base = peak_learning_rate(lower, plan.learning_rate);
  optimizers::LearningRate rate = base;
  if (plan.schedule == "cosine") {
    if (plan.warmup_steps > 0 && plan.warmup_steps >= plan.total_steps) {
      throw UsageError("--warmup-steps " + std::to_string(plan.warmup_steps) +
                       " must be below the run's " + std::to_string(plan.total_steps) +
                       " training steps (epochs x steps per epoch)");
    }
    optimizers::schedules::CosineDecay cosine{
        .initial_learning_rate = base,
        .decay_steps = std::max<std::int64_t>(1, plan.total_steps - plan.warmup_steps)};
    if (plan.warmup_steps > 0) {
      cosine.initial_learning_rate = 0.0;
      cosine.warmup_target = base;
      cosine.warmup_steps = plan.warmup_steps;
    }
    rate = cosine;
  }
  if (lower == "sgd") return optimizers::SGD({.learning_rate = rate});
  if (lower == "adam") return optimizers::Adam({.learning_rate = rate});
  if (lower == "adamw") return optimizers::AdamW({.learning_rate = rate});
  return optimizers::RMSprop({.learning_rate = rate});  // the parser admits nothing else
}

double peak_learning_rate(const std::string& name, std::optional<double> learning_rate) {
  // get() throws ValueError listing the valid names, and knows each optimizer's Keras default.
  return learning_rate ? *learning_rate : optimizers::get(name).learning_rate();
}

std::string optimizer_text(const std::string& name, const TrainOptions& options) {
  if (options.lr_schedule != "cosine") return name;
  if (options.warmup_steps == 0) return name + ", cosine decay";
  return name + ", cosine decay (warm-up " + std::to_string(options.warmup_steps) + " steps)";
}

}  // namespace mixprec::cli
