// `mixprec evaluate --model DIR --dataset ...`: Keras model.evaluate on a saved model. Loads the
// directory `train --save` wrote (config, weights and compile settings), runs the data set's test
// split through it and prints the loss and every compiled metric on one line (a GPT on a token
// file: its validation windows, and the perplexity after the metrics).
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "saved_model.h"

namespace mixprec::cli {

namespace {

void run_evaluate(const SavedModelOptions& options) {
  check_saved_model_options(options);
  SavedModelRun run = load_saved_model_run(options);
  std::printf("evaluate %s on %s (%lld test samples), batch %lld, device %s\n",
              options.model_dir.c_str(), run.data.spec.name.c_str(),
              static_cast<long long>(run.test.size()), static_cast<long long>(options.batch_size),
              run.device.device.to_string().c_str());
  // evaluate() needs the loss: a model saved uncompiled (or with a custom loss) has none.
  const Scores scores = run.model.evaluate(
      run.test, {.batch_size = options.batch_size, .verbose = Verbosity::silent});
  std::string line;
  for (const auto& [name, value] : scores.values) {
    char text[64];
    std::snprintf(text, sizeof text, "%s: %.4f", name.c_str(), value);
    line += (line.empty() ? "" : " - ") + std::string(text);
  }
  if (run.data.spec.kind == DatasetKind::text) {  // a language model's usual figure: exp(loss)
    char text[64];
    std::snprintf(text, sizeof text, " - perplexity: %.4f", std::exp(scores[0]));
    line += text;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

Command add_evaluate_command(CLI::App& app, const Invocation& invocation) {
  (void)invocation;
  auto* sub = app.add_subcommand("evaluate",
                                 "load a saved model (train --save DIR) or a training checkpoint "
                                 "file and print its loss and metrics on a data "
                                 "set's test split");
  auto options = std::make_shared<SavedModelOptions>();
  add_saved_model_options(*sub, *options);
  return {sub, [options] { run_evaluate(*options); }};
}

}  // namespace mixprec::cli
