// Dataset and take_rows: row gathers are one memcpy per row (rows are contiguous), in parallel
// for large gathers.
#include "mixprec/data/dataset.h"

#include <cmath>
#include <cstring>
#include <string>

#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::data {

namespace {

// Below this many bytes a gather is one thread's memcpy: starting threads would cost more.
constexpr std::size_t kParallelGatherBytes = std::size_t{1} << 20;

void check_rows_tensor(const Tensor& t, const char* op, const char* what) {
  if (!t.defined()) {
    throw ValueError(std::string(op) + ": " + what + " is an undefined tensor; pass a tensor of " +
                     "shape (N, ...) with one row per sample");
  }
  if (t.rank() < 1) {
    throw ShapeError(std::string(op) + ": " + what + " must have rank >= 1 (one row per sample), " +
                     "got a scalar of shape " + t.shape().to_string() + "; reshape it to (1,)");
  }
  if (!t.device().is_cpu()) {
    throw DeviceError(std::string(op) + ": " + what + " is on " + t.device().to_string() +
                      ", datasets live on the CPU; move it with .to(Device::cpu())");
  }
}

}  // namespace

Tensor take_rows(const Tensor& x, const std::vector<std::int64_t>& rows) {
  check_rows_tensor(x, "take_rows", "x");
  const std::int64_t n = x.dim(0);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] < 0 || rows[k] >= n) {
      throw ValueError("take_rows: row index " + std::to_string(rows[k]) + " (at position " +
                       std::to_string(k) + ") is outside [0, " + std::to_string(n) +
                       ") for a tensor of shape " + x.shape().to_string() +
                       "; indices count from 0 and must be below the first dimension");
    }
  }
  const Tensor src = x.detach().contiguous();
  std::vector<std::int64_t> dims = x.shape().dims();
  dims[0] = static_cast<std::int64_t>(rows.size());
  std::size_t row_bytes = dtype_size(x.dtype());
  for (std::size_t d = 1; d < dims.size(); ++d) row_bytes *= static_cast<std::size_t>(dims[d]);

  Tensor out = core::make_tensor(Shape(dims), x.dtype(), Device::cpu());
  const auto* in = static_cast<const unsigned char*>(src.data_ptr());
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  const auto count = static_cast<std::int64_t>(rows.size());
  const bool parallel = row_bytes * rows.size() >= kParallelGatherBytes;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t k = 0; k < count; ++k) {
    std::memcpy(dst + static_cast<std::size_t>(k) * row_bytes,
                in + static_cast<std::size_t>(rows[static_cast<std::size_t>(k)]) * row_bytes,
                row_bytes);
  }
  return out;
}

Dataset::Dataset(const Tensor& features, const Tensor& targets) {
  check_rows_tensor(features, "Dataset", "features");
  if (targets.defined()) {
    check_rows_tensor(targets, "Dataset", "targets");
    if (targets.dim(0) != features.dim(0)) {
      throw ShapeError(
          "Dataset: features and targets must have the same number of samples (first "
          "dimension), got features " +
          features.shape().to_string() + " and targets " + targets.shape().to_string() +
          "; pass one target row per feature row");
    }
    targets_ = targets.detach().contiguous();
  }
  features_ = features.detach().contiguous();
}

Dataset Dataset::take(const std::vector<std::int64_t>& rows) const {
  if (!features_.defined()) {
    throw ValueError(
        "Dataset::take: the dataset is empty (default-constructed); construct it "
        "from features and targets first");
  }
  return Dataset(take_rows(features_, rows), has_targets() ? take_rows(targets_, rows) : Tensor());
}

Dataset Dataset::slice(std::int64_t start, std::int64_t stop) const {
  if (!features_.defined()) {
    throw ValueError(
        "Dataset::slice: the dataset is empty (default-constructed); construct it "
        "from features and targets first");
  }
  if (start < 0 || start > stop || stop > size()) {
    throw ValueError("Dataset::slice: expected 0 <= start <= stop <= " + std::to_string(size()) +
                     " (the dataset size), got start " + std::to_string(start) + " and stop " +
                     std::to_string(stop));
  }
  // Row ranges of contiguous tensors are contiguous: views, no copy.
  return Dataset(features_.slice(0, start, stop),
                 has_targets() ? targets_.slice(0, start, stop) : Tensor());
}

ValidationSplit Dataset::split_validation(double validation_split) const {
  if (!(validation_split > 0.0 && validation_split < 1.0)) {
    throw ValueError("split_validation: validation_split must be in (0, 1), got " +
                     std::to_string(validation_split) +
                     "; e.g. 0.2 keeps the last 20% of the samples for validation");
  }
  const std::int64_t n = size();
  // Keras: split_at = int(floor(batch_dim * (1.0 - validation_split))), in double precision.
  const auto split_at =
      static_cast<std::int64_t>(std::floor(static_cast<double>(n) * (1.0 - validation_split)));
  if (split_at <= 0 || split_at >= n) {
    throw ValueError("split_validation: " + std::to_string(n) +
                     " samples are not enough to split with validation_split=" +
                     std::to_string(validation_split) + " (training would get " +
                     std::to_string(split_at) + ", validation " + std::to_string(n - split_at) +
                     "); provide more data or a different validation_split");
  }
  return {slice(0, split_at), slice(split_at, n)};
}

Epoch Dataset::batches(std::int64_t batch_size, LastBatch last_batch) const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(size()));
  for (std::int64_t i = 0; i < size(); ++i) order[static_cast<std::size_t>(i)] = i;
  return Epoch(*this, std::move(order), batch_size, last_batch);
}

}  // namespace mixprec::data
