// Epoch (one pass in a fixed order, as batches) and BatchLoader (epochs with a seeded shuffle).
#include <algorithm>
#include <string>
#include <utility>

#include "mixprec/data/dataset.h"
#include "mixprec/error.h"

namespace mixprec::data {

namespace {

void check_batch_size(std::int64_t batch_size, const char* op) {
  if (batch_size <= 0) {
    throw ValueError(std::string(op) + ": batch_size must be positive, got " +
                     std::to_string(batch_size) + "; Keras's default is 32");
  }
}

std::int64_t count_batches(std::int64_t n, std::int64_t batch_size, LastBatch last_batch) {
  return last_batch == LastBatch::keep ? (n + batch_size - 1) / batch_size : n / batch_size;
}

}  // namespace

Epoch::Epoch(const Dataset& data, std::vector<std::int64_t> order, std::int64_t batch_size,
             LastBatch last_batch)
    : features_(data.features()), targets_(data.targets()), batch_size_(batch_size) {
  check_batch_size(batch_size, "Epoch");
  const std::int64_t n = data.size();
  if (static_cast<std::int64_t>(order.size()) != n) {
    throw ValueError("Epoch: the order has " + std::to_string(order.size()) +
                     " entries for a dataset of " + std::to_string(n) +
                     " samples; pass a permutation of 0..N-1");
  }
  // A permutation: every sample exactly once.
  std::vector<bool> seen(static_cast<std::size_t>(n), false);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = order[static_cast<std::size_t>(i)];
    if (r < 0 || r >= n || seen[static_cast<std::size_t>(r)]) {
      throw ValueError("Epoch: the order is not a permutation of 0.." + std::to_string(n - 1) +
                       ": entry " + std::to_string(i) + " is " + std::to_string(r) +
                       (r >= 0 && r < n ? " (a repeat)" : " (out of range)"));
    }
    seen[static_cast<std::size_t>(r)] = true;
    in_order_ = in_order_ && r == i;
  }
  order_ = std::make_shared<const std::vector<std::int64_t>>(std::move(order));
  num_batches_ = count_batches(n, batch_size, last_batch);
}

Batch Epoch::batch(std::int64_t i) const {
  if (i < 0 || i >= num_batches_) {
    throw ValueError("Epoch::batch: batch index " + std::to_string(i) + " is outside [0, " +
                     std::to_string(num_batches_) + ")");
  }
  const auto n = static_cast<std::int64_t>(order_->size());
  const std::int64_t start = i * batch_size_;
  const std::int64_t stop = std::min(start + batch_size_, n);
  Batch b;
  if (in_order_) {
    b.x = features_.slice(0, start, stop);
    if (targets_.defined()) b.y = targets_.slice(0, start, stop);
  } else {
    const std::vector<std::int64_t> rows(order_->begin() + start, order_->begin() + stop);
    b.x = take_rows(features_, rows);
    if (targets_.defined()) b.y = take_rows(targets_, rows);
  }
  return b;
}

BatchLoader::BatchLoader(Dataset data, BatchOptions options)
    : data_(std::move(data)),
      options_(options),
      generator_(options.seed ? *options.seed : default_generator().next_u64()) {
  check_batch_size(options.batch_size, "BatchLoader");
}

std::int64_t BatchLoader::batches_per_epoch() const {
  return count_batches(data_.size(), options_.batch_size, options_.last_batch);
}

Epoch BatchLoader::next_epoch() {
  const std::int64_t n = data_.size();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  if (options_.shuffle == Shuffle::yes) {
    // Fisher-Yates: every permutation equally likely given uniform below().
    for (std::int64_t i = n - 1; i > 0; --i) {
      const auto j = static_cast<std::int64_t>(generator_.below(static_cast<std::uint64_t>(i + 1)));
      std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
    }
  }
  return Epoch(data_, std::move(order), options_.batch_size, options_.last_batch);
}

}  // namespace mixprec::data
