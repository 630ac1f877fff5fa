// CIFAR-10 and CIFAR-100 (Krizhevsky's 32x32 colour images) from their official binary files, as
// the Keras loaders return them but channels-last floats: x (N, 32, 32, 3) float32 in [0, 1]
// (pixel / 255), y (N,) int64.
//
//   auto cifar = mp::data::load_cifar10("/data/cifar-10-batches-bin");
//   cifar.x_train;   // (50000, 32, 32, 3) float32    cifar.y_train;   // (50000,) int64, 0..9
//   auto c100 = mp::data::load_cifar100("/data/cifar-100-binary", mp::data::Cifar100Label::coarse);
//
// The binary versions (cifar-10-binary.tar.gz, cifar-100-binary.tar.gz from
// https://www.cs.toronto.edu/~kriz/cifar.html) hold fixed-size records, one per image:
//   CIFAR-10:  1 label byte (0..9), then 3072 pixel bytes;
//              data_batch_1.bin .. data_batch_5.bin (10,000 records each), test_batch.bin.
//   CIFAR-100: 1 coarse label byte (0..19), 1 fine label byte (0..99), then 3072 pixel bytes;
//              train.bin (50,000 records), test.bin (10,000).
// The 3072 pixel bytes are three 32x32 planes, red then green then blue, each row-major; the
// loader interleaves them into NHWC: x[n, h, w, c] = plane_c[32 * h + w] / 255.
//
// `dir` is the extracted directory (cifar-10-batches-bin, cifar-100-binary) or the directory that
// contains it. Files are checked before anything is allocated (DESIGN §2.7): each must exist, be a
// regular file and hold a whole, non-zero number of records. Labels are checked as the records
// are read; a label out of range is a DataError naming the file, the record and the value. The
// Python ("-python") and MATLAB versions of the data sets are not read.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "mixprec/data/idx.h"  // DataError
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

inline constexpr std::int64_t kCifarSide = 32;
inline constexpr std::int64_t kCifarChannels = 3;
inline constexpr std::int64_t kCifarPixelBytes = kCifarSide * kCifarSide * kCifarChannels;  // 3072
inline constexpr int kCifar10Classes = 10;
inline constexpr int kCifar100FineClasses = 100;
inline constexpr int kCifar100CoarseClasses = 20;

struct Cifar {
  Tensor x_train;  // float32 (N_train, 32, 32, 3), values in [0, 1]
  Tensor y_train;  // int64 (N_train,)
  Tensor x_test;   // float32 (N_test, 32, 32, 3)
  Tensor y_test;   // int64 (N_test,)
};

// Which CIFAR-100 label becomes y: the 100 fine classes (Keras's default label_mode="fine") or
// the 20 superclasses.
enum class Cifar100Label { fine, coarse };

// The class names in label order ("airplane", "automobile", ..., "truck").
const std::array<std::string_view, kCifar10Classes>& cifar10_class_names();

// Reads data_batch_1.bin .. data_batch_5.bin (concatenated in that order) and test_batch.bin.
// Throws DataError for a missing directory or file (naming what is expected where), a file whose
// size is not a whole non-zero number of 3073-byte records, or a label outside [0, 9].
Cifar load_cifar10(const std::string& dir);

// Reads train.bin and test.bin. The same errors, with 3074-byte records and labels checked
// against [0, 19] (coarse) and [0, 99] (fine): both labels of every record are checked, whichever
// is returned, since either being out of range means the file is damaged.
Cifar load_cifar100(const std::string& dir, Cifar100Label label = Cifar100Label::fine);

}  // namespace mixprec::data

#pragma GCC visibility pop
