// Issue 11: "a process killed with SIGKILL at any moment never leaves a checkpoint that fails to
// load as the latest". `mixprec train --checkpoint-dir` is killed at 20 random moments (seeded:
// the same moments every run of the test) and started again each time with the same command.
// After every kill the newest checkpoint in the directory must load into the model the command
// builds (io::load_checkpoint validates the whole file), the next run must resume from exactly
// that file, and the run that finally completes must end with the test loss of a run that was
// never interrupted, to the last bit (exact resume on the CPU).
//
// The run is tiny (an mlp 16-16-3 on 600 synthetic 4x4 images, a checkpoint every 3 batches of
// 10, about 4 ms a step), so a kill lands as often in a checkpoint write as between them. A run
// that completes before its kill (the delays are drawn up to a quarter of the uninterrupted run)
// ends a cycle: its result is checked, the directory emptied, and the kills go on in a new one.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.h"
#include "mixprec/mixprec.h"

namespace mixprec::cli_test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kKills = 20;

std::vector<std::string> train_args(const fs::path& checkpoint_dir, const fs::path& metrics) {
  // 600 synthetic 4x4 images, 480 of them for training: 48 steps of 10 per epoch.
  return {"train",
          "--model",
          "mlp",
          "--units",
          "16",
          "--hidden-layers",
          "1",
          "--dataset",
          "synthetic:4x4x1:3:600",
          "--epochs",
          "30",
          "--batch-size",
          "10",
          "--verbose",
          "2",
          "--checkpoint-dir",
          checkpoint_dir.string(),
          "--save-freq",
          "3",
          "--metrics-json",
          metrics.string()};
}

// ckpt-<n>.safetensors in `dir`, by n (BackupAndRestore's names), newest last.
std::vector<fs::path> checkpoints(const fs::path& dir) {
  std::vector<std::pair<long long, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0 || !name.ends_with(".safetensors")) continue;
    found.emplace_back(std::stoll(name.substr(5)), entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

std::vector<fs::path> temporaries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().find(".tmp-") != std::string::npos) {
      out.push_back(entry.path());
    }
  }
  return out;
}

// Loads `path` into the model the command builds (float32 mlp 16-16-3, rmsprop), as the resumed
// run will; throws mixprec::Error when the file does not load.
io::CheckpointInfo load_into_the_cli_model(const fs::path& path) {
  mixed_precision::set_global_policy("float32");
  clear_session();
  Model model =
      applications::mlp({.units = 16, .hidden_layers = 1, .input_features = 16, .classes = 3});
  model.compile({.optimizer = optimizers::get("rmsprop"),
                 .loss = std::string("sparse_categorical_crossentropy"),
                 .metrics = {std::string("accuracy")}});
  return io::load_checkpoint(model, path);
}

double test_loss(const fs::path& metrics) {
  std::ifstream in(metrics);
  return nlohmann::json::parse(in).at("test").at("loss").get<double>();
}

TEST(CliSigkill, TwentyKillsEachLeaveALoadableLatestCheckpointAndTheRunCompletesExactly) {
  TempDir work;
  const fs::path dir = work.path() / "checkpoints", metrics = work.path() / "metrics.json";
  const std::vector<std::string> args = train_args(dir, metrics);

  // The uninterrupted run: its test loss is what every completed run must reproduce.
  const auto start = Clock::now();
  const CliResult reference =
      run_cli(train_args(work.path() / "reference", work.path() / "reference.json"));
  const double reference_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const double reference_loss = test_loss(work.path() / "reference.json");

  std::mt19937_64 rng(20261125);
  std::uniform_real_distribution<double> delay_s(0.0, std::max(0.2, reference_seconds / 4));
  int kills = 0, loadable = 0, without_checkpoint = 0, cycles = 0;
  std::optional<fs::path> newest;  // what the next run must resume from
  auto check_resume_line = [&](const CliResult& r) {
    EXPECT_EQ(r.err.find("skipping an unreadable checkpoint"), std::string::npos) << r.err;
    const auto at = r.out.find("resuming from ");
    if (at == std::string::npos) return;
    ASSERT_TRUE(newest.has_value()) << "resumed with no checkpoint on disk:\n" << r.out;
    EXPECT_EQ(r.out.compare(at + 14, newest->string().size() + 1, newest->string() + ":"), 0)
        << "expected to resume from " << newest->string() << ":\n"
        << r.out;
  };
  while (kills < kKills) {
    CliProcess run(args);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s(rng)));
    run.kill(SIGKILL);
    const CliResult r = run.wait();
    check_resume_line(r);
    if (r.exit_code == 0) {  // completed before the kill: one cycle done
      EXPECT_EQ(test_loss(metrics), reference_loss) << "cycle " << cycles;
      ++cycles;
      fs::remove_all(dir);
      newest.reset();
      continue;
    }
    ASSERT_EQ(r.exit_code, 128 + SIGKILL) << r.out << r.err;
    ++kills;
    const std::vector<fs::path> files = checkpoints(dir);
    if (files.empty()) {  // killed before the first checkpoint
      ++without_checkpoint;
      newest.reset();
      continue;
    }
    newest = files.back();
    try {
      const io::CheckpointInfo info = load_into_the_cli_model(*newest);
      EXPECT_TRUE(info.in_fit);
      ++loadable;
    } catch (const Error& e) {
      ADD_FAILURE() << "kill " << kills << ": the newest checkpoint " << newest->string()
                    << " does not load: " << e.what();
    }
  }
  EXPECT_EQ(loadable + without_checkpoint, kKills)
      << loadable << " kills left a loadable newest checkpoint, " << without_checkpoint
      << " came before the first checkpoint";

  // The same command once more, not killed: it completes, as the uninterrupted run did.
  const CliResult last = run_cli(args);
  ASSERT_EQ(last.exit_code, 0) << last.err;
  check_resume_line(last);
  EXPECT_EQ(test_loss(metrics), reference_loss);
  EXPECT_TRUE(temporaries(dir).empty()) << "a killed write's temporary file is left";
  EXPECT_LE(checkpoints(dir).size(), 2u);
  // Rerun after completion: says so, trains nothing, same result.
  const CliResult again = run_cli(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("is complete (30/30 epochs"), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("Epoch "), std::string::npos) << again.out;
  EXPECT_EQ(test_loss(metrics), reference_loss);
  std::printf("%d kills (%d before the first checkpoint), %d runs completed before their kill\n",
              kills, without_checkpoint, cycles);
}

}  // namespace
}  // namespace mixprec::cli_test
