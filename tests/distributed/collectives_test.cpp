// The collectives on CPU tensors with rank-dependent values: exact expected results on every rank
// for any world size (1 without a launcher; 2 under `mpirun -np 2`, tests/CMakeLists.txt). Values
// are small integers (exact in float16 and bfloat16) and int64 values above 2^53 (not reduced
// through a double).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "mixprec/creation.h"
#include "mixprec/distributed/distributed.h"

namespace mixprec::distributed {
namespace {

constexpr int kCount = 37;

// Element i of rank r: a small integer that differs between ranks.
double value_of(int i, int r) { return (i % 7) - 3 + 2 * r; }

double expected(int i, ReduceOp op) {
  const int n = world_size();
  double sum = 0, low = value_of(i, 0), high = value_of(i, 0);
  for (int r = 0; r < n; ++r) {
    sum += value_of(i, r);
    low = std::min(low, value_of(i, r));
    high = std::max(high, value_of(i, r));
  }
  return op == ReduceOp::sum ? sum : op == ReduceOp::max ? high : low;
}

// This rank's values, plus `offset`, in `dtype`.
Tensor rank_values(DType dtype, double offset = 0) {
  std::vector<double> values(kCount);
  for (int i = 0; i < kCount; ++i) values[i] = value_of(i, rank()) + offset;
  return from_vector(values, {kCount}).to(dtype);
}

const char* op_name(ReduceOp op) {
  return op == ReduceOp::sum ? "sum" : op == ReduceOp::max ? "max" : "min";
}

class AllReduce : public testing::TestWithParam<DType> {};

TEST_P(AllReduce, SumMaxMinAreExactOnEveryRank) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    Tensor t = rank_values(GetParam());
    all_reduce(t, op);
    EXPECT_EQ(t.dtype(), GetParam());
    const std::vector<double> got = t.to_vector<double>();
    for (int i = 0; i < kCount; ++i) {
      ASSERT_EQ(got[i], expected(i, op))
          << op_name(op) << " element " << i << " on rank " << rank();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AllReduce,
                         testing::Values(DType::float32, DType::float16, DType::bfloat16,
                                         DType::float64, DType::int32, DType::int64),
                         [](const testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(Collectives, Int64BeyondDoublePrecision) {
  const std::int64_t base = (std::int64_t{1} << 60) + 1;  // not a double
  Tensor t = from_vector(std::vector<std::int64_t>{base + rank(), -base - rank()}, {2});
  all_reduce(t, ReduceOp::max);
  EXPECT_EQ(t.to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{base + world_size() - 1, -base}));
}

TEST(Collectives, BroadcastFromEachRoot) {
  for (int root = 0; root < std::min(world_size(), 2); ++root) {
    for (DType dtype : {DType::float32, DType::bfloat16, DType::int64, DType::uint8}) {
      Tensor t = rank_values(dtype, 3.0 + 10.0 * rank());  // non-negative: fits uint8
      broadcast(t, root);
      const std::vector<double> got = t.to_vector<double>();
      for (int i = 0; i < kCount; ++i) {
        ASSERT_EQ(got[i], value_of(i, root) + 3.0 + 10.0 * root)
            << "root " << root << " " << dtype_name(dtype) << " element " << i;
      }
    }
  }
}

TEST(Collectives, EmptyTensor) {
  Tensor t = zeros({0});
  EXPECT_NO_THROW(all_reduce(t));
  EXPECT_NO_THROW(broadcast(t, 0));
}

TEST(Collectives, ScalarAllReduce) {
  const int n = world_size();
  EXPECT_EQ(all_reduce(static_cast<double>(rank() + 1), ReduceOp::sum), n * (n + 1) / 2.0);
  EXPECT_EQ(all_reduce(static_cast<double>(rank()), ReduceOp::max), n - 1.0);
  EXPECT_EQ(all_reduce(0.5 + rank(), ReduceOp::min), 0.5);
}

TEST(Collectives, RanksAreDistinctAndLocalRanksInRange) {
  const int n = world_size();
  // Each rank sets its own slot: the sum shows every rank exactly once.
  std::vector<std::int64_t> seen(n, 0);
  seen[rank()] = 1;
  Tensor t = from_vector(seen, {n});
  all_reduce(t);
  EXPECT_EQ(t.to_vector<std::int64_t>(), std::vector<std::int64_t>(n, 1));
  // One machine here: the local ranks are the ranks.
  EXPECT_EQ(all_reduce(static_cast<double>(local_rank()), ReduceOp::max), n - 1.0);
  barrier();
}

// D2 may overlap the gradient all-reduce with the backward pass on a communication thread: the
// collectives work from a thread other than the one that initialised MPI.
TEST(Collectives, FromAnotherThread) {
  Tensor t = rank_values(DType::float32);
  std::thread worker([&] { all_reduce(t, ReduceOp::sum); });
  worker.join();
  const std::vector<float> got = t.to_vector<float>();
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(got[i], expected(i, ReduceOp::sum)) << i;
  EXPECT_EQ(all_reduce(1.0), static_cast<double>(world_size()));
}

// What each rank checks alone passes, but the ranks disagree: every rank gets the same
// DistributedError (no hang, no partial reduction).
TEST(Collectives, MismatchedCallsAreAnErrorOnEveryRank) {
  if (world_size() == 1) GTEST_SKIP() << "needs several processes";
  Tensor t = zeros({10 + rank()});
  try {
    all_reduce(t);
    FAIL() << "no DistributedError";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("disagree on the element count (10 .. 11"),
              std::string::npos)
        << e.what();
  }
  Tensor typed = zeros({4}, {.dtype = rank() == 0 ? DType::float32 : DType::float16});
  try {
    broadcast(typed, 0);
    FAIL() << "no DistributedError";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("disagree on the dtype (float32 .. float16"),
              std::string::npos)
        << e.what();
  }
  try {
    all_reduce(1.0, rank() == 0 ? ReduceOp::sum : ReduceOp::max);
    FAIL() << "no DistributedError";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("reduce op"), std::string::npos) << e.what();
  }
  // The group still works after the errors.
  EXPECT_EQ(all_reduce(1.0), static_cast<double>(world_size()));
}

}  // namespace
}  // namespace mixprec::distributed
