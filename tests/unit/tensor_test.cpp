// Tensor handle: creation, geometry, views, host conversions, printing and access errors.
#include "mixprec/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(TensorTest, UndefinedTensor) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.to_string(), "Tensor(undefined)");
  EXPECT_THROW(t.shape(), ValueError);
  EXPECT_THROW(t.dtype(), ValueError);
  EXPECT_THROW(t.numel(), Error);
}

TEST(TensorTest, ZerosOnesFullInEveryDtype) {
  const DType dtypes[] = {kFloat32, kFloat16, kBFloat16, kFloat64, kInt32, kInt64, kUInt8, kBool};
  for (DType dtype : dtypes) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const Tensor z = zeros({2, 3}, {.dtype = dtype});
    const Tensor o = ones({2, 3}, {.dtype = dtype});
    const Tensor f = full({4}, 3.0, {.dtype = dtype});
    EXPECT_EQ(z.dtype(), dtype);
    EXPECT_EQ(z.shape(), Shape({2, 3}));
    EXPECT_EQ(z.nbytes(), 6 * dtype_size(dtype));
    EXPECT_EQ(z.to_vector<double>(), std::vector<double>(6, 0.0));
    EXPECT_EQ(o.to_vector<double>(), std::vector<double>(6, 1.0));
    const double three = dtype == kBool ? 1.0 : 3.0;  // bool keeps only "non-zero"
    EXPECT_EQ(f.to_vector<double>(), std::vector<double>(4, three));
    EXPECT_TRUE(z.device().is_cpu());
    EXPECT_FALSE(z.requires_grad());
  }
}

TEST(TensorTest, FullRoundsToTheStorageDtype) {
  // 1.1 = 1 + 0.1: float16 keeps 10 fraction bits (0.1 * 1024 = 102.4 -> 102), bfloat16 keeps 7
  // (0.1 * 128 = 12.8 -> 13).
  EXPECT_EQ(full({1}, 1.1, {.dtype = kFloat16}).item(), 1.0 + 102.0 / 1024.0);
  EXPECT_EQ(full({1}, 1.1, {.dtype = kBFloat16}).item(), 1.0 + 13.0 / 128.0);
  EXPECT_EQ(full({1}, 1.1, {.dtype = kFloat32}).item(), static_cast<double>(1.1f));
  EXPECT_EQ(full({1}, 1.1, {.dtype = kFloat64}).item(), 1.1);
  EXPECT_EQ(full({1}, -2.7, {.dtype = kInt32}).item(), -2.0);  // truncation toward zero
}

TEST(TensorTest, NegativeExtentsAreRejected) {
  // -1 is only reshape's "infer" placeholder.
  EXPECT_THROW(zeros({-1}), ShapeError);
  EXPECT_THROW(empty({2, -1}), ShapeError);
  EXPECT_THROW(full({-1, 3}, 1.0), ShapeError);
  EXPECT_THROW(from_vector(std::vector<float>{1, 2}, {-1, 2}), ShapeError);
  EXPECT_THROW(broadcast_to(ones({1}), {-1}), ShapeError);
}

TEST(TensorTest, SizesThatOverflowAreRejected) {
  // 2^62 float32 elements need 2^64 bytes: a wrapped byte count would allocate 0 bytes.
  EXPECT_THROW(full({1ll << 62}, 1.0), ValueError);
  EXPECT_THROW(zeros({1ll << 40, 1ll << 40}), ValueError);
  EXPECT_THROW(empty({1ll << 31, 1ll << 31, 4}, {.dtype = kFloat16}), ValueError);
}

TEST(TensorTest, LikeCreatorsCopyShapeAndDtype) {
  const Tensor base = full({3, 2}, 5.0, {.dtype = kBFloat16});
  for (const Tensor& t : {zeros_like(base), ones_like(base), full_like(base, -1.5)}) {
    EXPECT_EQ(t.shape(), base.shape());
    EXPECT_EQ(t.dtype(), kBFloat16);
    EXPECT_FALSE(t.same(base));
  }
  EXPECT_EQ(full_like(base, -1.5).to_vector<double>(), std::vector<double>(6, -1.5));
}

TEST(TensorTest, ScalarHasRankZero) {
  const Tensor s = scalar(2.5);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item(), 2.5);
  EXPECT_EQ(scalar(7, {.dtype = kInt64}).item(), 7.0);
  EXPECT_TRUE(scalar(1.0, {.requires_grad = true}).requires_grad());
}

