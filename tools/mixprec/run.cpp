// One training run (see run.h).
#include "run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <vector>

#include "custom_loop.h"
#include "mixprec/applications.h"
#include "stop_signal.h"

namespace mixprec::cli {

namespace {

// Restores the global policy when a run ends, also by an exception.
class GlobalPolicyScope {
 public:
  explicit GlobalPolicyScope(const mixed_precision::Policy& policy)
      : previous_(mixed_precision::global_policy()) {
    mixed_precision::set_global_policy(policy);
  }
  ~GlobalPolicyScope() { mixed_precision::set_global_policy(previous_); }
  GlobalPolicyScope(const GlobalPolicyScope&) = delete;
  GlobalPolicyScope& operator=(const GlobalPolicyScope&) = delete;

 private:
  mixed_precision::Policy previous_;
};

// After fit() stopped on a signal (the final checkpoint written by the run's callbacks): says where
// the run stands and how to resume it, then ends the command (no test evaluation, no --save: a
// preempted machine has seconds left).
[[noreturn]] void report_stop(const RunConfig& config) {
  const int signal = stop_signal();
  const std::optional<std::filesystem::path> newest = newest_checkpoint(config.keep.checkpoint_dir);
  std::string where = "nothing was saved (no --checkpoint-dir), so the run cannot be resumed";
  if (newest) {
    try {
      const io::CheckpointInfo info = io::read_checkpoint_info(*newest);
      where = "epoch " + std::to_string(info.epoch + 1) + "/" +
              std::to_string(config.options.epochs) + ", step " + std::to_string(info.step) +
              " saved in " + newest->string() + "; run the same command again to resume from there";
    } catch (const Error& e) {
      where = std::string("the checkpoint could not be read back (") + e.what() + ")";
    }
  }
  std::fflush(stdout);
  std::fprintf(stderr, "mixprec: stopped by %s: %s\n", signal_name(signal), where.c_str());
  std::fflush(stderr);
  throw StoppedBySignal{signal};
}

// Resuming under another --policy: said in the CLI's words, before fit() restores anything (the
// checkpoint would otherwise fail on the optimizer's kind, in compile()'s words, or, between
// policies with the same optimizer, resume silently under the new one). The newest readable
// checkpoint tells the policy; one written before the field tells nothing.
void check_resume_policy(const RunConfig& config) {
  if (config.keep.checkpoint_dir.empty() || config.keep.restart) return;
  const std::vector<std::filesystem::path> files =
      callbacks::BackupAndRestore({.backup_dir = config.keep.checkpoint_dir}).checkpoints();
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    io::CheckpointInfo info;
    try {
      info = io::read_checkpoint_info(*it);
    } catch (const Error&) {
      continue;  // BackupAndRestore reports unreadable files
    }
    if (info.policy.empty() || info.policy == config.policy) return;
    throw UsageError("the run in " + config.keep.checkpoint_dir + " was trained with --policy " +
                     info.policy + " (" + it->string() + "), this command has --policy " +
                     config.policy + "; resume it with --policy " + info.policy +
                     ", or start a new run in another --checkpoint-dir or with --restart");
  }
}

}  // namespace

InitialModel load_initial_model(const TrainOptions& options) {
  InitialModel init;
  init.source = options.init_from;
  const Model model = options.hf_gpt2 ? applications::load_gpt2_huggingface(options.init_from)
                                      : load_model(options.init_from);
  try {
    init.config = applications::gpt_config(model);
  } catch (const ValueError& e) {
    throw UsageError("--init-from " + options.init_from + " holds a model that is not a GPT (" +
                     e.what() + ")");
  }
  // The run builds gpt(config) under its own policy and name; only the shape carries over.
  init.config.dtype.reset();
  init.config.name = applications::GptConfig{}.name;
  init.weights = model.get_weights();
  return init;
}

