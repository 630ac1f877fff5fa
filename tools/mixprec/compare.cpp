// `mixprec compare`: what seeds 001 and 002 do by hand. The same model, data and seed under each
// policy (a fresh model per policy, optionally its own batch size: --batch-sizes), then one table:
// seconds/epoch, samples/s (images/s for the image models, sequences/s for the GPTs), median step
// time, peak memory, final loss scale, skipped steps and test accuracy; with a batch column when
// batch sizes may differ.
// --tensorboard DIR writes one TensorBoard run per policy, DIR/<policy>.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "mixprec/mixprec.h"
#include "options.h"
#include "report.h"
#include "run.h"

namespace mixprec::cli {

namespace {

struct CompareOptions {
  TrainOptions train;
  std::string policies = "float32,mixed_float16,mixed_bfloat16";
  std::string batch_sizes;  // "" = --batch-size (or its default) for every policy
  std::string json_path;
};

// One batch size per policy: --batch-sizes pairs with --policies in order (seed 002 trains
// float32 at 128 and mixed_float16 at 256); a single value applies to every policy.
std::vector<std::int64_t> batch_sizes_per_policy(const CompareOptions& options,
                                                 std::size_t policies, std::int64_t default_batch) {
  if (options.batch_sizes.empty()) return std::vector<std::int64_t>(policies, default_batch);
  if (options.train.batch_size) {
    throw UsageError(
        "give either --batch-size (one for all) or --batch-sizes (one per policy), "
        "not both");
  }
  std::vector<std::int64_t> sizes;
  for (const auto& item : split_list(options.batch_sizes, "--batch-sizes")) {
    sizes.push_back(parse_positive(item, "--batch-sizes"));
  }
  if (sizes.size() == 1) return std::vector<std::int64_t>(policies, sizes[0]);
  if (sizes.size() != policies) {
    throw UsageError("--batch-sizes has " + std::to_string(sizes.size()) + " values for " +
                     std::to_string(policies) + " policies (" + options.policies +
                     "); give one per policy, in the same order, or one for all");
  }
  return sizes;
}

// "128,256"; "256" when every policy has the same batch size.
std::string join_sizes(const std::vector<std::int64_t>& sizes) {
  const bool same =
      std::all_of(sizes.begin(), sizes.end(), [&](std::int64_t s) { return s == sizes[0]; });
  std::string out;
  for (std::size_t i = 0; i < (same ? 1 : sizes.size()); ++i) {
    out += (i == 0 ? "" : ",") + std::to_string(sizes[i]);
  }
  return out;
}

void run_compare(const CompareOptions& options, const Invocation& invocation) {
  check_options(options.train);
  const auto policies = split_list(options.policies, "--policies");
  for (std::size_t i = 0; i < policies.size(); ++i) {
    check_policy_name(policies[i]);
    for (std::size_t j = 0; j < i; ++j) {
      if (policies[j] == policies[i] && !options.train.tensorboard.empty()) {
        throw UsageError("--policies names " + policies[i] +
                         " twice; with --tensorboard each policy writes DIR/<policy>, so each "
                         "may appear once");
      }
    }
  }
  RunConfig config = resolve_config(options.train, invocation.command_line);
  const std::vector<std::int64_t> batch_sizes =
      batch_sizes_per_policy(options, policies.size(), config.batch_size);
  const LoadedData data = load_dataset(config);
  for (const std::int64_t batch : batch_sizes) {  // fails before any output, as train does
    RunConfig each = config;
    each.batch_size = batch;
    run_optimizer(each, data);
  }
  const bool images = config.model.takes_images() || config.model.is_language_model();
  if (images) {
    std::printf("compare: %s (%s) on %s, batch %s, epochs %d, %s, %s loop, device %s\n",
                options.train.model.c_str(),
                model_shape_text(config, model_shape(config, data.geometry)).c_str(),
                config.dataset.name.c_str(), join_sizes(batch_sizes).c_str(), options.train.epochs,
                optimizer_text(config.optimizer, options.train).c_str(), options.train.loop.c_str(),
                config.device.device.to_string().c_str());
    const std::string steps =
        model_pipeline(data.train, data.geometry, config.model, config.input_size).describe();
    if (!steps.empty()) std::printf("per-batch preprocessing: %s\n", steps.c_str());
  } else {
    std::printf("compare: %s (%lld units) on %s, batch %s, epochs %d, %s, %s loop, device %s\n",
                options.train.model.c_str(), static_cast<long long>(config.units),
                config.dataset.name.c_str(), join_sizes(batch_sizes).c_str(), options.train.epochs,
                optimizer_text(config.optimizer, options.train).c_str(), options.train.loop.c_str(),
                config.device.device.to_string().c_str());
  }

  std::vector<RunResult> runs;
  for (std::size_t i = 0; i < policies.size(); ++i) {
    config.policy = policies[i];
    config.batch_size = batch_sizes[i];
    // One TensorBoard run per policy (DIR/float32/train, DIR/mixed_float16/train, ...): pointed
    // at DIR, TensorBoard overlays the policies' curves, as seed 002 compares its two runs.
    if (!options.train.tensorboard.empty()) {
      config.keep.tensorboard_dir =
          (std::filesystem::path(options.train.tensorboard) / policies[i]).string();
    }
    std::printf("[%zu/%zu] policy %s", i + 1, policies.size(), policies[i].c_str());
    if (!options.batch_sizes.empty())
      std::printf(", batch %lld", static_cast<long long>(batch_sizes[i]));
    std::printf("\n");
    std::fflush(stdout);
    runs.push_back(run_training(config, data));
  }
  std::printf("\n");
  // What a training sample is: an image, a token window (a sequence) of a GPT, or a feature row.
  const bool sequences = config.model.is_language_model();
  const char* sample = sequences ? "sequences" : images ? "images" : "samples";
  const CompareTableStyle style{.batch_column = images || !options.batch_sizes.empty(),
                                .throughput = sequences ? "sequences/s"
                                              : images  ? "images/s"
                                                        : "samples/s"};
  print_compare_table(runs, stdout, style);
  // On a GPU the step times come from CUDA events (GPU time per step) and the peak is the GPU's
  // (the data set stays on the host).
  const std::string memory_note =
      config.device.is_gpu
          ? "steps timed on the GPU; peak mem: tensor memory on " + config.device.device.to_string()
          : std::string("peak mem: tensor memory above the loaded data set");
  std::printf("(s/epoch: wall time incl. validation; %s: training %s / time in steps%s; %s)\n",
              style.throughput, sample, images ? ", per-batch preprocessing excluded" : "",
              memory_note.c_str());
  if (!options.json_path.empty()) {
    nlohmann::ordered_json out = {{"command", invocation.command_line},
                                  {"date", utc_date()},
                                  {"device", config.device.device.to_string()},
                                  {"device_name", config.device.name},
                                  {"runs", nlohmann::ordered_json::array()}};
    for (const auto& r : runs) out["runs"].push_back(run_to_json(r));
    write_json(options.json_path, out);
  }
}

}  // namespace

Command add_compare_command(CLI::App& app, const Invocation& invocation) {
  auto* sub = app.add_subcommand(
      "compare", "train the same model under several policies and print one comparison table");
  auto options = std::make_shared<CompareOptions>();
  add_common_options(*sub, options->train, OptionSet::compare);
  sub->add_option("--policies", options->policies, "comma-separated policies to compare")
      ->capture_default_str();
  sub->add_option("--batch-sizes", options->batch_sizes,
                  "comma-separated batch sizes, one per policy in --policies order (e.g. 128,256 "
                  "as seed 002), or one for all");
  sub->add_option("--json", options->json_path, "write every run's metrics to this JSON file");
  return {sub, [options, &invocation] { run_compare(*options, invocation); }};
}

}  // namespace mixprec::cli