TEST(TensorTest, FromVectorKeepsRowMajorOrder) {
  const Tensor t = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.dtype(), kFloat32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const Tensor i = from_vector(std::vector<std::int32_t>{-1, 0, 7}, {3});
  EXPECT_EQ(i.dtype(), kInt32);
  EXPECT_EQ(i.to_vector<std::int32_t>(), (std::vector<std::int32_t>{-1, 0, 7}));
  const Tensor l = from_vector(std::vector<std::int64_t>{1ll << 40, -3}, {2});
  EXPECT_EQ(l.dtype(), kInt64);
  EXPECT_EQ(l.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1ll << 40, -3}));
  const Tensor d = from_vector(std::vector<double>{0.1, 0.2}, {2}, {.dtype = kFloat64});
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{0.1, 0.2}));
  // Converted on the way in.
  const Tensor h = from_vector(std::vector<double>{0.5, 65504.0, 1e6}, {3}, {.dtype = kFloat16});
  const auto hv = h.to_vector<double>();
  EXPECT_EQ(hv[0], 0.5);
  EXPECT_EQ(hv[1], 65504.0);  // the largest float16
  EXPECT_TRUE(std::isinf(hv[2]));
}

TEST(TensorTest, FromVectorSizeMismatchThrows) {
  EXPECT_THROW(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), ShapeError);
  try {
    from_vector(std::vector<float>{1, 2, 3}, {2, 2});
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "(2, 2)")) << e.what();
  }
}

TEST(TensorTest, FromDataCopiesRawMemory) {
  float raw[4] = {1.5f, -2.0f, 3.25f, 0.0f};
  Tensor t = from_data(raw, kFloat32, {2, 2});
  raw[0] = 100.0f;  // a copy, not a view of the caller's memory
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f}));
  const Tensor h = from_data(raw, kFloat32, {4}, {.dtype = kFloat16});
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_EQ(h.to_vector<double>(), (std::vector<double>{100.0, -2.0, 3.25, 0.0}));
  const std::uint16_t bits[2] = {0x3c00, 0xc000};  // float16 1 and -2
  EXPECT_EQ(from_data(bits, kFloat16, {2}, {.dtype = kFloat16}).to_vector<double>(),
            (std::vector<double>{1.0, -2.0}));
  EXPECT_THROW(from_data(nullptr, kFloat32, {2}), ValueError);
  EXPECT_EQ(from_data(nullptr, kFloat32, {0}).numel(), 0);
}

TEST(TensorTest, Arange) {
  EXPECT_EQ(arange(5).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(0.0, 1.0, 0.25).to_vector<double>(), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(arange(5.0, 0.0, -2.0).to_vector<double>(), (std::vector<double>{5, 3, 1}));
  EXPECT_EQ(arange(2.0, 2.0).numel(), 0);
  EXPECT_EQ(arange(3.0, 1.0).numel(), 0);  // empty, not negative
  EXPECT_EQ(arange(0.0, 3.0, 1.0, {.dtype = kInt32}).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_THROW(arange(0.0, 1.0, 0.0), ValueError);
  EXPECT_THROW(arange(0.0, std::numeric_limits<double>::infinity()), ValueError);
}

TEST(TensorTest, ContiguousStridesAndNbytes) {
  const Tensor t = zeros({2, 3, 4});
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (std::vector<std::int64_t>{12, 4, 1}));
  EXPECT_EQ(t.offset(), 0);
  EXPECT_EQ(t.nbytes(), 2u * 3 * 4 * 4);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_THROW(t.dim(3), ShapeError);
  const Tensor tt = t.transpose(0, 2);
  EXPECT_EQ(tt.shape(), Shape({4, 3, 2}));
  EXPECT_EQ(tt.strides(), (std::vector<std::int64_t>{1, 4, 12}));
  EXPECT_FALSE(tt.is_contiguous());
  const Tensor c = tt.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.strides(), (std::vector<std::int64_t>{6, 2, 1}));
  EXPECT_TRUE(t.contiguous().same(t));  // already contiguous: itself
}

