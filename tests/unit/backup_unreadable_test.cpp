// Issue 33: resuming never starts over silently, and rotation never deletes what it cannot read.
// A backup directory whose only checkpoints cannot be read (a newer format version, a file that is
// not a training checkpoint, garbage) stops fit() with an IOError that lists each file and why and
// says how to start a new run; the files survive, byte for byte. With restart the run starts over
// and keeps them, and the rotation removes only the checkpoints this run wrote or could read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "mixprec/io/checkpoint.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/mixprec.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

Model compiled_model() {
  Model model = testing::tiny_model(1);
  model.compile({.optimizer = optimizers::Adam()});
  return model;
}

History fit_with(Model& model, callbacks::BackupAndRestoreOptions options) {
  const auto data = testing::blobs(48, 1);
  return model.fit(data.x, data.y,
                   {.batch_size = 16,
                    .epochs = 2,
                    .verbose = Verbosity::silent,
                    .callbacks = {callbacks::BackupAndRestore(std::move(options))}});
}

// Three unreadable files: a checkpoint of a newer format version, a weights file (not a
// checkpoint) and garbage.
std::map<fs::path, std::string> unreadable_directory(const fs::path& dir) {
  fs::create_directories(dir);
  Model model = compiled_model();
  const fs::path newer = dir / "ckpt-3.safetensors";
  io::save_checkpoint(model, newer);
  io::SafetensorsContents file = io::load_safetensors(newer);
  file.metadata["version"] = "2";
  io::save_safetensors(newer, file.tensors, file.metadata);
  model.save_weights(dir / "ckpt-2.safetensors");
  write_file(dir / "ckpt-1.safetensors", "not a checkpoint at all");
  std::map<fs::path, std::string> contents;
  for (const auto& entry : fs::directory_iterator(dir)) {
    contents[entry.path()] = read_file(entry.path());
  }
  return contents;
}

void expect_unchanged(const std::map<fs::path, std::string>& contents) {
  for (const auto& [path, bytes] : contents) {
    ASSERT_TRUE(fs::exists(path)) << path << " was deleted";
    EXPECT_EQ(read_file(path), bytes) << path << " was changed";
  }
}

TEST(BackupUnreadableTest, AnUnreadableOnlyDirectoryStopsFitAndSurvives) {
  testing::TempDir dir;
  const fs::path backup = dir.path() / "backup";
  const auto contents = unreadable_directory(backup);
  Model model = compiled_model();
  const std::vector<Tensor> before = model.get_weights();
  try {
    fit_with(model, {.backup_dir = backup, .max_to_keep = 1});
    FAIL() << "expected an IOError";
  } catch (const IOError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
    EXPECT_NE(message.find("holds 3 checkpoints and none can be restored"), std::string::npos)
        << message;
    for (const char* name : {"ckpt-1.safetensors", "ckpt-2.safetensors", "ckpt-3.safetensors"}) {
      EXPECT_NE(message.find((backup / name).string() + ": "), std::string::npos)
          << name << " is not listed: " << message;
    }
    EXPECT_NE(message.find("checkpoint version 2 is not supported"), std::string::npos) << message;
    EXPECT_NE(message.find("not a mixprec training checkpoint"), std::string::npos) << message;
    EXPECT_NE(message.find("--restart"), std::string::npos) << message;
    EXPECT_NE(message.find("another directory"), std::string::npos) << message;
  }
  expect_unchanged(contents);
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(model.get_weights()[i].to_vector<float>(), before[i].to_vector<float>());
  }
}

TEST(BackupUnreadableTest, RestartTrainsAnewAndTheRotationKeepsWhatItCannotRead) {
  testing::TempDir dir;
  const fs::path backup = dir.path() / "backup";
  const auto contents = unreadable_directory(backup);
  Model model = compiled_model();
  // max_to_keep 1 and a checkpoint each epoch: the rotation runs twice and would take all three.
  EXPECT_NO_THROW(fit_with(
      model,
      {.backup_dir = backup, .delete_checkpoint = false, .max_to_keep = 1, .restart = true}));
  expect_unchanged(contents);
  EXPECT_FALSE(fs::exists(backup / "ckpt-4.safetensors")) << "rotated: written by this run";
  EXPECT_TRUE(fs::exists(backup / "ckpt-5.safetensors"));

  // A later run resumes from the newest readable one; delete_checkpoint at its end removes the
  // checkpoints it wrote or read, and none of the others.
  Model again = compiled_model();
  callbacks::BackupAndRestore restore({.backup_dir = backup, .max_to_keep = 1});
  const auto data = testing::blobs(48, 1);
  again.fit(data.x, data.y,
            {.batch_size = 16, .epochs = 2, .verbose = Verbosity::silent, .callbacks = {restore}});
  expect_unchanged(contents);
  EXPECT_FALSE(fs::exists(backup / "ckpt-5.safetensors"));
}

TEST(BackupUnreadableTest, AnUnreadableNewestFallsBackAndIsKept) {
  testing::TempDir dir;
  const fs::path backup = dir.path() / "backup";
  Model model = compiled_model();
  fit_with(model, {.backup_dir = backup, .delete_checkpoint = false, .max_to_keep = 2});
  ASSERT_TRUE(fs::exists(backup / "ckpt-2.safetensors"));
  write_file(backup / "ckpt-9.safetensors", "garbage");  // a newest file that cannot be read
  Model again = compiled_model();
  // Restores ckpt-2 (the run is complete: nothing trains), keeps the garbage through the end.
  fit_with(again, {.backup_dir = backup, .max_to_keep = 1});
  EXPECT_TRUE(fs::exists(backup / "ckpt-9.safetensors"));
  EXPECT_EQ(read_file(backup / "ckpt-9.safetensors"), "garbage");
  EXPECT_FALSE(fs::exists(backup / "ckpt-2.safetensors")) << "read by the run: deleted at its end";
}

}  // namespace
}  // namespace mixprec
