// Issue 33: `mixprec train` never loses a run. SIGTERM (a preempted cloud job) or SIGINT lets the
// current step finish, writes a checkpoint, says where and how to resume and exits 143 or 130;
// the same command then finishes the run with weights bit-identical to a run that was never
// stopped. A second signal stops at once. A checkpoint directory whose checkpoints cannot be read
// is an error that lists each file and keeps it, never a fresh start; --restart starts anew and
// keeps them too.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_support.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"

namespace mixprec::cli_test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> train_args(const fs::path& checkpoint_dir, const fs::path& save_dir) {
  // 6000 synthetic 4x4 images, 4800 for training: 480 steps of 10 per epoch (about half a second
  // an epoch, so that the signal lands inside the run).
  return {"train",
          "--model",
          "mlp",
          "--units",
          "16",
          "--hidden-layers",
          "1",
          "--dataset",
          "synthetic:4x4x1:3:6000",
          "--epochs",
          "20",
          "--batch-size",
          "10",
          "--verbose",
          "2",
          "--checkpoint-dir",
          checkpoint_dir.string(),
          "--save",
          save_dir.string(),
          "--metrics-json",
          (save_dir.parent_path() / (save_dir.filename().string() + "-metrics.json")).string()};
}

// --metrics-json's epochs, without their timings (seconds, steps timed).
nlohmann::json epochs_of(const fs::path& save_dir) {
  std::ifstream in(save_dir.parent_path() / (save_dir.filename().string() + "-metrics.json"));
  nlohmann::json epochs = nlohmann::json::parse(in).at("epochs");
  for (nlohmann::json& e : epochs) {
    e.erase("seconds");
    e.erase("steps");
  }
  return epochs;
}

// Waits (at most a minute) until `path` exists.
bool wait_for(const fs::path& path) {
  for (int i = 0; i < 6000; ++i) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The variables of a saved model's weights file, as raw bytes by name.
std::vector<std::pair<std::string, std::string>> weights_of(const fs::path& saved) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, t] : io::load_safetensors(saved / "model.safetensors").tensors) {
    const auto* p = static_cast<const char*>(t.data_ptr());
    out.emplace_back(name, std::string(p, p + t.nbytes()));
  }
  return out;
}

TEST(CliStop, SigtermCheckpointsExits143AndTheSameCommandFinishesBitIdentical) {
  TempDir work;
  const CliResult reference = run_cli(train_args(work.path() / "ref-ckpt", work.path() / "ref"));
  ASSERT_EQ(reference.exit_code, 0) << reference.err;

  const fs::path dir = work.path() / "ckpt", saved = work.path() / "saved";
  const std::vector<std::string> args = train_args(dir, saved);
  CliProcess run(args);
  ASSERT_TRUE(wait_for(dir / "ckpt-2.safetensors")) << "the run never reached its 2nd epoch";
  run.kill(SIGTERM);
  const CliResult stopped = run.wait();
  ASSERT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.out << stopped.err;
  EXPECT_NE(stopped.err.find("mixprec: stopped by SIGTERM: epoch "), std::string::npos)
      << stopped.err;
  EXPECT_NE(stopped.err.find("run the same command again to resume"), std::string::npos)
      << stopped.err;
  EXPECT_FALSE(fs::exists(saved)) << "a stopped run saves no model";
  // The checkpoint the message names was written by the stop: the newest, readable, past the end
  // of epoch 2 (where the signal was sent) and before the end of the run.
  const std::string saved_in = " saved in ";
  const std::size_t at = stopped.err.find(saved_in);
  ASSERT_NE(at, std::string::npos) << stopped.err;
  const std::size_t end = stopped.err.find(';', at);
  const fs::path written = stopped.err.substr(at + saved_in.size(), end - at - saved_in.size());
  ASSERT_TRUE(fs::is_regular_file(written)) << written;
  const std::vector<fs::path> files =
      callbacks::BackupAndRestore({.backup_dir = dir}).checkpoints();
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files.back(), written);
  EXPECT_NE(written.filename(), "ckpt-2.safetensors") << "written after the signal";
  const io::CheckpointInfo info = io::read_checkpoint_info(written);
  EXPECT_TRUE(info.in_fit);
  EXPECT_GE(info.iterations, 2 * 480);
  EXPECT_LT(info.iterations, 20 * 480) << "stopped before the end of the run";

  const CliResult resumed = run_cli(args);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming from "), std::string::npos) << resumed.out;
  EXPECT_EQ(weights_of(saved), weights_of(work.path() / "ref"))
      << "the resumed run must end with the uninterrupted run's weights, bit for bit";
  // --metrics-json holds every epoch of the run, with the uninterrupted run's values: those before
  // the stop from the checkpoint's record, the stopped epoch from its running sums.
  const nlohmann::json epochs = epochs_of(saved), expected = epochs_of(work.path() / "ref");
  ASSERT_EQ(expected.size(), 20u);
  ASSERT_EQ(epochs.size(), 20u);
  for (std::size_t i = 0; i < epochs.size(); ++i) {
    EXPECT_EQ(epochs[i], expected[i]) << "epoch " << i + 1 << " (stopped in epoch "
                                      << info.epoch + 1 << ", step " << info.step << ")";
  }
}

