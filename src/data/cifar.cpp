// CIFAR-10/100 binary readers: find the files, check every file's size against the record size
// (before any allocation), then stream each file in chunks of records, checking labels and
// converting planar uint8 RGB to NHWC float32 through a 256-entry table (x / 255 without a
// division per pixel, the same values as the Fashion-MNIST loader produces).
#include "mixprec/data/cifar.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor_impl.h"

namespace mixprec::data {

namespace {

namespace fs = std::filesystem;

// Records per read: 1024 records are ~3 MiB, big enough to amortise fread, small enough to stay
// in cache while they are converted.
constexpr std::int64_t kChunkRecords = 1024;
// Conversion runs in parallel above this many records per chunk.
constexpr std::int64_t kParallelRecords = 64;
// The float32 output of all files together may not exceed this (the IDX reader's cap): a file
// of the wrong kind (a disk image, a video) is refused instead of exhausting memory.
constexpr std::uint64_t kMaxOutputBytes = kIdxDefaultMaxBytes;

struct Format {
  const char* dataset;           // "CIFAR-10"
  const char* archive;           // "cifar-10-binary.tar.gz"
  const char* subdir;            // "cifar-10-batches-bin"
  std::int64_t label_bytes;      // 1 (CIFAR-10) or 2 (CIFAR-100: coarse, fine)
  std::vector<int> label_range;  // classes of each label byte, in file order
  std::vector<const char*> label_names;
  int returned_label;  // which label byte becomes y
  std::int64_t record_bytes() const { return label_bytes + kCifarPixelBytes; }
};

std::string download_hint(const Format& f) {
  return std::string("download ") + f.archive +
         " from https://www.cs.toronto.edu/~kriz/cifar.html, extract it and pass the " + f.subdir +
         " directory (" + (f.label_bytes == 1 ? "cifar10" : "cifar100") +
         ":DIR on the command line)";
}

std::string file_list(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : (i + 1 == names.size() ? " and " : ", ")) + names[i];
  }
  return out;
}

// The directory that holds the files: `dir` itself, or its subdirectory named f.subdir (the
// archive extracts into that folder, so users often pass the parent).
fs::path find_directory(const std::string& dir, const Format& f,
                        const std::vector<std::string>& names) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw DataError(std::string(f.dataset) + " directory " + dir +
                    " not found: " + download_hint(f));
  }
  const fs::path nested = fs::path(dir) / f.subdir;
  if (!fs::exists(fs::path(dir) / names.front(), ec) && fs::is_directory(nested, ec)) {
    return nested;
  }
  return fs::path(dir);
}

struct CloseFile {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, CloseFile>;

struct CheckedFile {
  std::string path;
  std::int64_t records = 0;
};

// Existence, kind and size of one file: a whole, non-zero number of records.
CheckedFile check_file(const fs::path& dir, const std::string& name, const Format& f,
                       const std::vector<std::string>& names) {
  const fs::path path = dir / name;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    std::string hint = download_hint(f);
    // The Python version names its files without ".bin" (data_batch_1, test_batch, train, test).
    if (fs::exists(dir / fs::path(name).stem(), ec)) {
      hint = std::string("this looks like the Python version of ") + f.dataset +
             "; the binary version is needed: " + hint;
    }
    throw DataError(std::string(f.dataset) + " file " + name + " not found in " + dir.string() +
                    " (expected " + file_list(names) + "): " + hint);
  }
  if (!fs::is_regular_file(status)) {
    throw DataError(path.string() + ": not a regular file; expected the " + f.dataset +
                    " binary file " + name);
  }
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) throw DataError(path.string() + ": cannot read its size: " + ec.message());
  const auto record = static_cast<std::uintmax_t>(f.record_bytes());
  if (size == 0) {
    throw DataError(path.string() + ": the file is empty; expected a whole, non-zero number of " +
                    std::to_string(record) + "-byte " + f.dataset + " records: re-download " +
                    f.archive);
  }
  if (size % record != 0) {
    throw DataError(path.string() + ": " + std::to_string(size) +
                    " bytes is not a whole number of " + std::to_string(record) + "-byte " +
                    f.dataset + " records (" + std::to_string(f.label_bytes) + " label byte" +
                    (f.label_bytes == 1 ? "" : "s") + " + 3072 pixel bytes; " +
                    std::to_string(size / record) + " records and " +
                    std::to_string(size % record) +
                    " bytes left over); the file is truncated, damaged or not a " + f.dataset +
                    " binary file: re-download " + f.archive);
  }
  return {path.string(), static_cast<std::int64_t>(size / record)};
}

// `names` of the split, `all` the data set's files (for the message).
std::vector<CheckedFile> check_files(const fs::path& dir, const std::vector<std::string>& names,
                                     const Format& f, const std::vector<std::string>& all) {
  std::vector<CheckedFile> files;
  for (const auto& name : names) files.push_back(check_file(dir, name, f, all));
  return files;
}

std::int64_t total_records(const std::vector<CheckedFile>& files, const Format& f) {
  std::uint64_t total = 0;
  for (const auto& file : files) total += static_cast<std::uint64_t>(file.records);
  // Output bytes: records * 3072 floats; the check above bounds each file by the disk, this
  // bounds the sum by memory.
  const std::uint64_t bytes = total * static_cast<std::uint64_t>(kCifarPixelBytes) * sizeof(float);
  if (bytes > kMaxOutputBytes) {
    throw DataError(std::string(f.dataset) + ": " + std::to_string(total) + " records would need " +
                    std::to_string(bytes >> 20) + " MiB as float32, more than the " +
                    std::to_string(kMaxOutputBytes >> 20) +
                    " MiB limit; these are not CIFAR files (" + files.front().path + ", ...)");
  }
  return static_cast<std::int64_t>(total);
}