RunConfig resolve_config(const TrainOptions& options, const std::string& command) {
  RunConfig config;
  config.options = options;
  config.device = resolve_device(device_choice(options.device));
  config.model = parse_model(options.model);
  config.policy = options.policy;
  config.dataset = parse_dataset(options.dataset);
  if ((config.dataset.kind == DatasetKind::text) != config.model.is_language_model()) {
    if (config.model.is_language_model()) {
      throw UsageError("--model " + options.model +
                       " is a language model: train it on text, "
                       "--dataset text:PATH (a token file from `mixprec tokenize`, a text file "
                       "or a directory of fortune databases such as " +
                       std::string(data::kFortunesDir) + ")");
    }
    throw UsageError("--dataset " + options.dataset + " holds text for a language model; --model " +
                     options.model +
                     " takes images or feature rows (use an image data set, or "
                     "a GPT: --model gpt-nano)");
  }
  if (!options.init_from.empty()) {
    config.init = std::make_shared<const InitialModel>(load_initial_model(options));
  }
  if (config.model.is_language_model()) {
    const applications::GptConfig gpt =
        config.init ? config.init->config : gpt_model_config(config.model, options);
    config.seq_len = options.seq_len.value_or(
        std::min<std::int64_t>(gpt.context, config.device.is_gpu ? 1024 : 128));
    if (config.init && config.seq_len > gpt.context) {
      throw UsageError("--seq-len " + std::to_string(config.seq_len) + " is longer than the " +
                       std::to_string(gpt.context) + " positions of the GPT in " +
                       config.init->source);
    }
    if (!(options.validation_split > 0.0)) {
      throw UsageError(
          "--validation-split must be above 0 for a language model: the last "
          "fraction of the text is its validation and test split");
    }
    if (loop_choice(options.loop) != Loop::fit) {
      throw UsageError("--loop custom trains the classifiers; train a language model with fit");
    }
  }
  const DataGeometry geometry = dataset_geometry(config.dataset);
  config.classes = options.classes.value_or(geometry.classes);
  if (config.classes < geometry.classes) {
    throw UsageError("--classes " + std::to_string(config.classes) + " is fewer than the " +
                     std::to_string(geometry.classes) + " classes of " + config.dataset.name +
                     " (labels 0.." + std::to_string(geometry.classes - 1) +
                     "); leave --classes out to use the data set's");
  }
  if (config.model.takes_images()) {
    config.input_size = options.input_size.value_or(
        default_input_size(config.model, config.device, std::max(geometry.height, geometry.width)));
    if (config.input_size < min_input_size(config.model)) {
      throw UsageError(config.model.name + " needs images of at least " +
                       std::to_string(min_input_size(config.model)) + "x" +
                       std::to_string(min_input_size(config.model)) + ", the data set's are " +
                       std::to_string(geometry.height) + "x" + std::to_string(geometry.width) +
                       "; pass --input-size " + std::to_string(min_input_size(config.model)) +
                       " or more to resize them");
    }
  } else {
    config.units = options.units.value_or(default_units(config.device));
  }
  config.batch_size = options.batch_size.value_or(default_batch_size(config.model, config.device));
  config.optimizer =
      options.optimizer.empty() ? default_optimizer(config.model) : options.optimizer;
  config.verbose = parse_verbosity(options.verbose);
  config.command = command;
  config.keep = {.tensorboard_dir = options.tensorboard,
                 .histogram_freq = options.histogram_freq.value_or(0),
                 .checkpoint_dir = options.checkpoint_dir,
                 .save_freq = parse_save_freq(options.save_freq),
                 .restart = options.restart,
                 .allow_nonfinite = options.allow_nonfinite};
  config.save_dir = options.save_model;
  if (distributed::world_size() > 1 && loop_choice(options.loop) != Loop::fit) {
    throw UsageError("--loop " + options.loop + " runs in one process; under mpirun (world size " +
                     std::to_string(distributed::world_size()) +
                     ") train with --loop fit, which trains data-parallel");
  }
  return config;
}