TEST(TensorTest, ContiguousCopyHasTransposedValues) {
  const Tensor t = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor c = t.transpose(0, 1).contiguous();
  EXPECT_EQ(c.shape(), Shape({3, 2}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_NE(c.data_ptr(), t.data_ptr());
}

TEST(TensorTest, ViewsShareStorage) {
  Tensor t = arange(0.0, 12.0, 1.0).reshape({3, 4});
  const Tensor tr = t.transpose(0, 1);
  const Tensor row = t.slice(0, 1, 2);
  const Tensor flat = t.reshape({12});
  const Tensor det = t.detach();
  EXPECT_EQ(tr.data_ptr(), t.data_ptr());
  EXPECT_EQ(flat.data_ptr(), t.data_ptr());
  EXPECT_EQ(det.data_ptr(), t.data_ptr());
  EXPECT_EQ(row.offset(), 4);
  EXPECT_EQ(static_cast<const char*>(row.data_ptr()) - static_cast<const char*>(t.data_ptr()),
            4 * 4);
  t.data<float>()[5] = -1.0f;  // element (1, 1)
  EXPECT_EQ(tr.to_vector<float>()[1 * 3 + 1], -1.0f);
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{4, -1, 6, 7}));
  EXPECT_EQ(flat.to_vector<float>()[5], -1.0f);
  EXPECT_EQ(det.to_vector<float>()[5], -1.0f);
}

TEST(TensorTest, ToVectorConverts) {
  const Tensor t = from_vector(std::vector<float>{1.5f, -2.5f, 0.0f, 300.0f}, {4});
  EXPECT_EQ(t.to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, -2, 0, 300}));
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1.5, -2.5, 0.0, 300.0}));
  EXPECT_EQ(t.to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  const auto halves = t.to_vector<float16>();
  ASSERT_EQ(halves.size(), 4u);
  EXPECT_EQ(halves[0].bits, 0x3e00);  // 1.5 = 0 01111 1000000000
  EXPECT_EQ(halves[1].bits, 0xc100);  // -2.5 = 1 10000 0100000000
  EXPECT_EQ(halves[2].bits, 0x0000);
  const auto b = t.to_vector<bfloat16>();
  EXPECT_EQ(b[0].bits, 0x3fc0);  // top half of 0x3fc00000
  // Values of a strided view come out in its own row-major order.
  const Tensor m = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, {.dtype = kFloat64});
  EXPECT_EQ(m.transpose(0, 1).to_vector<double>(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(m.slice(1, 0, 3, 2).to_vector<double>(), (std::vector<double>{1, 3, 4, 6}));
}

TEST(TensorTest, ItemNeedsOneElement) {
  EXPECT_EQ(full({1, 1}, 4.0).item(), 4.0);
  EXPECT_EQ(full({1}, 0.5, {.dtype = kFloat16}).item(), 0.5);
  EXPECT_THROW(zeros({2}).item(), ValueError);
  EXPECT_THROW(zeros({0}).item(), ValueError);
}

TEST(TensorTest, DataChecksTheDtype) {
  Tensor t = zeros({3}, {.dtype = kFloat16});
  EXPECT_NO_THROW(t.data<float16>());
  try {
    t.data<float>();
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_TRUE(contains(e.what(), "float32")) << e.what();
    EXPECT_TRUE(contains(e.what(), "float16")) << e.what();
  }
  const Tensor& ct = t;
  EXPECT_THROW(ct.data<double>(), DTypeError);
  EXPECT_THROW(ones({2}, {.dtype = kInt32}).data<std::int64_t>(), DTypeError);
}

// Without a usable GPU (a CPU-only build, or a CUDA build on a machine without one, like this
// one) moving to CUDA is a DeviceError naming the device; where a GPU works, the values survive
// the round trip. Any other outcome (another exception type, a crash) fails.
TEST(TensorTest, ToCudaWithoutAGpuIsADeviceError) {
  const Tensor t = from_vector(std::vector<float>{1.5f, -2.0f}, {2});
  EXPECT_TRUE(t.to(Device::cpu()).same(t));
  std::vector<bool> moved;
  for (int index : {0, 1}) {
    try {
      const Tensor g = t.to(Device::cuda(index));
      EXPECT_EQ(g.device(), Device::cuda(index));
      EXPECT_EQ(g.to(Device::cpu()).to_vector<float>(), t.to_vector<float>());
      moved.push_back(true);
    } catch (const DeviceError& e) {
      EXPECT_TRUE(contains(e.what(), "cuda:" + std::to_string(index))) << e.what();
      moved.push_back(false);
    }
  }
  bool created = true;
  try {
    EXPECT_EQ(zeros({2}, {.device = Device::cuda()}).device(), Device::cuda());
  } catch (const DeviceError& e) {
    EXPECT_TRUE(contains(e.what(), "cuda")) << e.what();
    created = false;
  }
  EXPECT_EQ(created, moved[0]);  // cuda:0 either works for both or for neither
#if !MIXPREC_HAVE_CUDA
  EXPECT_FALSE(moved[0] || moved[1]);  // a CPU-only build always refuses
#endif
}

TEST(TensorTest, DeviceParseAndPrint) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda"), Device::cuda(0));
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(2).to_string(), "cuda:2");
  EXPECT_EQ(Device::cpu().to_string(), "cpu");
  EXPECT_THROW(Device::parse("gpu"), ValueError);
  EXPECT_THROW(Device::parse("cuda:"), ValueError);
  EXPECT_THROW(Device::parse("cuda:-1"), ValueError);
}

