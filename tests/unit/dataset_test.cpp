// Dataset, take_rows and batching. Features carry their row number so that every batch can be
// checked against the order it claims; expected splits are Keras's floor(N * (1 - v)) worked out
// by hand (in Python doubles) in the comments.
#include "mixprec/data/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec::data {
namespace {

// (n, 2) float32 features with row i = [i, 1000 + i], and (n,) int64 targets 10 * i.
Dataset numbered(std::int64_t n) {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    x.push_back(static_cast<float>(i));
    x.push_back(static_cast<float>(1000 + i));
    y.push_back(10 * i);
  }
  return Dataset(from_vector(x, Shape{n, 2}), from_vector(y, Shape{n}));
}

// The row numbers a batch holds, checking that features and targets agree row by row.
std::vector<std::int64_t> rows_of(const Batch& b) {
  const auto x = b.x.to_vector<double>();
  const auto y = b.y.to_vector<std::int64_t>();
  EXPECT_EQ(b.x.rank(), 2);
  EXPECT_EQ(b.x.dim(0), b.y.dim(0));
  std::vector<std::int64_t> rows;
  for (std::size_t k = 0; k < y.size(); ++k) {
    const auto r = static_cast<std::int64_t>(x[2 * k]);
    EXPECT_EQ(x[2 * k + 1], 1000.0 + static_cast<double>(r));
    EXPECT_EQ(y[k], 10 * r) << "features and targets out of step";
    rows.push_back(r);
  }
  return rows;
}

std::vector<std::int64_t> range(std::int64_t start, std::int64_t stop) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(stop - start));
  std::iota(v.begin(), v.end(), start);
  return v;
}

// ---- take_rows ----

TEST(TakeRowsTest, GathersRowsOfEveryDtypeInOrder) {
  // (4, 2, 3) holding 0..23: row i is 6i .. 6i + 5.
  std::vector<float> values(24);
  std::iota(values.begin(), values.end(), 0.0f);
  for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32,
                      DType::int64, DType::uint8}) {
    const Tensor x = from_vector(values, Shape{4, 2, 3}, {.dtype = dtype});
    const Tensor got = take_rows(x, {3, 0, 3});
    EXPECT_EQ(got.dtype(), dtype);
    EXPECT_EQ(got.shape(), (Shape{3, 2, 3}));
    EXPECT_EQ(got.to_vector<double>(), (std::vector<double>{18, 19, 20, 21, 22, 23, 0, 1, 2, 3, 4,
                                                            5, 18, 19, 20, 21, 22, 23}))
        << dtype_name(dtype);
  }
  const Tensor flags =
      from_vector(std::vector<float>{1, 0, 0, 1}, Shape{4}, {.dtype = DType::bool_});
  EXPECT_EQ(take_rows(flags, {1, 3}).to_vector<int>(), (std::vector<int>{0, 1}));
}

TEST(TakeRowsTest, NonContiguousInputAndEmptySelection) {
  const Tensor x = from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, Shape{2, 3});
  const Tensor xt = x.transpose(0, 1);  // (3, 2): rows [0, 3], [1, 4], [2, 5]
  EXPECT_EQ(take_rows(xt, {2, 0}).to_vector<float>(), (std::vector<float>{2, 5, 0, 3}));
  EXPECT_EQ(take_rows(x, {}).shape(), (Shape{0, 3}));
}

