// Helpers of the command-line tests: run the mixprec binary and capture its output, and write a
// small Fashion-MNIST-format data set (IDX files) that a test owns.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace mixprec::cli_test {

struct CliResult {
  int exit_code = -1;  // the process's exit status; 128 + signal when it was killed
  std::string out;     // stdout
  std::string err;     // stderr
  // stderr split at '\n' (no empty trailing line).
  std::vector<std::string> err_lines() const;
};

// Runs MIXPREC_CLI_BINARY with `args` (no shell involved) and waits for it. train, compare and
// bench run with --device cpu unless `args` name a --device (see cli_support.cpp).
CliResult run_cli(const std::vector<std::string>& args);
// The same through a launcher (CliProcess's second constructor).
CliResult run_cli_under(const std::vector<std::string>& launcher,
                        const std::vector<std::string>& args);

// The same, without waiting: start it, maybe kill() it (the SIGKILL test), then wait(). The
// destructor kills and reaps a process that was not waited for.
class CliProcess {
 public:
  explicit CliProcess(const std::vector<std::string>& args);
  // The binary started through a launcher: `launcher` is its command line (an absolute path
  // first, e.g. mpirun and its options), the binary and `args` follow it.
  CliProcess(const std::vector<std::string>& launcher, const std::vector<std::string>& args);
  ~CliProcess();
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  void kill(int signal) const;  // nothing once waited for
  CliResult wait();             // once

 private:
  std::unique_ptr<testing::TempDir> capture_;  // stdout and stderr
  pid_t pid_ = -1;
};

using testing::TempDir;

enum class Compression { none, gzip };

// Writes an IDX file: magic 00 00 08 <rank> (ubyte), big-endian uint32 dims, then `payload`.
void write_idx_ubyte(const std::string& path, const std::vector<std::uint32_t>& dims,
                     const std::vector<std::uint8_t>& payload, Compression compression);
// Writes raw bytes (for corrupt files).
void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes);

// A separable 10-class problem in Fashion-MNIST's format: the image of class c is background noise
// in [0, 40) with rows 2c .. 2c+2 set to 255 (so a linear model can reach ~100% accuracy).
// Writes the four files into `dir`: the training pair gzip-compressed (NAME.gz), the test pair
// plain (NAME), which exercises both of the loader's lookups. Labels cycle through 0..9.
void write_tiny_fashion_mnist(const std::filesystem::path& dir, std::uint32_t train_samples,
                              std::uint32_t test_samples);

enum class CifarKind { cifar10, cifar100 };
// A small CIFAR data set in the official binary format: CIFAR-10 as data_batch_1..5.bin
// (train_per_batch records each) and test_batch.bin; CIFAR-100 as train.bin (5 * train_per_batch
// records) and test.bin. Record i has label i % classes (CIFAR-100: coarse i % 20, fine i % 100)
// and pixels (i * 13 + position) % 256.
void write_tiny_cifar(const std::filesystem::path& dir, CifarKind kind,
                      std::uint32_t train_per_batch, std::uint32_t test_samples);

}  // namespace mixprec::cli_test