TEST(CliStop, ASecondSignalStopsAtOnce) {
  TempDir work;
  const fs::path dir = work.path() / "ckpt";
  CliProcess run(train_args(dir, work.path() / "saved"));
  ASSERT_TRUE(wait_for(dir / "ckpt-1.safetensors"));
  run.kill(SIGINT);
  run.kill(SIGTERM);
  const CliResult r = run.wait();
  // Killed by whichever signal came second (the first only asked for a graceful stop).
  EXPECT_TRUE(r.exit_code == 128 + SIGTERM || r.exit_code == 128 + SIGINT) << r.exit_code;
  EXPECT_NE(r.err.find("stopping after the current step"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("mixprec: stopped by"), std::string::npos)
      << "the second signal must not wait for the graceful stop: " << r.err;
}

TEST(CliStop, AnUnreadableOnlyCheckpointDirectoryIsAnErrorAndSurvives) {
  TempDir work;
  const fs::path dir = work.path() / "ckpt";
  fs::create_directories(dir);
  const fs::path garbage = dir / "ckpt-1.safetensors", other = dir / "ckpt-2.safetensors";
  write_bytes(garbage.string(), {'n', 'o', 't', ' ', 'a', ' ', 'c', 'k', 'p', 't', '!'});
  write_bytes(other.string(), {1, 0, 0, 0, 0, 0, 0, 0, '{'});
  const std::string garbage_bytes = read_file(garbage), other_bytes = read_file(other);
  std::vector<std::string> args = train_args(dir, work.path() / "saved");
  args[10] = "2";  // --epochs

  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::vector<std::string> lines = r.err_lines();
  ASSERT_FALSE(lines.empty());
  const std::string& error = lines.back();
  EXPECT_EQ(error.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(error.find(garbage.string() + ": "), std::string::npos) << error;
  EXPECT_NE(error.find(other.string() + ": "), std::string::npos) << error;
  EXPECT_NE(error.find("--restart"), std::string::npos) << error;
  EXPECT_EQ(r.out.find("Epoch "), std::string::npos) << "nothing may train: " << r.out;
  EXPECT_EQ(read_file(garbage), garbage_bytes);
  EXPECT_EQ(read_file(other), other_bytes);

  // --restart: a new run beside them; the files stay.
  args.push_back("--restart");
  const CliResult restarted = run_cli(args);
  EXPECT_EQ(restarted.exit_code, 0) << restarted.err;
  EXPECT_EQ(read_file(garbage), garbage_bytes);
  EXPECT_EQ(read_file(other), other_bytes);
  EXPECT_TRUE(fs::exists(dir / "ckpt-4.safetensors")) << "the new run's checkpoints follow";
}

TEST(CliStop, ResumingUnderAnotherPolicySaysSoInTheCommandsWords) {
  TempDir work;
  const fs::path dir = work.path() / "ckpt";
  std::vector<std::string> args = train_args(dir, work.path() / "saved");
  args[10] = "1";  // --epochs
  ASSERT_EQ(run_cli(args).exit_code, 0);
  args.insert(args.end(), {"--policy", "mixed_float16"});
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  // The last line (mixed_float16 on a CPU logs its compatibility warning first).
  const std::vector<std::string> lines = r.err_lines();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("error: the run in ", 0), 0u) << r.err;
  EXPECT_NE(lines.back().find("was trained with --policy float32"), std::string::npos) << r.err;
  EXPECT_NE(lines.back().find("resume it with --policy float32"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mixprec::cli_test
