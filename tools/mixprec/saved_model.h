// What `mixprec evaluate` and `predict` share: the model a `train --save DIR` wrote, or the one in
// a training checkpoint file of `train --checkpoint-dir DIR` (mixprec::load_model reads both), the
// data set's test split shaped for that model's input, and their options.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "datasets.h"
#include "mixprec/mixprec.h"
#include "options.h"

namespace mixprec::cli {

struct SavedModelOptions {
  std::string model_dir;  // --model DIR or checkpoint FILE (required)
  std::string dataset = "fashion_mnist";
  std::optional<std::int64_t> max_samples;
  std::int64_t batch_size = 256;
  std::uint64_t seed = 42;  // synthetic data: the pool train used (its --seed)
  // text: the fraction at the end of the token file that validates and tests (train's
  // --validation-split, the same default).
  double validation_split = 0.2;
  std::string device = "auto";
  std::string output;            // predict: --output FILE
  bool allow_nonfinite = false;  // --allow-nonfinite: load weights holding NaN or Inf
};

// --model, --dataset, --max-samples, --batch-size, --seed, --device on `app`.
void add_saved_model_options(CLI::App& app, SavedModelOptions& options);
// UsageError for a batch size or --max-samples below 1 or a bad --dataset.
void check_saved_model_options(const SavedModelOptions& options);

// A loaded model and the data it runs on, on the chosen device.
struct SavedModelRun {
  ResolvedDevice device;
  Model model;
  LoadedData data;
  data::Pipeline test;       // the test split with the steps the model's input needs
  std::int64_t classes = 0;  // the model's output width
};

// With --dataset text:PATH the model must be a GPT (applications::gpt_config) of the token file's
// vocabulary; its test split is the consecutive windows of its context over the file's last
// --validation-split, as train validates. Loads the model of options.model_dir (IOError naming the
// path when there is none, or when it is a checkpoint directory rather than one of its files;
// load_model's error, which names the kind of file found, for a corrupt or wrong one) and the data
// set, and shapes the test split for the model's input: flatten for a (None, F) input,
// reshape/resize/grayscale_to_rgb for a (None, S, S, C) one. ValueError when the data cannot be fed
// to the model (F differs from the image's size, channels that do not convert, labels beyond the
// model's classes).
SavedModelRun load_saved_model_run(const SavedModelOptions& options);

}  // namespace mixprec::cli
