// The subcommands of `mixprec`. Each add_*() registers its CLI11 subcommand and options on `app`
// and returns what main() runs when that subcommand was given.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace mixprec::cli {

struct Invocation {
  std::string command_line;  // argv joined, for the "command" field of JSON reports
};

struct Command {
  CLI::App* app = nullptr;
  std::function<void()> run;  // throws UsageError (exit 2), mixprec::Error and others (exit 1)
};

Command add_info_command(CLI::App& app, const Invocation& invocation);
Command add_train_command(CLI::App& app, const Invocation& invocation);
Command add_compare_command(CLI::App& app, const Invocation& invocation);
Command add_bench_command(CLI::App& app, const Invocation& invocation);
Command add_evaluate_command(CLI::App& app, const Invocation& invocation);
Command add_predict_command(CLI::App& app, const Invocation& invocation);
Command add_generate_command(CLI::App& app, const Invocation& invocation);
Command add_tokenize_command(CLI::App& app, const Invocation& invocation);

}  // namespace mixprec::cli
