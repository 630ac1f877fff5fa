// embedding_lookup: the gathered rows (16-bit outputs bit for bit the cast table's rows), a float64
// finite-difference gradient with repeated ids, the scatter-add bit for bit a sequential sum in
// position order and the same for 1 and 2 threads, 16-bit gradients against float32, int32 and
// int64 ids of several shapes, and the errors (id out of range naming the id, its position and the
// shape; floating ids; a mismatched table dtype).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <vector>

#include "mixprec/mixprec.h"
#include "mixprec/transformer_ops.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::gradcheck;
using testing::normal;

Tensor ids32(const std::vector<std::int32_t>& v, const Shape& shape) {
  return from_vector(v, shape, {.dtype = DType::int32});
}

TEST(Embedding, GathersRowsInOutDtype) {
  const Tensor table = normal(Shape{7, 5}, 1);
  const Tensor ids = ids32({3, 0, 6, 3, 1, 2}, Shape{2, 3});
  for (DType out : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
    const Tensor y = embedding_lookup(table, ids, out);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 5}));
    ASSERT_EQ(y.dtype(), out);
    // The same bits as casting the whole table first.
    const auto cast_rows = table.to(out).to_vector<double>();
    const auto got = y.to_vector<double>();
    const std::vector<int> idv = {3, 0, 6, 3, 1, 2};
    for (int i = 0; i < 6; ++i) {
      for (int j = 0; j < 5; ++j) EXPECT_EQ(got[i * 5 + j], cast_rows[idv[i] * 5 + j]);
    }
  }
  // int64 ids and a rank-0 id.
  const Tensor y64 = embedding_lookup(
      table, from_vector(std::vector<std::int64_t>{6}, Shape{}, {.dtype = DType::int64}),
      DType::float32);
  EXPECT_EQ(y64.shape(), (Shape{5}));
  EXPECT_EQ(y64.to_vector<float>(), table.slice(0, 6, 7).contiguous().to_vector<float>());
}

TEST(Embedding, GradcheckFloat64WithRepeatedIds) {
  const Tensor table = normal(Shape{6, 4}, 2, DType::float64);
  const Tensor ids = ids32({5, 1, 1, 5, 5, 0, 2, 1}, Shape{2, 4});
  EXPECT_TRUE(gradcheck(
      [&](const std::vector<Tensor>& in) { return embedding_lookup(in[0], ids, DType::float64); },
      {table}));
}

// The table gradient for weights w (ids.shape + (C)): a sequential float32 sum in position order.
std::vector<float> sequential_scatter(const std::vector<std::int32_t>& ids,
                                      const std::vector<float>& g, std::int64_t vocab,
                                      std::int64_t c) {
  std::vector<float> out(static_cast<std::size_t>(vocab * c), 0.0f);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    for (std::int64_t j = 0; j < c; ++j) out[ids[i] * c + j] += g[i * c + j];
  }
  return out;
}

TEST(Embedding, ScatterAddIsDeterministicAndInPositionOrder) {
  // 2048 positions x 32 columns (above the parallel threshold), 50 ids: many repeats.
  const std::int64_t n = 2048, c = 32, vocab = 50;
  std::vector<std::int32_t> idv(n);
  for (std::int64_t i = 0; i < n; ++i) idv[i] = static_cast<std::int32_t>((i * 37 + i / 7) % vocab);
  const Tensor ids = ids32(idv, Shape{16, 128});
  const Tensor w = normal(Shape{16, 128, c}, 3, 0.0, 100.0);  // large spread: order matters
  auto grad = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    Tensor table = zeros(Shape{vocab, c});
    table.set_requires_grad(true);
    sum(embedding_lookup(table, ids, DType::float32) * w).backward();
    omp_set_num_threads(before);
    return table.grad().to_vector<float>();
  };
  const auto one = grad(1), two = grad(2);
  EXPECT_EQ(one, two);
  EXPECT_EQ(two, sequential_scatter(idv, w.to_vector<float>(), vocab, c));
}

TEST(Embedding, SixteenBitGradientAgainstFloat32) {
  const Tensor table = normal(Shape{9, 8}, 4);
  const Tensor ids = ids32({1, 8, 1, 0, 4, 4, 4, 7}, Shape{8});
  const Tensor w = normal(Shape{8, 8}, 5);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    Tensor t16 = table.detach(), t32 = table.detach();
    t16.set_requires_grad(true);
    t32.set_requires_grad(true);
    const Tensor w16 = w.to(dtype);
    sum(embedding_lookup(t16, ids, dtype) * w16).backward();
    sum(embedding_lookup(t32.to(dtype).to(DType::float32), ids, DType::float32) *
        w16.to(DType::float32))
        .backward();
    // The gradient of a float32 table read in 16 bits: float32, summed in float32 from the
    // 16-bit output gradient (exact here: the same widened terms).
    EXPECT_EQ(t16.grad().dtype(), DType::float32);
    EXPECT_TRUE(all_close(t16.grad(), t32.grad(), testing::tolerance_for(dtype)))
        << dtype_name(dtype);
  }
}

TEST(Embedding, Errors) {
  const Tensor table = normal(Shape{4, 3}, 6);
  expect_error<ValueError>(
      [&] {
        embedding_lookup(table, ids32({0, 1, 2, 3, 4, 1}, Shape{2, 3}), DType::float32);
      },
      {"embedding_lookup", "id 4", "flat position 4", "(2, 3)", "[0, 4)"});
  expect_error<ValueError>([&] { embedding_lookup(table, ids32({-1}, Shape{1}), DType::float32); },
                           {"id -1", "position 0"});
  expect_error<DTypeError>([&] { embedding_lookup(table, zeros(Shape{2}), DType::float32); },
                           {"ids must be int32 or int64", "float32"});
  expect_error<DTypeError>(
      [&] { embedding_lookup(table.to(DType::float16), ids32({0}, Shape{1}), DType::float32); },
      {"float16 table", "out_dtype float32"});
  expect_error<ShapeError>(
      [&] { embedding_lookup(zeros(Shape{4}), ids32({0}, Shape{1}), DType::float32); },
      {"rank 2", "(4,)"});
  expect_error<DTypeError>([&] { embedding_lookup(table, ids32({0}, Shape{1}), DType::int32); },
                           {"out_dtype"});
}

}  // namespace
}  // namespace mixprec
