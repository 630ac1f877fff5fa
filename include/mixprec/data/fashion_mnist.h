// Fashion-MNIST (Zalando's 28x28 grayscale clothing images, 10 classes; 60,000 training and 10,000
// test samples) from its four IDX files, as the seed programs use it: images float32 scaled to
// [0, 1] (x / 255) and flattened to (N, 784), labels int64 (N,).
//
// The Debian package dataset-fashion-mnist installs the files in /usr/share/datasets/fashion-mnist:
// train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
// t10k-labels-idx1-ubyte.gz. Uncompressed copies (the same names without .gz) are accepted too.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "mixprec/data/idx.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

struct FashionMnist {
  Tensor x_train;  // float32 (60000, 784), or (60000, 28, 28) with .flatten = false
  Tensor y_train;  // int64 (60000,), values 0..9
  Tensor x_test;   // float32 (10000, 784), or (10000, 28, 28)
  Tensor y_test;   // int64 (10000,)
};

struct FashionMnistOptions {
  bool flatten = true;  // (N, 784); false keeps Keras's (N, 28, 28)
};

inline constexpr int kFashionMnistClasses = 10;
inline constexpr std::int64_t kFashionMnistRows = 28;
inline constexpr std::int64_t kFashionMnistCols = 28;

// The class names in label order: "T-shirt/top", "Trouser", ..., "Ankle boot".
const std::array<std::string_view, kFashionMnistClasses>& fashion_mnist_class_names();

// $MIXPREC_FASHION_MNIST_DIR when set and not empty (the data unpacked somewhere else, e.g. on a
// machine where the package cannot be installed), else "/usr/share/datasets/fashion-mnist" (where
// the Debian package puts the files).
std::string default_fashion_mnist_dir();

// Loads the four files from `dir` (gzip or plain; each is looked up as NAME.gz, then NAME).
// Throws DataError when the directory or a file is missing (the message says how to install the
// data), when a file is not valid IDX (see read_idx), when images are not 28x28 ubyte, when the
// image and label counts differ, or when a label is outside [0, 9] (naming the first bad index
// and value). Every header is checked before any payload is read.
FashionMnist load_fashion_mnist(const std::string& dir = default_fashion_mnist_dir(),
                                FashionMnistOptions options = {});

}  // namespace mixprec::data

#pragma GCC visibility pop
