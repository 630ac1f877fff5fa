// `mixprec compare`: what seeds 001 and 002 do by hand. The same model, data and seed under each
// policy (a fresh model per policy), then one table: seconds/epoch, samples/s, median step time,
// peak memory, final loss scale, skipped steps and test accuracy.
#include <cstdio>
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
  std::string json_path;
};

void run_compare(const CompareOptions& options, const Invocation& invocation) {
  check_options(options.train);
  const auto policies = split_list(options.policies, "--policies");
  for (const auto& p : policies) check_policy_name(p);
  RunConfig config = resolve_config(options.train, invocation.command_line);
  const data::FashionMnist data = load_dataset(config.dataset);
  std::printf("compare: %s (%lld units) on %s, batch %lld, epochs %d, %s, %s loop, device %s\n",
              options.train.model.c_str(), static_cast<long long>(config.units),
              config.dataset.name.c_str(), static_cast<long long>(config.batch_size),
              options.train.epochs, options.train.optimizer.c_str(), options.train.loop.c_str(),
              config.device.device.to_string().c_str());

  std::vector<RunResult> runs;
  for (std::size_t i = 0; i < policies.size(); ++i) {
    config.policy = policies[i];
    std::printf("[%zu/%zu] policy %s\n", i + 1, policies.size(), policies[i].c_str());
    std::fflush(stdout);
    runs.push_back(run_training(config, data));
  }
  std::printf("\n");
  print_compare_table(runs, stdout);
  std::printf(
      "(s/epoch: wall time incl. validation; samples/s: training samples / time in steps; "
      "peak mem: tensor memory above the loaded data set)\n");
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
  sub->add_option("--json", options->json_path, "write every run's metrics to this JSON file");
  return {sub, [options, &invocation] { run_compare(*options, invocation); }};
}

}  // namespace mixprec::cli
