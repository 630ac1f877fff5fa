// Helpers of the command-line tests (see cli_support.h).
#include "cli_support.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace mixprec::cli_test {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::uint8_t> idx_bytes(const std::vector<std::uint32_t>& dims,
                                    const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> bytes = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      bytes.push_back(static_cast<std::uint8_t>(d >> shift));
    }
  }
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return bytes;
}

}  // namespace

std::vector<std::string> CliResult::err_lines() const {
  std::vector<std::string> lines;
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

namespace {

// The command-line tests expect CPU runs (tiny data, the CPU defaults, "device": "cpu"), but
// --device auto picks a GPU where there is one: train, compare and bench get --device cpu unless
// the test names a device itself (the tests about devices do).
std::vector<std::string> on_the_cpu_unless_told(const std::vector<std::string>& args) {
  if (args.empty() || (args[0] != "train" && args[0] != "compare" && args[0] != "bench")) {
    return args;
  }
  for (const std::string& a : args) {
    if (a == "--device" || a.rfind("--device=", 0) == 0) return args;
  }
  std::vector<std::string> pinned = args;
  pinned.insert(pinned.begin() + 1, {"--device", "cpu"});
  return pinned;
}

}  // namespace

CliProcess::CliProcess(const std::vector<std::string>& given) : CliProcess({}, given) {}

CliProcess::CliProcess(const std::vector<std::string>& launcher,
                       const std::vector<std::string>& given)
    : capture_(std::make_unique<TempDir>()) {
  const std::vector<std::string> args = on_the_cpu_unless_told(given);
  const std::string out_path = capture_->file("stdout"), err_path = capture_->file("stderr");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> storage = launcher;
  storage.push_back(MIXPREC_CLI_BINARY);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&pid_, storage[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw std::runtime_error("cannot run " + storage[0] + ": " + std::strerror(rc));
  }
}

CliProcess::~CliProcess() {
  if (pid_ > 0) {  // not waited for: do not leave a stray trainer behind
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void CliProcess::kill(int signal) const {
  // Until wait() reaps it the pid stays ours (a zombie at worst), so this never hits another
  // process.
  if (pid_ > 0) ::kill(pid_, signal);
}

CliResult CliProcess::wait() {
  if (pid_ <= 0) throw std::logic_error("CliProcess::wait called twice");
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  }
  pid_ = -1;
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(capture_->file("stdout"));
  result.err = read_file(capture_->file("stderr"));
  return result;
}

CliResult run_cli(const std::vector<std::string>& args) { return CliProcess(args).wait(); }

CliResult run_cli_under(const std::vector<std::string>& launcher,
                        const std::vector<std::string>& args) {
  return CliProcess(launcher, args).wait();
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void write_idx_ubyte(const std::string& path, const std::vector<std::uint32_t>& dims,
                     const std::vector<std::uint8_t>& payload, Compression compression) {
  const auto bytes = idx_bytes(dims, payload);
  if (compression == Compression::none) {
    write_bytes(path, bytes);
    return;
  }
  gzFile gz = gzopen(path.c_str(), "wb");
  if (!gz) throw std::runtime_error("cannot write " + path);
  const int written = gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  if (gzclose(gz) != Z_OK || written != static_cast<int>(bytes.size())) {
    throw std::runtime_error("cannot write " + path);
  }
}

void write_tiny_fashion_mnist(const std::filesystem::path& dir, std::uint32_t train_samples,
                              std::uint32_t test_samples) {
  constexpr std::uint32_t kSide = 28;
  std::uint32_t noise = 12345;  // a small LCG: the data only has to be fixed, not random
  auto make = [&](std::uint32_t n, std::vector<std::uint8_t>& images,
                  std::vector<std::uint8_t>& labels) {
    images.assign(static_cast<std::size_t>(n) * kSide * kSide, 0);
    labels.assign(n, 0);
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint8_t label = static_cast<std::uint8_t>(i % 10);
      labels[i] = label;
      std::uint8_t* image = images.data() + static_cast<std::size_t>(i) * kSide * kSide;
      for (std::uint32_t p = 0; p < kSide * kSide; ++p) {
        noise = noise * 1103515245u + 12345u;
        image[p] = static_cast<std::uint8_t>((noise >> 16) % 40);
      }
      for (std::uint32_t row = 2u * label; row < 2u * label + 2u; ++row) {
        for (std::uint32_t col = 0; col < kSide; ++col) image[row * kSide + col] = 255;
      }
    }
  };
  std::vector<std::uint8_t> images, labels;
  make(train_samples, images, labels);
  write_idx_ubyte((dir / "train-images-idx3-ubyte.gz").string(), {train_samples, kSide, kSide},
                  images, Compression::gzip);
  write_idx_ubyte((dir / "train-labels-idx1-ubyte.gz").string(), {train_samples}, labels,
                  Compression::gzip);
  make(test_samples, images, labels);
  write_idx_ubyte((dir / "t10k-images-idx3-ubyte").string(), {test_samples, kSide, kSide}, images,
                  Compression::none);
  write_idx_ubyte((dir / "t10k-labels-idx1-ubyte").string(), {test_samples}, labels,
                  Compression::none);
}

void write_tiny_cifar(const std::filesystem::path& dir, CifarKind kind,
                      std::uint32_t train_per_batch, std::uint32_t test_samples) {
  constexpr std::uint32_t kPixels = 32 * 32 * 3;
  auto records = [&](std::uint32_t first, std::uint32_t count) {
    std::vector<std::uint8_t> bytes;
    for (std::uint32_t i = first; i < first + count; ++i) {
      if (kind == CifarKind::cifar10) {
        bytes.push_back(static_cast<std::uint8_t>(i % 10));
      } else {
        bytes.push_back(static_cast<std::uint8_t>(i % 20));
        bytes.push_back(static_cast<std::uint8_t>(i % 100));
      }
      for (std::uint32_t p = 0; p < kPixels; ++p) {
        bytes.push_back(static_cast<std::uint8_t>((i * 13 + p) % 256));
      }
    }
    return bytes;
  };
  if (kind == CifarKind::cifar10) {
    for (std::uint32_t b = 0; b < 5; ++b) {
      write_bytes((dir / ("data_batch_" + std::to_string(b + 1) + ".bin")).string(),
                  records(b * train_per_batch, train_per_batch));
    }
    write_bytes((dir / "test_batch.bin").string(), records(1000, test_samples));
  } else {
    write_bytes((dir / "train.bin").string(), records(0, 5 * train_per_batch));
    write_bytes((dir / "test.bin").string(), records(1000, test_samples));
  }
}

}  // namespace mixprec::cli_test