LoadedData load_dataset(const RunConfig& config) {
  if (!config.model.is_language_model()) {
    return load_data(config.dataset, config.options.seed, config.options.max_samples);
  }
  // Text: the last --validation-split of the tokens validate (and test); training windows of
  // seq_len + 1 tokens drawn with the run's seed, one epoch's worth of fresh windows per epoch.
  const data::TokenDataset tokens =
      load_text_dataset(config.dataset, config.options.validation_split);
  if (config.init && tokens.vocab_size() != config.init->config.vocab) {
    throw UsageError(
        "the GPT in " + config.init->source + " has a vocabulary of " +
        std::to_string(config.init->config.vocab) + " tokens, " + config.options.dataset + " of " +
        std::to_string(tokens.vocab_size()) +
        (config.init->config.vocab == 50257
             ? ": tokenize the text with GPT-2's BPE (mixprec tokenize --encoder --vocab)"
             : ": tokenize the text as the GPT's training data was"));
  }
  LoadedData out;
  out.spec = config.dataset;
  out.geometry.classes = tokens.vocab_size();
  data::TokenWindowOptions windows{.context = config.seq_len,
                                   .batch_size = config.batch_size,
                                   .epochs = std::max(config.options.epochs, 1),
                                   .seed = config.options.seed};
  if (config.options.max_samples) {
    // --max-samples: that many training windows an epoch (quick runs).
    windows.steps_per_epoch =
        std::max<std::int64_t>(1, *config.options.max_samples / config.batch_size);
  }
  out.steps_per_epoch = tokens.steps_per_epoch(windows);
  out.train = tokens.train_windows(windows);
  out.test = tokens.validation_windows(config.seq_len);
  if (config.options.max_samples)
    out.test = out.test.slice(0, std::min(out.test.size(), *config.options.max_samples));
  return out;
}

ModelShape model_shape(const RunConfig& config, const DataGeometry& geometry) {
  ModelShape shape;
  shape.classes = config.classes;
  if (config.init) {  // --init-from: the saved GPT's shape, its context included
    shape.gpt = config.init->config;
    shape.classes = geometry.classes;
    return shape;
  }
  if (config.model.is_language_model()) {
    shape.gpt = gpt_model_config(config.model, config.options);
    shape.gpt.vocab = geometry.classes;  // the data set's tokenizer
    // The position table has as many rows as the training sequences: every position the model
    // has is trained (a preset's longer context would leave positions that only generation
    // reaches, untrained); generate slides its window past that length.
    shape.gpt.context = config.seq_len;
    shape.classes = geometry.classes;
    return shape;
  }
  if (config.model.kind == ModelKind::vit) {
    const TrainOptions& o = config.options;
    shape.vit.patch_size = o.patch_size.value_or(shape.vit.patch_size);
    shape.vit.layers = o.layers.value_or(shape.vit.layers);
    shape.vit.width = o.width.value_or(shape.vit.width);
    shape.vit.heads = o.heads.value_or(shape.vit.heads);
    shape.vit.pooling = o.pooling.value_or(shape.vit.pooling);
  }
  if (config.model.takes_images()) {
    shape.input_size = config.input_size;
    shape.channels = model_channels(config.model, geometry);
  } else {
    shape.features = geometry.height * geometry.width * geometry.channels;
    shape.units = config.units;
    shape.hidden_layers = config.options.hidden_layers;
  }
  return shape;
}

std::int64_t training_samples(const RunConfig& config, const LoadedData& data) {
  if (config.model.is_language_model()) return *data.steps_per_epoch * config.batch_size;
  const auto n = static_cast<std::int64_t>(data.train.size());
  if (config.options.validation_split <= 0.0) return n;
  // Keras's split point (data::Dataset::split_validation): the last samples validate.
  return static_cast<std::int64_t>(
      std::floor(static_cast<double>(n) * (1.0 - config.options.validation_split)));
}

optimizers::Optimizer run_optimizer(const RunConfig& config, const LoadedData& data) {
  const TrainOptions& o = config.options;
  // The last batch of an epoch may be smaller; it is still a step.
  const std::int64_t steps_per_epoch =
      (training_samples(config, data) + config.batch_size - 1) / config.batch_size;
  return make_optimizer(config.optimizer, {.learning_rate = o.learning_rate,
                                           .schedule = o.lr_schedule,
                                           .warmup_steps = o.warmup_steps,
                                           .total_steps = steps_per_epoch * o.epochs});
}

