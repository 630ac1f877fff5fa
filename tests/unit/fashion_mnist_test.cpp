// Fashion-MNIST loader: small synthetic datasets written here (gzip and plain) for the values and
// every rejection, then the real dataset from the Debian package, checked against an independent
// decode of its gzip files with zlib's gzread.
#include "mixprec/data/fashion_mnist.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/temp_dir.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

using testing::TempDir;

Bytes idx_ubyte(const std::vector<std::uint32_t>& dims, const Bytes& payload) {
  Bytes out = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int i = 3; i >= 0; --i) out.push_back(static_cast<unsigned char>(d >> (8 * i)));
  }
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

void write_plain(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_gzip(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

enum class Compression { plain, gzip };

// A synthetic Fashion-MNIST: pixel j of image i is (i * 31 + j * 7) % 256, label i is i % 10.
struct Synthetic {
  std::uint32_t n_train = 23, n_test = 11;
  std::uint32_t rows = 28, cols = 28;
  std::uint32_t train_labels = 23;  // label count, to make a mismatch
  int bad_label_index = -1;         // where to put a label of 10

  static unsigned char pixel(std::uint32_t i, std::uint32_t j) {
    return static_cast<unsigned char>((i * 31 + j * 7) % 256);
  }
  Bytes images(std::uint32_t n) const {
    Bytes payload;
    for (std::uint32_t i = 0; i < n; ++i) {
      for (std::uint32_t j = 0; j < rows * cols; ++j) payload.push_back(pixel(i, j));
    }
    return idx_ubyte({n, rows, cols}, payload);
  }
  Bytes labels(std::uint32_t n, int bad_index) const {
    Bytes payload;
    for (std::uint32_t i = 0; i < n; ++i) payload.push_back(static_cast<unsigned char>(i % 10));
    if (bad_index >= 0) payload[static_cast<std::size_t>(bad_index)] = 10;
    return idx_ubyte({n}, payload);
  }
  void write(const TempDir& dir, Compression c) const {
    const std::string ext = c == Compression::gzip ? ".gz" : "";
    auto put = [&](const std::string& name, const Bytes& bytes) {
      if (c == Compression::gzip) {
        write_gzip(dir.file(name + ext), bytes);
      } else {
        write_plain(dir.file(name), bytes);
      }
    };
    put("train-images-idx3-ubyte", images(n_train));
    put("train-labels-idx1-ubyte", labels(train_labels, bad_label_index));
    put("t10k-images-idx3-ubyte", images(n_test));
    put("t10k-labels-idx1-ubyte", labels(n_test, -1));
  }
};

std::string load_error(const std::string& dir) {
  try {
    load_fashion_mnist(dir);
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "load_fashion_mnist(" << dir << ") did not throw DataError";
  return "";
}

void expect_images(const Tensor& x, std::uint32_t n) {
  ASSERT_EQ(x.dtype(), DType::float32);
  ASSERT_EQ(x.numel(), static_cast<std::int64_t>(n) * 784);
  const float* v = x.data<float>();
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t j = 0; j < 784; ++j) {
      const float expected = static_cast<float>(Synthetic::pixel(i, j)) / 255.0f;
      ASSERT_EQ(v[i * 784 + j], expected) << "image " << i << " pixel " << j;
    }
  }
}

void expect_labels(const Tensor& y, std::uint32_t n) {
  ASSERT_EQ(y.dtype(), DType::int64);
  ASSERT_EQ(y.shape(), (Shape{n}));
  const auto values = y.to_vector<std::int64_t>();
  for (std::uint32_t i = 0; i < n; ++i) EXPECT_EQ(values[i], i % 10) << i;
}

TEST(FashionMnistTest, LoadsGzipFilesScaledAndFlattened) {
  TempDir dir;
  Synthetic s;
  s.write(dir, Compression::gzip);
  const FashionMnist data = load_fashion_mnist(dir.str());
  EXPECT_EQ(data.x_train.shape(), (Shape{23, 784}));
  EXPECT_EQ(data.x_test.shape(), (Shape{11, 784}));
  expect_images(data.x_train, 23);
  expect_images(data.x_test, 11);
  expect_labels(data.y_train, 23);
  expect_labels(data.y_test, 11);
}

TEST(FashionMnistTest, LoadsUncompressedFilesUnflattened) {
  TempDir dir;
  Synthetic s;
  s.write(dir, Compression::plain);
  const FashionMnist data = load_fashion_mnist(dir.str(), {.flatten = false});
  EXPECT_EQ(data.x_train.shape(), (Shape{23, 28, 28}));
  EXPECT_EQ(data.x_test.shape(), (Shape{11, 28, 28}));
  expect_images(data.x_train, 23);
  expect_labels(data.y_test, 11);
}

TEST(FashionMnistTest, MissingDirectorySaysHowToInstall) {
  TempDir dir;
  const std::string missing = dir.file("no-such-dir");
  const std::string message = load_error(missing);
  EXPECT_NE(message.find("Fashion-MNIST not found in " + missing), std::string::npos) << message;
  EXPECT_NE(message.find("sudo apt-get install dataset-fashion-mnist"), std::string::npos)
      << message;
  EXPECT_NE(message.find("fashion_mnist:DIR"), std::string::npos) << message;
}

TEST(FashionMnistTest, MissingFileNamesItAndSaysHowToInstall) {
  TempDir dir;
  Synthetic s;
  s.write(dir, Compression::gzip);
  fs::remove(dir.file("t10k-labels-idx1-ubyte.gz"));
  const std::string message = load_error(dir.str());
  EXPECT_NE(message.find("t10k-labels-idx1-ubyte"), std::string::npos) << message;
  EXPECT_NE(message.find("apt-get install dataset-fashion-mnist"), std::string::npos) << message;
}

TEST(FashionMnistTest, RejectsImageLabelCountMismatch) {
  TempDir dir;
  Synthetic s;
  s.train_labels = 22;
  s.write(dir, Compression::gzip);
  const std::string message = load_error(dir.str());
  EXPECT_NE(message.find("count mismatch"), std::string::npos) << message;
  EXPECT_NE(message.find("23 images"), std::string::npos) << message;
  EXPECT_NE(message.find("22 labels"), std::string::npos) << message;
}

TEST(FashionMnistTest, RejectsImagesThatAreNot28By28) {
  TempDir dir;
  Synthetic s;
  s.rows = 32;
  s.cols = 32;
  s.write(dir, Compression::plain);
  const std::string message = load_error(dir.str());
  EXPECT_NE(message.find("expected 28x28"), std::string::npos) << message;
  EXPECT_NE(message.find("23x32x32"), std::string::npos) << message;
}

TEST(FashionMnistTest, RejectsLabelOutOfRangeNamingIndexAndValue) {
  TempDir dir;
  Synthetic s;
  s.bad_label_index = 17;
  s.write(dir, Compression::gzip);
  const std::string message = load_error(dir.str());
  EXPECT_NE(message.find("train-labels-idx1-ubyte.gz"), std::string::npos) << message;
  EXPECT_NE(message.find("label 10 at index 17"), std::string::npos) << message;
  EXPECT_NE(message.find("[0, 9]"), std::string::npos) << message;
}

TEST(FashionMnistTest, CorruptFileIsReportedWithItsPath) {
  TempDir dir;
  Synthetic s;
  s.write(dir, Compression::plain);
  write_plain(dir.file("t10k-images-idx3-ubyte"), Bytes{0, 0, 8, 3, 0, 0});  // cut-off header
  const std::string message = load_error(dir.str());
  EXPECT_NE(message.find(dir.file("t10k-images-idx3-ubyte") + ": truncated"), std::string::npos)
      << message;
}

TEST(FashionMnistTest, ClassNames) {
  const auto& names = fashion_mnist_class_names();
  EXPECT_EQ(names[0], "T-shirt/top");
  EXPECT_EQ(names[9], "Ankle boot");
}

// ---- the real dataset (Debian package dataset-fashion-mnist, installed by install-deps.sh) ----

// The raw bytes of a gzip file, decoded with zlib's gzread: the oracle.
Bytes gunzip(const std::string& path) {
  Bytes out;
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return out;
  unsigned char buffer[1 << 16];
  int got;
  while ((got = gzread(f, buffer, sizeof buffer)) > 0) out.insert(out.end(), buffer, buffer + got);
  gzclose(f);
  return out;
}

TEST(FashionMnistTest, DefaultDirectoryFollowsTheEnvironment) {
  const char* saved = std::getenv("MIXPREC_FASHION_MNIST_DIR");
  const std::string previous = saved != nullptr ? saved : "";
  ::setenv("MIXPREC_FASHION_MNIST_DIR", "/opt/data/fmnist", 1);
  EXPECT_EQ(default_fashion_mnist_dir(), "/opt/data/fmnist");
  ::setenv("MIXPREC_FASHION_MNIST_DIR", "", 1);
  EXPECT_EQ(default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
  ::unsetenv("MIXPREC_FASHION_MNIST_DIR");
  EXPECT_EQ(default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
  if (saved != nullptr) ::setenv("MIXPREC_FASHION_MNIST_DIR", previous.c_str(), 1);
}

TEST(FashionMnistTest, RealDatasetMatchesAnIndependentDecode) {
  const std::string dir = default_fashion_mnist_dir();
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << dir
                 << " (scripts/install-deps.sh installs dataset-fashion-mnist)";
  }
  const auto start = std::chrono::steady_clock::now();
  const FashionMnist data = load_fashion_mnist();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("load_fashion_mnist: %.3f s\n", seconds);

  EXPECT_EQ(data.x_train.shape(), (Shape{60000, 784}));
  EXPECT_EQ(data.y_train.shape(), (Shape{60000}));
  EXPECT_EQ(data.x_test.shape(), (Shape{10000, 784}));
  EXPECT_EQ(data.y_test.shape(), (Shape{10000}));
  ASSERT_EQ(data.x_train.dtype(), DType::float32);
  ASSERT_EQ(data.y_train.dtype(), DType::int64);

  struct Part {
    const char* images;
    const char* labels;
    const Tensor& x;
    const Tensor& y;
    std::int64_t per_class;
  };
  const std::array<Part, 2> parts = {
      Part{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", data.x_train, data.y_train,
           6000},
      Part{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", data.x_test, data.y_test,
           1000}};
  for (const Part& p : parts) {
    const Bytes images = gunzip(dir + "/" + p.images);
    const Bytes labels = gunzip(dir + "/" + p.labels);
    ASSERT_EQ(images.size(), 16 + static_cast<std::size_t>(p.x.numel())) << p.images;
    ASSERT_EQ(labels.size(), 8 + static_cast<std::size_t>(p.y.numel())) << p.labels;
    const float* x = p.x.data<float>();
    std::int64_t mismatches = 0;
    float lo = 1.0f, hi = 0.0f;
    for (std::int64_t i = 0; i < p.x.numel(); ++i) {
      mismatches += x[i] != static_cast<float>(images[16 + static_cast<std::size_t>(i)]) / 255.0f;
      lo = std::min(lo, x[i]);
      hi = std::max(hi, x[i]);
    }
    EXPECT_EQ(mismatches, 0) << p.images;
    EXPECT_EQ(lo, 0.0f) << p.images;  // background pixels
    EXPECT_EQ(hi, 1.0f) << p.images;  // saturated pixels

    std::array<std::int64_t, 10> histogram{};
    const std::int64_t* y = p.y.data<std::int64_t>();
    for (std::int64_t i = 0; i < p.y.numel(); ++i) {
      ASSERT_EQ(y[i], labels[8 + static_cast<std::size_t>(i)]) << p.labels << " index " << i;
      ++histogram[static_cast<std::size_t>(y[i])];
    }
    for (int c = 0; c < 10; ++c) EXPECT_EQ(histogram[c], p.per_class) << p.labels << " class " << c;
  }
}

}  // namespace
}  // namespace mixprec::data