TEST(TakeRowsTest, LargeGatherMatchesRowByRow) {
  // 4096 x 300 float32 = 4.9 MB gathered: the parallel path.
  const std::int64_t n = 4096, d = 300;
  const Tensor x = arange(0.0, static_cast<double>(n * d)).reshape(Shape{n, d});
  std::vector<std::int64_t> rows;
  for (std::int64_t k = 0; k < n; ++k) rows.push_back((k * 2654435761LL) % n);
  const Tensor got = take_rows(x, rows);
  const float* g = got.data<float>();
  std::int64_t wrong = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    for (std::int64_t j = 0; j < d; ++j) {
      wrong += g[k * d + j] != static_cast<float>(rows[static_cast<std::size_t>(k)] * d + j);
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(TakeRowsTest, RejectsOutOfRangeRowsAndScalars) {
  const Tensor x = zeros(Shape{5, 2});
  EXPECT_THROW(take_rows(x, {0, 5}), ValueError);
  EXPECT_THROW(take_rows(x, {-1}), ValueError);
  try {
    take_rows(x, {1, 7});
    ADD_FAILURE();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("row index 7 (at position 1) is outside [0, 5)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(take_rows(scalar(1.0), {0}), ShapeError);
  EXPECT_THROW(take_rows(Tensor(), {0}), ValueError);
}

// ---- Dataset ----

TEST(DatasetTest, RejectsMismatchedFirstDimensionNamingBothShapes) {
  try {
    Dataset(zeros(Shape{6, 3}), zeros(Shape{5}));
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("(6, 3)"), std::string::npos) << message;
    EXPECT_NE(message.find("(5,)"), std::string::npos) << message;
  }
  EXPECT_THROW(Dataset(scalar(1.0)), ShapeError);
}

TEST(DatasetTest, SizeTakeAndSlice) {
  const Dataset d = numbered(10);
  EXPECT_EQ(d.size(), 10);
  EXPECT_TRUE(d.has_targets());
  const Dataset picked = d.take({7, 2, 2});
  EXPECT_EQ(picked.size(), 3);
  EXPECT_EQ(rows_of({picked.features(), picked.targets()}), (std::vector<std::int64_t>{7, 2, 2}));
  const Dataset middle = d.slice(3, 6);
  EXPECT_EQ(rows_of({middle.features(), middle.targets()}), range(3, 6));
  EXPECT_EQ(d.slice(4, 4).size(), 0);
  EXPECT_THROW(d.slice(-1, 3), ValueError);
  EXPECT_THROW(d.slice(5, 4), ValueError);
  EXPECT_THROW(d.slice(0, 11), ValueError);
  EXPECT_THROW(d.take({10}), ValueError);
}

TEST(DatasetTest, ValidationSplitTakesTheLastFractionInStoredOrder) {
  const Dataset d = numbered(10);
  const ValidationSplit s = d.split_validation(0.2);  // floor(10 * 0.8) = 8
  EXPECT_EQ(rows_of({s.train.features(), s.train.targets()}), range(0, 8));
  EXPECT_EQ(rows_of({s.validation.features(), s.validation.targets()}), range(8, 10));
}

TEST(DatasetTest, ValidationSplitSizesFollowKerasRounding) {
  struct Case {
    std::int64_t n;
    double v;
    std::int64_t train;
  };
  // Python: math.floor(n * (1.0 - v)).
  for (const Case& c :
       {Case{10, 0.3, 7},  // 10 * 0.7000000000000001 = 7.000000000000001
        Case{10, 0.7, 3},  // 3.0000000000000004
        Case{7, 0.5, 3}, Case{3, 0.1, 2}, Case{1000, 0.001, 999}, Case{60000, 0.2, 48000}}) {
    const ValidationSplit s = numbered(c.n).split_validation(c.v);
    EXPECT_EQ(s.train.size(), c.train) << c.n << " " << c.v;
    EXPECT_EQ(s.validation.size(), c.n - c.train) << c.n << " " << c.v;
  }
}

TEST(DatasetTest, ValidationSplitRejectsBadFractionsAndTooFewSamples) {
  const Dataset d = numbered(10);
  EXPECT_THROW(d.split_validation(0.0), ValueError);
  EXPECT_THROW(d.split_validation(1.0), ValueError);
  EXPECT_THROW(d.split_validation(-0.1), ValueError);
  EXPECT_THROW(d.split_validation(std::nan("")), ValueError);
  // floor(10 * 0.09999999999999998) = 0 training samples: Keras refuses this too.
  EXPECT_THROW(d.split_validation(0.9), ValueError);
  EXPECT_THROW(numbered(1).split_validation(0.5), ValueError);
}

// ---- batching ----

TEST(BatchingTest, InOrderBatchesKeepTheLastPartialBatch) {
  const Dataset d = numbered(10);
  const Epoch epoch = d.batches(4);
  ASSERT_EQ(epoch.size(), 3);
  std::vector<std::vector<std::int64_t>> seen;
  for (const Batch& b : epoch) seen.push_back(rows_of(b));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], range(0, 4));
  EXPECT_EQ(seen[1], range(4, 8));
  EXPECT_EQ(seen[2], range(8, 10));

  const Epoch dropped = d.batches(4, LastBatch::drop);
  EXPECT_EQ(dropped.size(), 2);
  EXPECT_EQ(d.batches(10).size(), 1);
  EXPECT_EQ(d.batches(11).size(), 1);
  EXPECT_EQ(d.batches(11, LastBatch::drop).size(), 0);
  EXPECT_THROW(epoch.batch(3), ValueError);
}

TEST(BatchingTest, BatchSizeMustBePositive) {
  const Dataset d = numbered(4);
  EXPECT_THROW(d.batches(0), ValueError);
  EXPECT_THROW(d.batches(-2), ValueError);
  EXPECT_THROW(BatchLoader(d, {.batch_size = 0}), ValueError);
}

TEST(BatchingTest, ShuffledEpochsVisitEverySampleOnceAndMatchTheirOrder) {
  const std::int64_t n = 103;
  BatchLoader loader(numbered(n), {.batch_size = 10, .shuffle = Shuffle::yes, .seed = 123});
  EXPECT_EQ(loader.batches_per_epoch(), 11);
  std::vector<std::int64_t> previous;
  for (int e = 0; e < 3; ++e) {
    const Epoch epoch = loader.next_epoch();
    std::vector<std::int64_t> visited;
    std::int64_t batches = 0;
    for (const Batch& b : epoch) {
      const std::vector<std::int64_t> rows = rows_of(b);
      EXPECT_EQ(static_cast<std::int64_t>(rows.size()), batches < 10 ? 10 : 3);
      visited.insert(visited.end(), rows.begin(), rows.end());
      ++batches;
    }
    EXPECT_EQ(batches, 11);
    EXPECT_EQ(visited, epoch.order());  // batches follow the epoch's order
    std::vector<std::int64_t> sorted = visited;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, range(0, n));   // every sample exactly once
    EXPECT_NE(visited, range(0, n));  // shuffled (identity has probability 1/103!)
    EXPECT_NE(visited, previous);     // a fresh permutation each epoch
    previous = visited;
  }
}