RunResult run_training(const RunConfig& config, const LoadedData& data) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const TrainOptions& o = config.options;
  RunResult result;
  result.config = config;
  result.shape = model_shape(config, data.geometry);
  const data::Pipeline train =
      model_pipeline(data.train, data.geometry, config.model, config.input_size);
  const data::Pipeline test =
      model_pipeline(data.test, data.geometry, config.model, config.input_size);
  result.pipeline = train.describe();

  // Memory of this run on its device: the peak above what is alive there now (on the CPU: the
  // data set, shared by every run; on a GPU usually nothing, the data set stays on the host).
  const Device device = config.device.device;
  reset_peak_memory_stats(device);
  result.data_memory_bytes = memory_stats(device).current_bytes;

  result.train_samples = training_samples(config, data);
  result.validation_samples = config.model.is_language_model()
                                  ? test.size()  // windows: the validation ones are the test split
                                  : data.train.size() - result.train_samples;
  result.test_samples = test.size();

  {
    const mixed_precision::Policy policy(config.policy);
    GlobalPolicyScope policy_scope(policy);
    // The model's variables (and so every step) on the run's device; batches follow them.
    DeviceScope device_scope(device);
    // Same seed, same initial weights and batch order for every policy of a compare.
    set_seed(o.seed);
    clear_session();
    Model model = build_model(config.model, result.shape);
    if (config.init) {  // --init-from: the saved weights, on the run's device
      std::vector<Tensor> weights;
      weights.reserve(config.init->weights.size());
      for (const Tensor& w : config.init->weights) weights.push_back(w.to(device));
      model.set_weights(weights);
    }
    result.params = model.count_params();
    optimizers::Optimizer optimizer = run_optimizer(config, data);
    // The constant rate, or a schedule's peak (not the warm-up's first, 0).
    result.learning_rate = peak_learning_rate(config.optimizer, o.learning_rate);

    if (loop_choice(o.loop) == Loop::fit) {
      const bool lm = config.model.is_language_model();
      // Transformers: no weight decay on biases, normalization parameters and embeddings.
      if (config.optimizer == "adamw" && (lm || config.model.kind == ModelKind::vit)) {
        optimizer.exclude_from_weight_decay({}, {"bias", "gamma", "beta", "embeddings"});
      }
      // A GPT outputs logits in its compute dtype; the loss computes in float32 from them.
      std::variant<std::string, losses::Loss> loss = std::string("sparse_categorical_crossentropy");
      if (lm) loss = losses::SparseCategoricalCrossentropy({.from_logits = true});
      check_resume_policy(config);
      model.compile({.optimizer = optimizer,
                     .loss = loss,
                     .metrics = {std::string("accuracy")},
                     .steps_per_execution = o.steps_per_execution});
      // Under mpirun (world size > 1): data-parallel, --batch-size being the global batch.
      std::optional<distributed::DataParallel> distribute;
      if (distributed::world_size() > 1) distribute = distributed::DataParallel{};
      FitOptions fit{.batch_size = config.batch_size,
                     .epochs = o.epochs,
                     .verbose = config.verbose,
                     .validation_split = o.validation_split,
                     .seed = o.seed,
                     .callbacks = make_run_callbacks(config.keep),
                     .distribute = distribute};
      if (lm) {  // the windows are split already: validate on the text's last part
        fit.validation_split = 0.0;
        fit.validation_data = test;
        fit.steps_per_epoch = data.steps_per_epoch;
      }
      result.history = model.fit(train, fit);
      if (config.keep.stop_on_signal && stop_signal() != 0) report_stop(config);
      const Scores scores = model.evaluate(test, {.batch_size = config.batch_size,
                                                  .verbose = Verbosity::silent,
                                                  .distribute = distribute});
      result.test_loss = scores[0];
      result.test_accuracy = scores.at("accuracy");
      optimizer = model.optimizer();
      // --save: architecture, weights and compile settings (mixprec evaluate/predict load it).
      if (!config.save_dir.empty() && distributed::rank() == 0) model.save(config.save_dir);
    } else {
      // compile()'s rule, so both loops train alike: dynamic loss scaling under mixed_float16.
      optimizer = compile_optimizer(model, optimizer);
      const Verbosity verbose =
          config.verbose == Verbosity::silent ? Verbosity::silent : Verbosity::one_line_per_epoch;
      result.history = custom_training_loop(model, optimizer, train,
                                            {.batch_size = config.batch_size,
                                             .epochs = o.epochs,
                                             .validation_split = o.validation_split,
                                             .seed = o.seed,
                                             .verbose = verbose});
      const auto test_scores = evaluate_in_batches(model, test, config.batch_size);
      result.test_loss = test_scores.loss;
      result.test_accuracy = test_scores.accuracy;
    }
    if (const auto scaler = mixed_precision::as_loss_scale_optimizer(optimizer)) {
      result.final_loss_scale = scaler->loss_scale();
      result.skipped_steps = scaler->skipped_steps();
    }
  }
  result.peak_memory_bytes = memory_stats(device).peak_bytes;
  result.total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace mixprec::cli
