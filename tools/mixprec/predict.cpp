// `mixprec predict --model DIR --dataset ... --output FILE`: Keras model.predict on a saved model.
// The model's outputs for the data set's test split, one row per sample, go to FILE as .npy or
// .csv (predictions_file.h); any other extension is refused before the model is loaded.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "predictions_file.h"
#include "saved_model.h"

namespace mixprec::cli {

namespace {

void run_predict(const SavedModelOptions& options) {
  check_saved_model_options(options);
  predictions_format(options.output);  // UsageError for an unknown extension
  if (parse_dataset(options.dataset).kind == DatasetKind::text) {
    throw UsageError(
        "predict writes one row of outputs per sample; for a GPT on text use evaluate (loss, "
        "accuracy, perplexity) or generate");
  }
  SavedModelRun run = load_saved_model_run(options);
  const Tensor predictions =
      run.model.predict(run.test, {.batch_size = options.batch_size, .verbose = Verbosity::silent});
  // (N, K) in the output's dtype (float32 for the zoo's softmax) on the run's device.
  const std::int64_t rows = predictions.dim(0);
  const std::int64_t cols = predictions.numel() / std::max<std::int64_t>(rows, 1);
  const std::vector<float> values =
      predictions.to(Device::cpu()).to(DType::float32).contiguous().to_vector<float>();
  write_predictions(options.output, values, rows, cols);
  std::printf("wrote %lld x %lld predictions of %s on %s to %s\n", static_cast<long long>(rows),
              static_cast<long long>(cols), options.model_dir.c_str(), run.data.spec.name.c_str(),
              options.output.c_str());
  std::fflush(stdout);
}

}  // namespace

Command add_predict_command(CLI::App& app, const Invocation& invocation) {
  (void)invocation;
  auto* sub = app.add_subcommand("predict",
                                 "load a saved model (train --save DIR) or a training checkpoint "
                                 "file and write its outputs for a data set's "
                                 "test split to a .npy or .csv file");
  auto options = std::make_shared<SavedModelOptions>();
  add_saved_model_options(*sub, *options);
  sub->add_option("--output", options->output,
                  "FILE.npy (float32 array, samples x outputs) or FILE.csv; written atomically")
      ->required();
  return {sub, [options] { run_predict(*options); }};
}

}  // namespace mixprec::cli
