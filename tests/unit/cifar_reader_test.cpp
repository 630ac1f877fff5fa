// CIFAR-10/100 binary readers on small files written here: values (planar RGB -> NHWC / 255),
// file order, label choice, directory lookup, and every rejection (missing directory or file,
// sizes that are not whole records, labels out of range), with files left as they were.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/data/cifar.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;
using testing::expect_error;
using testing::TempDir;

// The pixel byte of global sample n, channel c (0 R, 1 G, 2 B), row h, column w.
unsigned char pixel(std::int64_t n, int c, int h, int w) {
  return static_cast<unsigned char>((n * 37 + c * 101 + h * 7 + w * 3) % 256);
}

// One record: `labels` then the three 32x32 planes R, G, B, each row-major.
Bytes record(std::int64_t n, const Bytes& labels) {
  Bytes out = labels;
  for (int c = 0; c < 3; ++c) {
    for (int h = 0; h < 32; ++h) {
      for (int w = 0; w < 32; ++w) out.push_back(pixel(n, c, h, w));
    }
  }
  return out;
}

void write(const fs::path& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

Bytes read(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// CIFAR-10 label of global sample n (train samples first, then test samples from 100).
unsigned char label10(std::int64_t n) { return static_cast<unsigned char>((n * 3) % 10); }

// Training records per batch file: uneven, so that the file order shows in the result.
const std::vector<std::int64_t> kBatchRecords = {3, 1, 2, 1, 2};
constexpr std::int64_t kTrain = 9, kTest = 2, kTestBase = 100;

void write_cifar10(const fs::path& dir) {
  fs::create_directories(dir);
  std::int64_t n = 0;
  for (std::size_t b = 0; b < kBatchRecords.size(); ++b) {
    Bytes bytes;
    for (std::int64_t r = 0; r < kBatchRecords[b]; ++r, ++n) {
      const Bytes rec = record(n, {label10(n)});
      bytes.insert(bytes.end(), rec.begin(), rec.end());
    }
    write(dir / ("data_batch_" + std::to_string(b + 1) + ".bin"), bytes);
  }
  Bytes test;
  for (std::int64_t r = 0; r < kTest; ++r) {
    const Bytes rec = record(kTestBase + r, {label10(kTestBase + r)});
    test.insert(test.end(), rec.begin(), rec.end());
  }
  write(dir / "test_batch.bin", test);
}

// x[i] against the pixels of global sample `n`, y[i] against `label`.
void expect_sample(const Tensor& x, const Tensor& y, std::int64_t i, std::int64_t n,
                   std::int64_t label) {
  const float* px = x.data<float>() + i * 32 * 32 * 3;
  int mismatches = 0;
  for (int h = 0; h < 32; ++h) {
    for (int w = 0; w < 32; ++w) {
      for (int c = 0; c < 3; ++c) {
        const float expected = static_cast<float>(pixel(n, c, h, w)) / 255.0f;
        if (px[(h * 32 + w) * 3 + c] != expected && mismatches++ < 3) {
          ADD_FAILURE() << "sample " << i << " (" << h << ", " << w << ", " << c << "): got "
                        << px[(h * 32 + w) * 3 + c] << ", expected " << expected;
        }
      }
    }
  }
  EXPECT_EQ(y.data<std::int64_t>()[i], label) << "sample " << i;
}

TEST(CifarReaderTest, Cifar10ReadsEveryBatchInOrderAsNhwcFloats) {
  TempDir tmp;
  write_cifar10(tmp.path());
  const Cifar c = load_cifar10(tmp.str());
  EXPECT_EQ(c.x_train.shape(), (Shape{kTrain, 32, 32, 3}));
  EXPECT_EQ(c.x_train.dtype(), DType::float32);
  EXPECT_EQ(c.y_train.shape(), (Shape{kTrain}));
  EXPECT_EQ(c.y_train.dtype(), DType::int64);
  EXPECT_EQ(c.x_test.shape(), (Shape{kTest, 32, 32, 3}));
  EXPECT_EQ(c.y_test.shape(), (Shape{kTest}));
  for (std::int64_t n = 0; n < kTrain; ++n) expect_sample(c.x_train, c.y_train, n, n, label10(n));
  for (std::int64_t r = 0; r < kTest; ++r) {
    expect_sample(c.x_test, c.y_test, r, kTestBase + r, label10(kTestBase + r));
  }
}

TEST(CifarReaderTest, Cifar10AcceptsTheDirectoryAboveTheExtractedFolder) {
  TempDir tmp;
  write_cifar10(tmp.path() / "cifar-10-batches-bin");
  const Cifar c = load_cifar10(tmp.str());
  EXPECT_EQ(c.x_train.dim(0), kTrain);
  expect_sample(c.x_train, c.y_train, 4, 4, label10(4));
}

TEST(CifarReaderTest, Cifar10ClassNames) {
  EXPECT_EQ(cifar10_class_names()[0], "airplane");
  EXPECT_EQ(cifar10_class_names()[9], "truck");
}

void write_cifar100(const fs::path& dir, std::int64_t train, std::int64_t test) {
  // Sample n: coarse label n % 20, fine label (n * 7) % 100.
  auto file = [](std::int64_t base, std::int64_t count) {
    Bytes bytes;
    for (std::int64_t n = base; n < base + count; ++n) {
      const Bytes rec = record(
          n, {static_cast<unsigned char>(n % 20), static_cast<unsigned char>((n * 7) % 100)});
      bytes.insert(bytes.end(), rec.begin(), rec.end());
    }
    return bytes;
  };
  fs::create_directories(dir);
  write(dir / "train.bin", file(0, train));
  write(dir / "test.bin", file(kTestBase, test));
}

TEST(CifarReaderTest, Cifar100FineAndCoarseLabels) {
  TempDir tmp;
  write_cifar100(tmp.path(), 5, 3);
  const Cifar fine = load_cifar100(tmp.str());
  const Cifar coarse = load_cifar100(tmp.str(), Cifar100Label::coarse);
  ASSERT_EQ(fine.x_train.shape(), (Shape{5, 32, 32, 3}));
  ASSERT_EQ(fine.x_test.shape(), (Shape{3, 32, 32, 3}));
  for (std::int64_t n = 0; n < 5; ++n) {
    expect_sample(fine.x_train, fine.y_train, n, n, (n * 7) % 100);
    expect_sample(coarse.x_train, coarse.y_train, n, n, n % 20);
  }
  for (std::int64_t r = 0; r < 3; ++r) {
    const std::int64_t n = kTestBase + r;
    expect_sample(fine.x_test, fine.y_test, r, n, (n * 7) % 100);
    expect_sample(coarse.x_test, coarse.y_test, r, n, n % 20);
  }
}

TEST(CifarReaderTest, Cifar100NestedFolder) {
  TempDir tmp;
  write_cifar100(tmp.path() / "cifar-100-binary", 2, 1);
  EXPECT_EQ(load_cifar100(tmp.str()).x_train.dim(0), 2);
}

TEST(CifarReaderTest, MissingDirectorySaysWhereToGetTheData) {
  TempDir tmp;
  const std::string missing = tmp.file("nowhere");
  expect_error<DataError>([&] { load_cifar10(missing); },
                          {missing, "cifar-10-binary.tar.gz", "cifar-10-batches-bin"});
  expect_error<DataError>([&] { load_cifar100(missing); }, {missing, "cifar-100-binary.tar.gz"});
}

TEST(CifarReaderTest, MissingFileNamesTheExpectedFiles) {
  TempDir tmp;
  write_cifar10(tmp.path());
  fs::remove(tmp.path() / "data_batch_3.bin");
  expect_error<DataError>(
      [&] { load_cifar10(tmp.str()); },
      {"data_batch_3.bin not found in " + tmp.str(), "data_batch_1.bin", "test_batch.bin"});
}

TEST(CifarReaderTest, PythonVersionGetsAHint) {
  TempDir tmp;
  write(tmp.path() / "data_batch_1", Bytes{1, 2, 3});
  expect_error<DataError>([&] { load_cifar10(tmp.str()); }, {"Python version", "binary version"});
}

TEST(CifarReaderTest, SizeThatIsNotWholeRecordsIsRejectedAndTheFileKept) {
  TempDir tmp;
  write_cifar10(tmp.path());
  const fs::path path = tmp.path() / "data_batch_2.bin";
  Bytes bytes = read(path);
  ASSERT_EQ(bytes.size(), 3073u);
  bytes.resize(3073 + 100);  // one record and 100 bytes of a second
  write(path, bytes);
  expect_error<DataError>([&] { load_cifar10(tmp.str()); },
                          {path.string(), "3173 bytes", "not a whole number of 3073-byte",
                           "1 records and 100 bytes left over"});
  EXPECT_EQ(read(path), bytes);  // reading never modifies the file
}

TEST(CifarReaderTest, Cifar100RecordsAre3074Bytes) {
  TempDir tmp;
  write_cifar100(tmp.path(), 2, 1);
  // A CIFAR-10 record (3073 bytes) where a CIFAR-100 file is expected.
  write(tmp.path() / "test.bin", record(0, {1}));
  expect_error<DataError>([&] { load_cifar100(tmp.str()); },
                          {"test.bin", "3073 bytes", "3074-byte CIFAR-100 records"});
}

TEST(CifarReaderTest, EmptyFileIsRejected) {
  TempDir tmp;
  write_cifar10(tmp.path());
  write(tmp.path() / "test_batch.bin", Bytes{});
  expect_error<DataError>([&] { load_cifar10(tmp.str()); },
                          {"test_batch.bin", "empty", "3073-byte CIFAR-10 records"});
}

TEST(CifarReaderTest, LabelOutOfRangeNamesTheRecord) {
  TempDir tmp;
  write_cifar10(tmp.path());
  const fs::path path = tmp.path() / "data_batch_1.bin";
  Bytes bytes = read(path);
  bytes[2 * 3073] = 10;  // record 2's label
  write(path, bytes);
  expect_error<DataError>([&] { load_cifar10(tmp.str()); },
                          {path.string(), "label 10 of record 2", "[0, 9]"});
}

TEST(CifarReaderTest, Cifar100ChecksBothLabels) {
  TempDir tmp;
  write_cifar100(tmp.path(), 3, 1);
  const fs::path path = tmp.path() / "train.bin";
  const Bytes good = read(path);
  Bytes bad = good;
  bad[1 * 3074] = 20;  // record 1's coarse label
  write(path, bad);
  // Rejected even when the fine label is the one returned.
  expect_error<DataError>([&] { load_cifar100(tmp.str(), Cifar100Label::fine); },
                          {"coarse label 20 of record 1", "[0, 19]"});
  bad = good;
  bad[2 * 3074 + 1] = 100;  // record 2's fine label
  write(path, bad);
  expect_error<DataError>([&] { load_cifar100(tmp.str(), Cifar100Label::coarse); },
                          {"fine label 100 of record 2", "[0, 99]"});
}

TEST(CifarReaderTest, DirectoryInPlaceOfAFileIsRejected) {
  TempDir tmp;
  write_cifar10(tmp.path());
  fs::remove(tmp.path() / "test_batch.bin");
  fs::create_directory(tmp.path() / "test_batch.bin");
  expect_error<DataError>([&] { load_cifar10(tmp.str()); }, {"test_batch.bin", "not a regular"});
}

}  // namespace
}  // namespace mixprec::data
