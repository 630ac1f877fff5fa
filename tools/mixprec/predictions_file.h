// The file `mixprec predict --output FILE` writes: the model's outputs, one row per sample
// (N, K) float32, as NumPy .npy (format 1.0, '<f4', C order: numpy.load reads it) or as .csv
// (K comma-separated values per line, each printed with 9 significant digits so that it reads back
// as the same float32). Written atomically: a temporary file beside FILE, fsync'ed, renamed over
// it, and the directory fsync'ed, so FILE is either the old file or the whole new one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace mixprec::cli {

enum class PredictionsFormat { npy, csv };

// The format of `path` by its extension (.npy or .csv, any case); a UsageError naming both for
// any other, so predict refuses before doing any work.
PredictionsFormat predictions_format(const std::filesystem::path& path);

// Writes `values` (rows x cols, row-major) to `path` in the format of its extension. IOError
// naming the file when it cannot be written; the previous file, if any, is then left as it was.
void write_predictions(const std::filesystem::path& path, const std::vector<float>& values,
                       std::int64_t rows, std::int64_t cols);

}  // namespace mixprec::cli