TEST(BatchingTest, SameSeedSameOrderDifferentSeedDifferentOrder) {
  const Dataset d = numbered(50);
  BatchLoader a(d, {.batch_size = 8, .seed = 7});
  BatchLoader b(d, {.batch_size = 8, .seed = 7});
  BatchLoader c(d, {.batch_size = 8, .seed = 8});
  for (int e = 0; e < 2; ++e) {
    const Epoch ea = a.next_epoch();
    const Epoch eb = b.next_epoch();
    const Epoch ec = c.next_epoch();
    EXPECT_EQ(ea.order(), eb.order()) << "epoch " << e;
    EXPECT_NE(ea.order(), ec.order()) << "epoch " << e;
    EXPECT_EQ(rows_of(ea.batch(6)), rows_of(eb.batch(6)));
  }
  // Without a seed the order comes from the default generator, so set_seed makes it repeatable.
  set_seed(99);
  BatchLoader u(d, {.batch_size = 8});
  set_seed(99);
  BatchLoader v(d, {.batch_size = 8});
  EXPECT_EQ(u.next_epoch().order(), v.next_epoch().order());
}

TEST(BatchingTest, ShuffleIsUniformOverPermutations) {
  // 3 samples: 6 permutations, 6000 epochs -> 1000 each, standard deviation ~28.9; +-150 is
  // over 5 sigma. A biased shuffle (e.g. swapping with any position) misses it by ~200.
  BatchLoader loader(numbered(3), {.batch_size = 3, .seed = 2024});
  std::map<std::vector<std::int64_t>, int> counts;
  for (int e = 0; e < 6000; ++e) ++counts[loader.next_epoch().order()];
  EXPECT_EQ(counts.size(), 6u);
  for (const auto& [order, count] : counts) {
    EXPECT_GT(count, 850);
    EXPECT_LT(count, 1150);
  }
}

TEST(BatchingTest, NoShuffleLoaderAndDatasetsWithoutTargets) {
  BatchLoader loader(numbered(5), {.batch_size = 2, .shuffle = Shuffle::no});
  EXPECT_EQ(loader.next_epoch().order(), range(0, 5));
  EXPECT_EQ(loader.next_epoch().order(), range(0, 5));

  const Dataset x_only(arange(0.0, 5.0).reshape(Shape{5, 1}));
  EXPECT_FALSE(x_only.has_targets());
  const Epoch epoch = x_only.batches(2);
  const Batch last = epoch.batch(2);
  EXPECT_EQ(last.x.to_vector<float>(), (std::vector<float>{4}));
  EXPECT_FALSE(last.y.defined());
  BatchLoader shuffled(x_only, {.batch_size = 2, .seed = 1});
  EXPECT_EQ(shuffled.next_epoch().batch(0).x.dim(0), 2);
}

TEST(BatchingTest, EpochRejectsAnOrderThatIsNotAPermutation) {
  const Dataset d = numbered(4);
  EXPECT_THROW(Epoch(d, {0, 1, 2}, 2), ValueError);
  EXPECT_THROW(Epoch(d, {0, 1, 1, 3}, 2), ValueError);
  EXPECT_THROW(Epoch(d, {0, 1, 2, 4}, 2), ValueError);
  const Epoch custom(d, {3, 1, 0, 2}, 3);
  EXPECT_EQ(rows_of(custom.batch(0)), (std::vector<std::int64_t>{3, 1, 0}));
  EXPECT_EQ(rows_of(custom.batch(1)), (std::vector<std::int64_t>{2}));
}

}  // namespace
}  // namespace mixprec::data
