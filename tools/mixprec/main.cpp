// mixprec: the command line (DESIGN §1). main() only parses and maps errors to exit codes:
//   0  success;
//   1  a run failed: a mixprec::Error (missing or corrupt data, unusable device) or another error;
//   2  a usage error: CLI11's (unknown option, missing or non-numeric value) or ours (batch size
//      0, unknown policy, ...).
// Every error is one line on stderr: "error: <message>" (DESIGN §2.7).
//
// Under a launcher (`mpirun -np N mixprec train ...`) every process joins the group
// (mixprec::distributed) before its command runs; only rank 0 prints to stdout and writes files,
// the other ranks' stdout goes to /dev/null, and their errors say which rank they come from.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/version.h"
#include "options.h"
#include "stop_signal.h"

namespace {

std::string quote_if_needed(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\"'$\\") == std::string::npos) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string join_argv(int argc, char** argv) {
  std::string line = "mixprec";
  for (int i = 1; i < argc; ++i) line += " " + quote_if_needed(argv[i]);
  return line;
}

// One line, whatever the message holds; "error: rank R: ..." from a process of a group of several.
void print_error(std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!message.empty() && message.back() == ' ') message.pop_back();
  if (mixprec::distributed::world_size() > 1) {
    message = "rank " + std::to_string(mixprec::distributed::rank()) + ": " + message;
  }
  std::fprintf(stderr, "error: %s\n", message.c_str());
}

// Joins the launcher's group (a group of one without a launcher: nothing happens); the ranks
// other than 0 print nothing to stdout.
void join_process_group() {
  mixprec::distributed::initialize();
  if (mixprec::distributed::rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) {
    throw mixprec::IOError("rank " + std::to_string(mixprec::distributed::rank()) +
                           ": cannot silence stdout (/dev/null)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = mixprec::cli;
  CLI::App app{
      "mixprec: mixed-precision training of neural networks (Keras-style dtype policies, loss "
      "scaling, fit and custom loops) on the CPU (oneDNN) and NVIDIA GPUs.",
      "mixprec"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("mixprec ") + mixprec::version());
  const cli::Invocation invocation{join_argv(argc, argv)};
  const std::vector<cli::Command> commands = {
      cli::add_info_command(app, invocation),     cli::add_train_command(app, invocation),
      cli::add_compare_command(app, invocation),  cli::add_bench_command(app, invocation),
      cli::add_evaluate_command(app, invocation), cli::add_predict_command(app, invocation),
      cli::add_tokenize_command(app, invocation), cli::add_generate_command(app, invocation)};

  // CLI11 reports an unknown subcommand as "A subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const auto& command : commands) {
      known = known || command.app->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + command.app->get_name();
    }
    if (!known) {
      print_error(std::string("unknown command '") + argv[1] + "'; valid commands: " + names +
                  " (see mixprec --help)");
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(std::string(e.what()) + " (see mixprec --help)");
    return 2;
  }

  int code = 0;
  try {
    join_process_group();
    for (const auto& command : commands) {
      if (command.app->parsed()) command.run();
    }
    return 0;
  } catch (const cli::StoppedBySignal& stopped) {
    // A graceful stop (stop_signal.h): the message is out; the shell's status for the signal.
    std::fflush(stdout);
    return 128 + stopped.signal;
  } catch (const cli::UsageError& e) {
    print_error(e.what());
    code = 2;
  } catch (const mixprec::Error& e) {
    print_error(e.what());
    code = 1;
  } catch (const std::exception& e) {
    print_error(e.what());
    code = 1;
  }
  // A rank that failed alone would leave the others waiting in a collective: end them all.
  if (mixprec::distributed::world_size() > 1) {
    std::fprintf(stderr, "mixprec: rank %d failed; ending all %d ranks (MPI_Abort)\n",
                 mixprec::distributed::rank(), mixprec::distributed::world_size());
  }
  std::fflush(stderr);
  mixprec::distributed::abort_group(code);
  return code;
}