// Reads `file` into x (records, 32, 32, 3) float32 and y (records,) int64 starting at row `first`.
void read_records(const CheckedFile& file, const Format& f, float* x, std::int64_t* y,
                  std::int64_t first) {
  File handle(std::fopen(file.path.c_str(), "rb"));
  if (!handle) {
    throw DataError(file.path + ": cannot open: " + std::strerror(errno));
  }
  float table[256];
  for (int v = 0; v < 256; ++v) table[v] = static_cast<float>(v) / 255.0f;
  constexpr std::int64_t kPlane = kCifarSide * kCifarSide;  // 1024 pixels per channel plane

  const std::int64_t record_bytes = f.record_bytes();
  std::vector<unsigned char> buffer(
      static_cast<std::size_t>(std::min(file.records, kChunkRecords) * record_bytes));
  for (std::int64_t done = 0; done < file.records;) {
    const std::int64_t n = std::min(file.records - done, kChunkRecords);
    const std::size_t want = static_cast<std::size_t>(n * record_bytes);
    if (std::fread(buffer.data(), 1, want, handle.get()) != want) {
      throw DataError(file.path + ": the file ended before record " + std::to_string(done + n) +
                      " of " + std::to_string(file.records) +
                      " (it changed while loading, or a read error: " + std::strerror(errno) +
                      "); load it again");
    }
    // Labels first: a bad one is reported before its pixels are converted.
    for (std::int64_t r = 0; r < n; ++r) {
      const unsigned char* record = buffer.data() + r * record_bytes;
      for (std::int64_t b = 0; b < f.label_bytes; ++b) {
        const int range = f.label_range[static_cast<std::size_t>(b)];
        if (record[b] >= range) {
          throw DataError(file.path + ": " + f.label_names[static_cast<std::size_t>(b)] +
                          " label " + std::to_string(record[b]) + " of record " +
                          std::to_string(done + r) + " is outside [0, " +
                          std::to_string(range - 1) + "]; the file is damaged or not a " +
                          f.dataset + " binary file");
        }
      }
      y[first + done + r] = record[f.returned_label];
    }
    // Planar (3, 32, 32) -> interleaved (32, 32, 3): output pixel p, channel c reads plane c.
#pragma omp parallel for schedule(static) if (n >= kParallelRecords)
    for (std::int64_t r = 0; r < n; ++r) {
      const unsigned char* pixels = buffer.data() + r * record_bytes + f.label_bytes;
      float* out = x + (first + done + r) * kCifarPixelBytes;
      for (std::int64_t p = 0; p < kPlane; ++p) {
        out[3 * p + 0] = table[pixels[p]];
        out[3 * p + 1] = table[pixels[kPlane + p]];
        out[3 * p + 2] = table[pixels[2 * kPlane + p]];
      }
    }
    done += n;
  }
  if (std::fgetc(handle.get()) != EOF) {
    throw DataError(file.path + ": the file grew while loading (its size said " +
                    std::to_string(file.records) + " records); load it again");
  }
}

struct Split {
  Tensor x, y;
};

Split read_split(const std::vector<CheckedFile>& files, const Format& f) {
  const std::int64_t n = total_records(files, f);
  // Validated: every file holds whole records and the total is within the cap.
  Split out{core::make_tensor(Shape{n, kCifarSide, kCifarSide, kCifarChannels}, DType::float32,
                              Device::cpu()),
            core::make_tensor(Shape{n}, DType::int64, Device::cpu())};
  float* x = out.x.data<float>();
  std::int64_t* y = out.y.data<std::int64_t>();
  std::int64_t first = 0;
  for (const auto& file : files) {
    read_records(file, f, x, y, first);
    first += file.records;
  }
  return out;
}

Cifar load(const std::string& dir, const Format& f, const std::vector<std::string>& train_names,
           const std::vector<std::string>& test_names) {
  std::vector<std::string> all = train_names;
  all.insert(all.end(), test_names.begin(), test_names.end());
  const fs::path root = find_directory(dir, f, all);
  // Every file's size is checked before any is read.
  const std::vector<CheckedFile> train = check_files(root, train_names, f, all);
  const std::vector<CheckedFile> test = check_files(root, test_names, f, all);
  total_records(train, f);
  total_records(test, f);
  Split train_split = read_split(train, f);
  Split test_split = read_split(test, f);
  return {train_split.x, train_split.y, test_split.x, test_split.y};
}

}  // namespace

const std::array<std::string_view, kCifar10Classes>& cifar10_class_names() {
  static constexpr std::array<std::string_view, kCifar10Classes> names = {
      "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  return names;
}

Cifar load_cifar10(const std::string& dir) {
  const Format f{"CIFAR-10", "cifar-10-binary.tar.gz", "cifar-10-batches-bin",
                 1,          {kCifar10Classes},        {"class"},
                 0};
  return load(dir, f,
              {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
               "data_batch_5.bin"},
              {"test_batch.bin"});
}

Cifar load_cifar100(const std::string& dir, Cifar100Label label) {
  const Format f{"CIFAR-100",
                 "cifar-100-binary.tar.gz",
                 "cifar-100-binary",
                 2,
                 {kCifar100CoarseClasses, kCifar100FineClasses},
                 {"coarse", "fine"},
                 label == Cifar100Label::coarse ? 0 : 1};
  return load(dir, f, {"train.bin"}, {"test.bin"});
}

}  // namespace mixprec::data
