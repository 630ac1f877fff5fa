// Writing predictions (see predictions_file.h).
#include "predictions_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "mixprec/error.h"
#include "options.h"

namespace mixprec::cli {

namespace {

namespace fs = std::filesystem;

// The .npy bytes: magic "\x93NUMPY", version 1.0, a little-endian u16 header length, the header
// (a Python dict literal, padded with spaces and ended by '\n' so that the data starts at a
// multiple of 64 bytes, as numpy writes it), then the float32 data in C order.
std::string npy_bytes(const std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
  static_assert(std::endian::native == std::endian::little, "'<f4' data is written as is");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  const std::size_t preamble = 10;  // magic (6) + version (2) + header length (2)
  const std::size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return out;
}

std::string csv_bytes(const std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
  std::string out;
  out.reserve(static_cast<std::size_t>(rows * cols) * 12);
  char number[32];
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      // %.9g: the shortest precision that round-trips every float32.
      std::snprintf(number, sizeof number, "%.9g",
                    static_cast<double>(values[static_cast<std::size_t>(r * cols + c)]));
      out += number;
      out += c + 1 < cols ? ',' : '\n';
    }
  }
  return out;
}

[[noreturn]] void fail(const std::string& what, const fs::path& path, int error) {
  throw IOError("predict: " + what + " '" + path.string() + "': " + std::strerror(error));
}

// Temporary file beside `path`, written, fsync'ed, renamed over `path`, directory fsync'ed.
void write_atomically(const fs::path& path, const std::string& bytes) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string temp = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) fail("cannot create a temporary file beside", path, errno);
  auto give_up = [&](const std::string& what, int error) {
    ::close(fd);
    ::unlink(temp.c_str());
    fail(what, temp, error);
  };
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) give_up("cannot write", n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  // mkstemp creates 0600; the output gets the usual permissions.
  ::fchmod(fd, 0644);
  if (::fsync(fd) != 0) give_up("cannot fsync", errno);
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    fail("cannot close", temp, error);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    fail("cannot rename the temporary file to", path, error);
  }
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {  // the rename itself is durable only once the directory is
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace

PredictionsFormat predictions_format(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == ".npy") return PredictionsFormat::npy;
  if (ext == ".csv") return PredictionsFormat::csv;
  throw UsageError("--output " + path.string() +
                   ": unknown extension; use .npy (NumPy float32 array) or .csv");
}

void write_predictions(const fs::path& path, const std::vector<float>& values, std::int64_t rows,
                       std::int64_t cols) {
  if (static_cast<std::int64_t>(values.size()) != rows * cols) {
    throw ValueError("write_predictions: " + std::to_string(values.size()) + " values for " +
                     std::to_string(rows) + "x" + std::to_string(cols));
  }
  write_atomically(path, predictions_format(path) == PredictionsFormat::npy
                             ? npy_bytes(values, rows, cols)
                             : csv_bytes(values, rows, cols));
}

}  // namespace mixprec::cli
