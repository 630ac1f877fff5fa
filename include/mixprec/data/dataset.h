// In-memory datasets for fit/evaluate/predict: features and targets with one row per sample,
// Keras's validation_split, and batching with an optional seeded shuffle per epoch.
//
//   mp::data::Dataset all(x_train, y_train);                 // (N, 784) float32, (N,) int64
//   auto [train, val] = all.split_validation(0.2);           // the last 20% validate, unshuffled
//   mp::data::BatchLoader loader(train, {.batch_size = 128, .shuffle = mp::data::Shuffle::yes,
//                                        .seed = 42});
//   for (int epoch = 0; epoch < 5; ++epoch)
//     for (const mp::data::Batch& b : loader.next_epoch()) step(b.x, b.y);   // (<=128, 784),
//     (<=128,)
#pragma once

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "mixprec/random.h"
#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

// Rows `rows` of x along axis 0 (any dtype, any rank >= 1), copied in that order into a new
// contiguous CPU tensor of shape (rows.size(), x.shape[1:]...). Rows may repeat. An index outside
// [0, x.dim(0)) is a ValueError; a rank-0 x a ShapeError; a non-CPU x a DeviceError.
Tensor take_rows(const Tensor& x, const std::vector<std::int64_t>& rows);

enum class Shuffle { no, yes };
// Keras keeps the last, smaller batch when the batch size does not divide the sample count.
enum class LastBatch { keep, drop };

struct Batch {
  Tensor x;  // (b, ...) features, b <= batch size
  Tensor y;  // (b, ...) targets; undefined when the dataset has no targets
};

class Dataset;

// One pass over a dataset in a fixed order, as batches. Iterating yields Batch values; when the
// order is the identity a batch is a view sharing the dataset's storage, otherwise its rows are
// gathered (copied) in order.
class Epoch {
 public:
  // `order` must be a permutation of 0..data.size()-1 (a ValueError otherwise); batch_size > 0.
  Epoch(const Dataset& data, std::vector<std::int64_t> order, std::int64_t batch_size,
        LastBatch last_batch = LastBatch::keep);

  std::int64_t size() const { return num_batches_; }  // number of batches
  std::int64_t batch_size() const { return batch_size_; }
  // The sample order of this pass (a permutation of 0..N-1; the identity when not shuffled).
  const std::vector<std::int64_t>& order() const { return *order_; }
  // Batch i in [0, size()); out of range is a ValueError.
  Batch batch(std::int64_t i) const;

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    Iterator(const Epoch* epoch, std::int64_t index) : epoch_(epoch), index_(index) {}
    Batch operator*() const { return epoch_->batch(index_); }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    void operator++(int) { ++index_; }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    const Epoch* epoch_ = nullptr;
    std::int64_t index_ = 0;
  };
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, num_batches_}; }

 private:
  Tensor features_;
  Tensor targets_;
  std::shared_ptr<const std::vector<std::int64_t>> order_;
  std::int64_t batch_size_ = 1;
  std::int64_t num_batches_ = 0;
  bool in_order_ = true;  // order is the identity: batches are views
};

struct ValidationSplit;

class Dataset {
 public:
  Dataset() = default;
  // Features (N, ...) and targets (N, ...) of any dtypes, CPU tensors with the same first
  // dimension (a ShapeError naming both shapes otherwise). Targets may be left undefined (for
  // predict). The tensors are stored detached and contiguous (no copy when already contiguous).
  explicit Dataset(const Tensor& features, const Tensor& targets = Tensor());

  std::int64_t size() const { return features_.defined() ? features_.dim(0) : 0; }
  bool has_targets() const { return targets_.defined(); }
  const Tensor& features() const { return features_; }
  const Tensor& targets() const { return targets_; }

  // The samples `rows`, in that order (copied). Out-of-range rows are a ValueError.
  Dataset take(const std::vector<std::int64_t>& rows) const;
  // Samples [start, stop) as views of this dataset's storage; requires 0 <= start <= stop <=
  // size().
  Dataset slice(std::int64_t start, std::int64_t stop) const;
  // Keras's validation_split: the LAST fraction of the samples (in stored order, before any
  // shuffling) becomes validation: train = [0, split_at), validation = [split_at, N) with
  // split_at = floor(N * (1 - validation_split)), as Keras computes it. validation_split must be
  // in (0, 1) and leave both parts non-empty (a ValueError otherwise).
  ValidationSplit split_validation(double validation_split) const;
  // One in-order pass in batches of batch_size (> 0, a ValueError otherwise).
  Epoch batches(std::int64_t batch_size, LastBatch last_batch = LastBatch::keep) const;

 private:
  Tensor features_;
  Tensor targets_;
};

struct ValidationSplit {
  Dataset train;
  Dataset validation;
};

struct BatchOptions {
  std::int64_t batch_size = 32;  // Keras's default
  Shuffle shuffle = Shuffle::yes;
  // Seed of the per-epoch permutations; the same seed gives the same order every run. Without
  // one, the seed is drawn from mixprec::default_generator() (so mixprec::set_seed applies).
  std::optional<std::uint64_t> seed = std::nullopt;
  LastBatch last_batch = LastBatch::keep;
};

// Batches a dataset epoch after epoch; with Shuffle::yes each epoch draws a fresh permutation of
// all samples (Fisher-Yates with a mixprec::Generator), so epoch k's order depends only on the
// seed and k.
class BatchLoader {
 public:
  // batch_size <= 0 is a ValueError.
  explicit BatchLoader(Dataset data, BatchOptions options = {});

  Epoch next_epoch();
  std::int64_t batches_per_epoch() const;
  const Dataset& dataset() const { return data_; }
  const BatchOptions& options() const { return options_; }
  // The shuffling generator's state: restoring the state taken before an epoch's next_epoch()
  // gives that epoch's order again (checkpoints resume inside an epoch with it).
  GeneratorState generator_state() const { return generator_.state(); }
  void set_generator_state(const GeneratorState& state) { generator_.set_state(state); }

 private:
  Dataset data_;
  BatchOptions options_;
  Generator generator_;
};

}  // namespace mixprec::data

#pragma GCC visibility pop
