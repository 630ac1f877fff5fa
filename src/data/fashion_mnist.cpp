// Fashion-MNIST loader: find the four files, validate all four headers against each other, then
// read and convert. Images become float32 x / 255 through a 256-entry table (the same values as
// dividing each pixel, without a division per pixel).
#include "mixprec/data/fashion_mnist.h"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/tensor_impl.h"

namespace mixprec::data {

namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kParallelElements = std::int64_t{1} << 16;

std::string install_hint() {
  return "install it with `sudo apt-get install dataset-fashion-mnist` or pass the directory that "
         "holds its four IDX files (fashion_mnist:DIR on the command line)";
}

// NAME.gz, else NAME; otherwise a DataError that says how to get the data.
std::string find_file(const std::string& dir, const std::string& name) {
  for (const char* suffix : {".gz", ""}) {
    const fs::path candidate = fs::path(dir) / (name + suffix);
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  throw DataError("Fashion-MNIST file " + name + ".gz (or " + name + ") not found in " + dir +
                  ": " + install_hint());
}

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string out;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += 'x';
    out += std::to_string(dims[i]);
  }
  return out;
}

void check_images(const std::string& path, const IdxInfo& info) {
  if (info.type != IdxType::ubyte || info.dims.size() != 3 || info.dims[1] != kFashionMnistRows ||
      info.dims[2] != kFashionMnistCols) {
    throw DataError(path + ": expected 28x28 ubyte images (N x 28 x 28 ubyte), got " +
                    dims_text(info.dims) + " " + idx_type_name(info.type) +
                    "; is this Fashion-MNIST (or MNIST)?");
  }
}

void check_labels(const std::string& path, const IdxInfo& info) {
  if (info.type != IdxType::ubyte || info.dims.size() != 1) {
    throw DataError(path + ": expected ubyte labels of shape (N), got " + dims_text(info.dims) +
                    " " + idx_type_name(info.type) + "; is this a Fashion-MNIST label file?");
  }
}

void check_counts(const std::string& images_path, const IdxInfo& images,
                  const std::string& labels_path, const IdxInfo& labels) {
  if (images.dims[0] != labels.dims[0]) {
    throw DataError("Fashion-MNIST image/label count mismatch: " + images_path + " has " +
                    std::to_string(images.dims[0]) + " images but " + labels_path + " has " +
                    std::to_string(labels.dims[0]) +
                    " labels; the files come from different datasets or one is damaged");
  }
}

// uint8 (N, 28, 28) -> float32 (N, 784) or (N, 28, 28), x / 255.
Tensor images_to_float(const Tensor& raw, FashionMnistOptions options) {
  const std::int64_t n = raw.dim(0);
  const Shape shape = options.flatten ? Shape{n, kFashionMnistRows * kFashionMnistCols}
                                      : Shape{n, kFashionMnistRows, kFashionMnistCols};
  Tensor out = core::make_tensor(shape, DType::float32, Device::cpu());
  std::array<float, 256> table;
  for (int v = 0; v < 256; ++v) table[static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
  const std::uint8_t* in = raw.data<std::uint8_t>();
  float* dst = out.data<float>();
  const std::int64_t count = raw.numel();
#pragma omp parallel for schedule(static) if (count >= kParallelElements)
  for (std::int64_t i = 0; i < count; ++i) dst[i] = table[in[i]];
  return out;
}

// uint8 (N,) -> int64 (N,), rejecting labels outside [0, 9].
Tensor labels_to_int64(const std::string& path, const Tensor& raw) {
  const std::int64_t n = raw.numel();
  const std::uint8_t* in = raw.data<std::uint8_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    if (in[i] >= kFashionMnistClasses) {
      throw DataError(path + ": label " + std::to_string(in[i]) + " at index " + std::to_string(i) +
                      " is outside [0, 9]; the file is corrupt or not a "
                      "Fashion-MNIST label file");
    }
  }
  Tensor out = core::make_tensor(Shape{n}, DType::int64, Device::cpu());
  std::int64_t* dst = out.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) dst[i] = in[i];
  return out;
}

// read_idx, and a check that the file still has the shape its header had when it was validated
// (a file replaced in between must not reach the converters with another shape).
Tensor read_as_checked(const std::string& path, const IdxInfo& info) {
  Tensor raw = read_idx(path);
  if (raw.dtype() != DType::uint8 || raw.shape().dims() != info.dims) {
    throw DataError(path + ": the file changed while loading (its header said " +
                    dims_text(info.dims) + "); load it again");
  }
  return raw;
}

}  // namespace

const std::array<std::string_view, kFashionMnistClasses>& fashion_mnist_class_names() {
  static constexpr std::array<std::string_view, kFashionMnistClasses> names = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

std::string default_fashion_mnist_dir() {
  const char* dir = std::getenv("MIXPREC_FASHION_MNIST_DIR");
  return dir != nullptr && *dir != '\0' ? dir : "/usr/share/datasets/fashion-mnist";
}

FashionMnist load_fashion_mnist(const std::string& dir, FashionMnistOptions options) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw DataError("Fashion-MNIST not found in " + dir + ": " + install_hint());
  }
  const std::string train_images = find_file(dir, "train-images-idx3-ubyte");
  const std::string train_labels = find_file(dir, "train-labels-idx1-ubyte");
  const std::string test_images = find_file(dir, "t10k-images-idx3-ubyte");
  const std::string test_labels = find_file(dir, "t10k-labels-idx1-ubyte");

  // Headers first: a mismatch is reported before 47 MB are decompressed.
  const IdxInfo train_images_info = read_idx_info(train_images);
  const IdxInfo train_labels_info = read_idx_info(train_labels);
  const IdxInfo test_images_info = read_idx_info(test_images);
  const IdxInfo test_labels_info = read_idx_info(test_labels);
  check_images(train_images, train_images_info);
  check_images(test_images, test_images_info);
  check_labels(train_labels, train_labels_info);
  check_labels(test_labels, test_labels_info);
  check_counts(train_images, train_images_info, train_labels, train_labels_info);
  check_counts(test_images, test_images_info, test_labels, test_labels_info);

  // Labels before images: a bad label is found without decompressing the images.
  FashionMnist data;
  data.y_train = labels_to_int64(train_labels, read_as_checked(train_labels, train_labels_info));
  data.y_test = labels_to_int64(test_labels, read_as_checked(test_labels, test_labels_info));
  data.x_train = images_to_float(read_as_checked(train_images, train_images_info), options);
  data.x_test = images_to_float(read_as_checked(test_images, test_images_info), options);
  return data;
}

}  // namespace mixprec::data
