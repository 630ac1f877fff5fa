// from_blob: tensors over memory the library did not allocate (what the Python module's NumPy and
// DLPack paths use): no copy, strides kept, the release callback run exactly once when the last
// view goes, and bad geometry refused before anything is wrapped.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/tensor_impl.h"
#include "mixprec/creation.h"
#include "mixprec/error.h"
#include "mixprec/ops.h"

namespace mixprec {
namespace {

TEST(FromBlobTest, ViewsTheCallersMemoryWithoutCopying) {
  std::vector<float> buffer(12);
  std::iota(buffer.begin(), buffer.end(), 0.0f);
  int released = 0;
  {
    Tensor t = from_blob(buffer.data(), DType::float32, Shape{3, 4}, {}, [&] { ++released; });
    EXPECT_EQ(t.data_ptr(), buffer.data());
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.strides(), (std::vector<std::int64_t>{4, 1}));
    EXPECT_TRUE(t.impl()->storage->external());
    buffer[5] = 50.0f;  // the tensor sees the caller's writes
    EXPECT_EQ(t.to_vector<float>()[5], 50.0f);
    Tensor sum = add(t, t);  // ops read it like any tensor; the result is the library's own
    EXPECT_EQ(sum.to_vector<float>()[5], 100.0f);
    EXPECT_FALSE(sum.impl()->storage->external());
    Tensor view = t.slice(0, 1, 3);  // a view shares the storage and keeps it alive
    t = Tensor();
    EXPECT_EQ(released, 0);
    EXPECT_EQ(view.to_vector<float>()[1], 50.0f);
  }
  EXPECT_EQ(released, 1);
}

TEST(FromBlobTest, KeepsStrides) {
  // Every other column of a (2, 6) int64 array: shape (2, 3), strides (6, 2).
  std::vector<std::int64_t> buffer(12);
  std::iota(buffer.begin(), buffer.end(), 0);
  Tensor t = from_blob(buffer.data(), DType::int64, Shape{2, 3}, {6, 2}, [] {});
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(t.contiguous().to_vector<std::int64_t>(), t.to_vector<std::int64_t>());
}

TEST(FromBlobTest, EmptyTensorsNeedNoData) {
  Tensor t = from_blob(nullptr, DType::float16, Shape{0, 4}, {}, [] {});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.dtype(), DType::float16);
}

TEST(FromBlobTest, RefusesBadGeometry) {
  float x[4] = {};
  int released = 0;
  auto release = [&] { ++released; };
  EXPECT_THROW(from_blob(x, DType::float32, Shape{2, 2}, {2}, release), ValueError);
  EXPECT_THROW(from_blob(x, DType::float32, Shape{2, 2}, {-2, 1}, release), ValueError);
  EXPECT_THROW(from_blob(nullptr, DType::float32, Shape{2}, {}, release), ValueError);
  EXPECT_THROW(from_blob(x, DType::float32, Shape{2, 2}, {std::int64_t{1} << 62, 1}, release),
               ValueError);
  EXPECT_EQ(released, 0);  // nothing was wrapped, so nothing is released
}

}  // namespace
}  // namespace mixprec
