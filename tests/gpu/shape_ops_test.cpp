// View and copy ops on CUDA tensors against the CPU backend: reshape of views (a copy), transpose,
// permute, slice (its backward writes into a strided window), concat/split, cast between every
// pair of dtypes, one_hot.
#include <cmath>
#include <limits>

#include "gpu/op_harness.h"

namespace mixprec::testing {
namespace {

TEST(GpuShapeOpsTest, ViewsAndCopiesMatchTheCpuForwardAndBackward) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<OpCase> cases = {
      {"reshape of a transposed view",
       [](const std::vector<Tensor>& x) { return x[0].transpose(0, 1).reshape({-1}); },
       {{{6, 10}}}},
      {"permute then contiguous",
       [](const std::vector<Tensor>& x) {
         return x[0].permute({2, 0, 1}).contiguous();
       },
       {{{3, 4, 5}}}},
      {"slice with a step",
       [](const std::vector<Tensor>& x) { return x[0].slice(1, 1, 9, 3).contiguous(); },
       {{{4, 10}}}},
      {"slice of a slice, then an op",
       [](const std::vector<Tensor>& x) { return exp(x[0].slice(0, 1, 3).slice(1, 2, 7, 2)); },
       {{{5, 9}}}},
      {"concat axis 1",
       [](const std::vector<Tensor>& x) {
         return concat({x[0], x[1], x[2]}, 1);
       },
       {{{3, 2}}, {{3, 5}}, {{3, 1}}}},
      {"concat axis 0 of views",
       [](const std::vector<Tensor>& x) {
         return concat({x[0].transpose(0, 1), x[1]}, 0);
       },
       {{{4, 3}}, {{2, 4}}}},
  };
  for (const OpCase& c : cases) {
    for (DType dtype : float_dtypes()) expect_same_on_gpu(c, dtype);
  }
}

TEST(GpuShapeOpsTest, CastBetweenEveryPairOfDtypesIsExact) {
  MIXPREC_REQUIRE_GPU();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Rounding ties, overflow for float16, saturation for integers, NaN, signed zero, subnormals.
  const std::vector<double> values = {0.0,     -0.0,    1.0,          -1.5, 2.5,   65504.0,
                                      65520.0, 70000.0, 1e-7,         -3.7, 255.9, 300.0,
                                      -1.0e10, 3.0e9,   1.0009765625, inf,  -inf,  nan};
  const Tensor source =
      from_vector(values, {static_cast<std::int64_t>(values.size())}, {.dtype = kFloat64});
  const std::vector<DType> dtypes = {kFloat32, kFloat16, kBFloat16, kFloat64,
                                     kInt32,   kInt64,   kUInt8,    kBool};
  for (DType from : dtypes) {
    const Tensor x = source.to(from);
    for (DType to : dtypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      EXPECT_TRUE(matches(on_gpu(x).to(to), x.to(to), {0, 0}));
      // A strided source (every other element) takes the generic kernel.
      const Tensor view = x.slice(0, 0, x.numel(), 2);
      EXPECT_TRUE(matches(on_gpu(x).slice(0, 0, x.numel(), 2).to(to), view.to(to), {0, 0}));
    }
  }
  // Large int64 values convert exactly between integer types (no detour through double).
  const Tensor big = from_vector(std::vector<std::int64_t>{(std::int64_t{1} << 53) + 1, -7}, {2});
  EXPECT_TRUE(matches(on_gpu(big).to(kInt32), big.to(kInt32), {0, 0}));
  EXPECT_EQ(on_cpu(on_gpu(big).to(kInt32)).to_vector<std::int32_t>()[0], 1);  // 2^53 + 1 mod 2^32
}

TEST(GpuShapeOpsTest, CastIsDifferentiableOnTheGpu) {
  MIXPREC_REQUIRE_GPU();
  const OpCase c{
      "float32 master weight cast to float16 and back",
      [](const std::vector<Tensor>& x) { return mul(x[0].to(kFloat16), x[0].to(kFloat16)); },
      {{{9, 17}}}};
  expect_same_on_gpu(c, kFloat32);
}

TEST(GpuShapeOpsTest, OneHotOfGpuIndices) {
  MIXPREC_REQUIRE_GPU();
  const Tensor labels = from_vector(std::vector<std::int64_t>{3, 0, 2, 2}, {4});
  for (DType dtype : {kFloat32, kFloat16}) {
    EXPECT_TRUE(matches(one_hot(on_gpu(labels), 5, dtype), one_hot(labels, 5, dtype), {0, 0}));
  }
  // Index 3 is out of range for depth 3: the CPU throws; CUDA cannot throw from a kernel without a
  // sync, so that row is all NaN (ops.h) and shows as a NaN loss.
  EXPECT_THROW(one_hot(labels, 3), ValueError);
  const std::vector<double> row0 = on_cpu(one_hot(on_gpu(labels), 3)).to_vector<double>();
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::isnan(row0[c])) << "column " << c;
}

TEST(GpuShapeOpsTest, MixedDevicesAreADeviceError) {
  MIXPREC_REQUIRE_GPU();
  const Tensor a = ones({3});
  const Tensor b = on_gpu(a);
  EXPECT_THROW(add(a, b), DeviceError);
  EXPECT_THROW(where(greater(b, b), a, a), DeviceError);
  EXPECT_THROW(concat({a, b}, 0), DeviceError);
}

}  // namespace
}  // namespace mixprec::testing
