// `mixprec train`: seed 001 from the command line. Builds the model under one policy, trains it
// with Model::fit (or the custom GradientTape loop), prints the progress, then the test-set line;
// --metrics-json writes the run (see report.cpp's run_to_json for the fields). Under
// `mpirun -np N` it trains data-parallel (fit with FitOptions::distribute; --batch-size is the
// global batch) and rank 0 alone prints and writes.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "mixprec/mixprec.h"
#include "options.h"
#include "report.h"
#include "run.h"
#include "stop_signal.h"

namespace mixprec::cli {

namespace {

void print_header(const RunConfig& c, const LoadedData& data, std::FILE* out) {
  const mixed_precision::Policy policy(c.policy);
  const std::string shape = model_shape_text(c, model_shape(c, data.geometry));
  std::fprintf(out,
               "%s %s on %s (%lld training samples, validation split %g, %lld test samples)\n"
               "policy %s (compute %s, variables %s), %s, batch %lld, epochs %d, %s loop, "
               "device %s (%s)\n",
               c.options.model.c_str(), shape.c_str(), c.dataset.name.c_str(),
               static_cast<long long>(data.train.size()), c.options.validation_split,
               static_cast<long long>(data.test.size()), policy.name().c_str(),
               std::string(dtype_name(policy.compute_dtype())).c_str(),
               std::string(dtype_name(policy.variable_dtype())).c_str(),
               optimizer_text(c.optimizer, c.options).c_str(), static_cast<long long>(c.batch_size),
               c.options.epochs, c.options.loop.c_str(), c.device.device.to_string().c_str(),
               c.device.name.c_str());
  const std::string steps =
      model_pipeline(data.train, data.geometry, c.model, c.input_size).describe();
  if (!steps.empty()) std::fprintf(out, "per-batch preprocessing: %s\n", steps.c_str());
  if (distributed::world_size() > 1) {
    const int w = distributed::world_size();
    std::fprintf(out, "data-parallel: world size %d, global batch %lld (about %lld per rank)\n", w,
                 static_cast<long long>(c.batch_size), static_cast<long long>(c.batch_size / w));
  }
  std::fflush(out);
}

void print_summary(const RunResult& r, std::FILE* out) {
  std::fprintf(out, "Test loss: %.4f - test accuracy: %.4f\n", r.test_loss, r.test_accuracy);
  // A complete run restored from --checkpoint-dir: its epochs (when the checkpoint recorded them)
  // carry no step times.
  if (run_step_stats(r).count == 0) {
    std::fflush(out);
    return;
  }
  const StepStats s = run_step_stats(r);
  std::fprintf(out,
               "%.3g s/epoch, %.0f samples/s, step %.3g ms (median; min %.3g, max %.3g), peak "
               "memory %s (%s above the data)",
               seconds_per_epoch(r), samples_per_second(r), s.median_ms, s.min_ms, s.max_ms,
               format_bytes(r.peak_memory_bytes).c_str(),
               format_bytes(r.peak_memory_bytes - r.data_memory_bytes).c_str());
  if (r.final_loss_scale) {
    std::fprintf(out, ", loss scale %g, %lld skipped steps", *r.final_loss_scale,
                 static_cast<long long>(r.skipped_steps));
  }
  std::fprintf(out, "\n");
  std::fflush(out);
}

void run_train(const TrainOptions& options, const Invocation& invocation) {
  check_options(options);
  RunConfig config = resolve_config(options, invocation.command_line);
  config.keep.stop_on_signal = true;
  const LoadedData data = load_dataset(config);
  run_optimizer(config, data);  // a schedule the run cannot follow fails here, before any output
  print_header(config, data, stdout);
  // SIGINT/SIGTERM from here on stop after the current step (stop_signal.h).
  const SignalStopScope signals;
  const RunResult result = run_training(config, data);
  print_summary(result, stdout);
  if (!config.save_dir.empty()) std::printf("saved the model to %s\n", config.save_dir.c_str());
  // Under mpirun every rank trains the same weights; rank 0 writes the files.
  if (!options.metrics_json.empty() && distributed::rank() == 0) {
    write_json(options.metrics_json, run_to_json(result));
  }
}

}  // namespace

Command add_train_command(CLI::App& app, const Invocation& invocation) {
  auto* sub = app.add_subcommand("train", "train a model on a dataset under one dtype policy");
  auto options = std::make_shared<TrainOptions>();
  add_common_options(*sub, *options, OptionSet::train);
  return {sub, [options, &invocation] { run_train(*options, invocation); }};
}

}  // namespace mixprec::cli
