// One training run, as `mixprec train` does it and `mixprec compare` repeats it per policy: build
// the model under a policy, train (fit or the custom loop), evaluate on the test set, and collect
// what the reports need (per-epoch log, step times, memory, loss scaling).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datasets.h"
#include "mixprec/mixprec.h"
#include "models.h"
#include "options.h"
#include "run_callbacks.h"

namespace mixprec::cli {

// --init-from: the GPT a run starts from (its configuration and float32 weights, on the CPU).
struct InitialModel {
  std::string source;  // the directory, for messages
  applications::GptConfig config;
  std::vector<Tensor> weights;  // get_weights() order of gpt(config)
};

// Loads --init-from DIR (--hf-gpt2: a Hugging Face GPT-2 directory; else a model `train --save`
// wrote): load_model's or load_gpt2_huggingface's error for a missing or bad directory, a
// UsageError naming DIR for a model that is not a GPT.
InitialModel load_initial_model(const TrainOptions& options);

// The options with every device- and data-dependent default filled in.
struct RunConfig {
  TrainOptions options;
  ResolvedDevice device;
  ModelChoice model;
  std::string policy;           // this run's policy (compare runs one config per policy)
  std::int64_t units = 0;       // mlp
  std::int64_t input_size = 0;  // image models: the side S of the (S, S, C) input
  std::int64_t seq_len = 0;     // gpt: tokens per training sequence
  std::int64_t classes = 0;
  std::int64_t batch_size = 0;  // this run's (compare may give each policy its own)
  std::string optimizer;        // resolved: "rmsprop" for mlp, "adam" for the CNNs by default
  DatasetSpec dataset;
  Verbosity verbose = Verbosity::automatic;
  std::string command;   // the command line, for the JSON
  KeepOptions keep;      // --tensorboard (compare: this policy's folder), --checkpoint-dir
  std::string save_dir;  // --save: Model::save here after training ("" = no)
  // --init-from (shared by compare's runs, each of which starts from it); null without it.
  std::shared_ptr<const InitialModel> init;
};

// Resolves the device (DeviceError for an unusable one) and the defaults that depend on it and on
// the data set (its image size and classes, known from the spec), and loads --init-from. UsageError
// for --classes below the data set's label count, and with --init-from for a --seq-len beyond the
// GPT's context.
RunConfig resolve_config(const TrainOptions& options, const std::string& command);

// Loads the data set named by config.dataset (DataError with a hint when it is missing), with
// --max-samples applied. With --init-from, a UsageError for text of another vocabulary than the
// GPT's.
LoadedData load_dataset(const RunConfig& config);

// What the model of `config` sees: its shape and the preprocessing pipeline on `data`.
ModelShape model_shape(const RunConfig& config, const DataGeometry& geometry);

struct RunResult {
  RunConfig config;
  ModelShape shape;
  std::string pipeline;  // the per-batch steps, data::Pipeline::describe() ("" for none)
  std::int64_t params = 0;
  std::int64_t train_samples = 0, validation_samples = 0, test_samples = 0;
  double learning_rate = 0.0;
  History history;
  double test_loss = 0.0, test_accuracy = 0.0;
  // mixprec::memory_stats(run device): tensor bytes alive there when the run started (on the CPU
  // the loaded data set; on a GPU nothing, the data set stays on the host) and the peak during the
  // run (model, optimizer slots, activations, gradients and batches on top of that).
  std::int64_t data_memory_bytes = 0;
  std::int64_t peak_memory_bytes = 0;
  std::optional<double> final_loss_scale;  // only with a LossScaleOptimizer (mixed_float16)
  std::int64_t skipped_steps = 0;
  double total_seconds = 0.0;  // build + train + evaluate
};

// Runs one policy on `data`: sets the seed and the global policy (restored afterwards), builds a
// fresh model, adds its preprocessing steps to the data's pipelines, trains (with the callbacks
// of config.keep), evaluates, and saves the model to config.save_dir. Prints the progress
// (config.verbose), the resume line of run_callbacks.h and the saved model's directory.
RunResult run_training(const RunConfig& config, const LoadedData& data);

// The samples one training epoch sees: the data set less the validation split (language models:
// steps per epoch x batch).
std::int64_t training_samples(const RunConfig& config, const LoadedData& data);

// The run's optimizer (make_optimizer), a learning-rate schedule spanning all its steps (epochs x
// steps per epoch). UsageError for a warm-up as long as the run: call it before printing anything.
optimizers::Optimizer run_optimizer(const RunConfig& config, const LoadedData& data);

}  // namespace mixprec::cli