TEST(TensorTest, PrintsShapeDtypeAndValues) {
  const Tensor t = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.to_string(), "Tensor(shape=(2, 3), dtype=float32, values=[[1, 2, 3], [4, 5, 6]])");
  EXPECT_EQ(scalar(0.5, {.dtype = kFloat16}).to_string(),
            "Tensor(shape=(), dtype=float16, values=0.5)");
  EXPECT_EQ(from_vector(std::vector<float>{1, 0}, {2}, {.dtype = kBool}).to_string(),
            "Tensor(shape=(2,), dtype=bool, values=[true, false])");
  EXPECT_EQ(zeros({0}).to_string(), "Tensor(shape=(0,), dtype=float32, values=[])");
  std::ostringstream os;
  os << ones({1}, {.requires_grad = true});
  EXPECT_EQ(os.str(), "Tensor(shape=(1,), dtype=float32, values=[1], requires_grad=true)");
}

TEST(TensorTest, PrintingTruncatesLongAxes) {
  EXPECT_EQ(arange(10).to_string(),
            "Tensor(shape=(10,), dtype=int64, values=[0, 1, 2, ..., 7, 8, 9])");
  // Six entries fit without truncation; seven do not.
  EXPECT_FALSE(contains(arange(6).to_string(), "..."));
  EXPECT_TRUE(contains(arange(7).to_string(), "[0, 1, 2, ..., 4, 5, 6]"));
  // Every axis is truncated on its own: (8, 8) shows 3 + 3 rows of 3 + 3 values.
  const std::string s = arange(64).reshape({8, 8}).to_string();
  EXPECT_TRUE(contains(s,
                       "[[0, 1, 2, ..., 5, 6, 7], [8, 9, 10, ..., 13, 14, 15], "
                       "[16, 17, 18, ..., 21, 22, 23], ..., [40, 41, 42, ..., 45, 46, 47]"))
      << s;
  EXPECT_TRUE(contains(s, "[56, 57, 58, ..., 61, 62, 63]])")) << s;
  EXPECT_FALSE(contains(s, "30")) << s;
}

}  // namespace
}  // namespace mixprec

// int64 values beyond 2^53 must not pass through double on the way in or out.
TEST(TensorInt64Test, ValuesBeyondDoublePrecisionAreExact) {
  const std::int64_t big = (std::int64_t{1} << 53) + 1;
  const auto t = mixprec::from_vector(std::vector<std::int64_t>{big, -big}, {2});
  EXPECT_EQ(t.to_vector<std::int64_t>(), (std::vector<std::int64_t>{big, -big}));
  EXPECT_EQ(t.to(mixprec::kInt32).to(mixprec::kInt64).to_vector<std::int64_t>()[0],
            static_cast<std::int64_t>(static_cast<std::int32_t>(big)));
}

// Float to integer casts saturate and map NaN to 0 instead of invoking undefined behaviour.
TEST(TensorInt64Test, FloatToIntegerCastSaturates) {
  const auto t = mixprec::from_vector(std::vector<double>{1e300, -1e300, std::nan(""), -2.7, 2.7},
                                      {5}, {.dtype = mixprec::kFloat64});
  const auto v = t.to(mixprec::kInt32).to_vector<std::int32_t>();
  EXPECT_EQ(v, (std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::max(),
                                          std::numeric_limits<std::int32_t>::min(), 0, -2, 2}));
  const auto w = t.to(mixprec::kInt64).to_vector<std::int64_t>();
  EXPECT_GT(w[0], std::int64_t{1} << 62);
  EXPECT_EQ(w[1], std::numeric_limits<std::int64_t>::min());
}
