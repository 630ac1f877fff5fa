// The per-channel broadcast of binary ops (the squeeze-and-excitation multiply, a bias add):
// forward in both operand orders and the product's gradients (the one-pass gate gradient) against
// the composition computed in double on the stored values, in float64, float32, float16 and
// bfloat16, with the tolerances of DESIGN §4; float64 gradcheck; shapes that are not a
// per-channel broadcast keep the general path.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/channel_geometry.h"
#include "backend/nn_kernels.h"
#include "core/op_kinds.h"
#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::tolerance_for;

struct Geometry {
  Shape full, small;
};

// (N, H, W, C) against (N, 1, 1, C), (1, 1, 1, C) and (C); large enough for the parallel path, and
// C above one 256-channel segment with a ragged end.
const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> all = {
      {{3, 5, 4, 7}, {3, 1, 1, 7}},
      {{4, 16, 16, 48}, {4, 1, 1, 48}},
      {{2, 9, 7, 300}, {2, 1, 1, 300}},
      {{3, 5, 4, 7}, {1, 1, 1, 7}},
      {{6, 10, 33}, {33}},
      {{12, 16}, {1, 16}},
  };
  return all;
}

std::vector<double> values(const Shape& shape, std::uint64_t seed, double lo, double hi) {
  Generator gen(seed);
  return random_uniform(shape, lo, hi, {.dtype = kFloat64}, gen).to_vector<double>();
}

// Index of the small operand's element that full element i meets.
std::size_t small_index(const Geometry& g, std::size_t i) {
  const auto geo = channel_geometry(g.full, g.small);
  const auto c = static_cast<std::size_t>(geo->channels);
  const auto rows = static_cast<std::size_t>(geo->rows);
  const std::size_t group = geo->groups == 1 ? 0 : i / (rows * c);
  return group * c + i % c;
}

double apply(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
    case BinaryOp::maximum: return a >= b ? a : b;
    default: return std::nan("");
  }
}

Tensor run(BinaryOp op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::add: return add(a, b);
    case BinaryOp::sub: return sub(a, b);
    case BinaryOp::mul: return mul(a, b);
    case BinaryOp::div: return div(a, b);
    default: return maximum(a, b);
  }
}

TEST(ChannelGeometryTest, RecognisesOnlyPerChannelBroadcasts) {
  const auto g = channel_geometry({4, 8, 8, 16}, {4, 1, 1, 16});
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->groups, 4);
  EXPECT_EQ(g->rows, 64);
  EXPECT_EQ(g->channels, 16);
  const auto bias = channel_geometry({4, 8, 8, 16}, {16});
  ASSERT_TRUE(bias.has_value());
  EXPECT_EQ(bias->groups, 1);
  EXPECT_EQ(bias->rows, 256);
  EXPECT_FALSE(channel_geometry({4, 8, 8, 16}, {4, 8, 8, 16}));  // no broadcast
  EXPECT_FALSE(channel_geometry({4, 8, 8, 16}, {4, 8, 1, 16}));  // a middle axis kept
  EXPECT_FALSE(channel_geometry({4, 8, 8, 16}, {4, 1, 1, 1}));   // channels broadcast too
  EXPECT_FALSE(channel_geometry({4, 8, 8, 16}, {}));             // a scalar
  EXPECT_FALSE(channel_geometry({4, 16}, {4, 16}));
}

TEST(BinaryChannelTest, ForwardMatchesDoubleReferenceInBothOrders) {
  for (BinaryOp op :
       {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div, BinaryOp::maximum}) {
    for (const Geometry& geo : geometries()) {
      for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
        SCOPED_TRACE(std::string(op_name(op)) + " " + geo.full.to_string() + " " +
                     geo.small.to_string() + " " + std::string(dtype_name(dtype)));
        // Away from 0: small / full stays finite in float16.
        auto fv = values(geo.full, 1, -2, 2);
        for (double& v : fv) v += v < 0 ? -0.25 : 0.25;
        const Tensor full = from_vector(fv, geo.full, {.dtype = dtype});
        const Tensor small = from_vector(values(geo.small, 2, 0.5, 2), geo.small, {.dtype = dtype});
        const auto f = full.to_vector<double>(), s = small.to_vector<double>();
        std::vector<double> fs(f.size()), sf(f.size());
        for (std::size_t i = 0; i < f.size(); ++i) {
          fs[i] = apply(op, f[i], s[small_index(geo, i)]);
          sf[i] = apply(op, s[small_index(geo, i)], f[i]);
        }
        const auto tol = tolerance_for(dtype);
        const Tensor y1 = run(op, full, small), y2 = run(op, small, full);
        EXPECT_EQ(y1.shape(), geo.full);
        EXPECT_EQ(y2.dtype(), dtype);
        EXPECT_TRUE(all_close(y1, from_vector(fs, geo.full, {.dtype = kFloat64}), tol));
        EXPECT_TRUE(all_close(y2, from_vector(sf, geo.full, {.dtype = kFloat64}), tol));
      }
    }
  }
}

// d full = g * small; d small = sum over the broadcast axes of g * full (the gate gradient), in
// both operand orders.
TEST(BinaryChannelTest, ProductGradientsMatchDoubleReference) {
  for (const Geometry& geo : geometries()) {
    for (DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      SCOPED_TRACE(geo.full.to_string() + " " + geo.small.to_string() + " " +
                   std::string(dtype_name(dtype)));
      Tensor full = from_vector(values(geo.full, 3, -2, 2), geo.full,
                                {.dtype = dtype, .requires_grad = true});
      Tensor small = from_vector(values(geo.small, 4, -1, 1), geo.small,
                                 {.dtype = dtype, .requires_grad = true});
      const Tensor g = from_vector(values(geo.full, 5, -1, 1), geo.full, {.dtype = dtype});
      const auto f = full.to_vector<double>(), s = small.to_vector<double>();
      const auto gv = g.to_vector<double>();
      std::vector<double> dfull(f.size()), dsmall(s.size(), 0.0), dsmall_abs(s.size(), 0.0);
      for (std::size_t i = 0; i < f.size(); ++i) {
        const std::size_t k = small_index(geo, i);
        dfull[i] = gv[i] * s[k];
        dsmall[k] += gv[i] * f[i];
        dsmall_abs[k] += std::abs(gv[i] * f[i]);
      }
      auto tol = tolerance_for(dtype);
      for (bool small_first : {false, true}) {
        const Tensor y = small_first ? mul(small, full) : mul(full, small);
        const auto grads = grad(y, {full, small}, g);
        EXPECT_TRUE(all_close(grads[0], from_vector(dfull, geo.full, {.dtype = kFloat64}), tol));
        // A sum of many products: its error grows with the sum of their magnitudes.
        const auto ds = grads[1].to_vector<double>();
        ASSERT_EQ(grads[1].shape(), geo.small);
        const double eps = dtype == kFloat64 ? 1e-15 : dtype == kFloat32 ? 1e-6 : tol.rtol;
        for (std::size_t k = 0; k < ds.size(); ++k) {
          EXPECT_NEAR(ds[k], dsmall[k],
                      tol.atol + tol.rtol * std::abs(dsmall[k]) + eps * dsmall_abs[k])
              << "small element " << k;
        }
      }
    }
  }
}

TEST(BinaryChannelTest, CpuHasTheOnePassGateGradient) {
  EXPECT_NE(backend_for(Device::cpu()).nn->channel_gate_backward, nullptr);
}

TEST(BinaryChannelTest, Gradcheck) {
  const Tensor full =
      from_vector(values({2, 3, 4, 5}, 6, -1, 1), {2, 3, 4, 5}, {.dtype = kFloat64});
  const Tensor gate =
      from_vector(values({2, 1, 1, 5}, 7, -1, 1), {2, 1, 1, 5}, {.dtype = kFloat64});
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return mul(in[0], in[1]); },
                                 {full, gate}));
  EXPECT_TRUE(testing::gradcheck([](const std::vector<Tensor>& in) { return mul(in[1], in[0]); },
                                 {full, gate}));
}

// A strided full operand and other broadcasts still go through the general path.
TEST(BinaryChannelTest, NonChannelBroadcastsAndStridedOperands) {
  const Tensor a = from_vector(values({4, 3}, 8, -1, 1), {4, 3}, {.dtype = kFloat64});
  const Tensor col = from_vector(values({4, 1}, 9, -1, 1), {4, 1}, {.dtype = kFloat64});
  const auto av = a.to_vector<double>(), cv = col.to_vector<double>();
  std::vector<double> expected(12);
  for (std::size_t i = 0; i < 12; ++i) expected[i] = av[i] * cv[i / 3];
  EXPECT_TRUE(
      all_close(mul(a, col), from_vector(expected, {4, 3}, {.dtype = kFloat64}), {1e-15, 0}));
  const Tensor t = a.transpose(0, 1);  // (3, 4), not contiguous
  const Tensor row = from_vector(values({4}, 10, -1, 1), {4}, {.dtype = kFloat64});
  const auto rv = row.to_vector<double>();
  std::vector<double> expected_t(12);
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 4; ++j) expected_t[i * 4 + j] = av[j * 3 + i] + rv[j];
  }
  EXPECT_TRUE(
      all_close(add(t, row), from_vector(expected_t, {3, 4}, {.dtype = kFloat64}), {1e-15, 0}));
}

}  // namespace
}  // namespace mixprec
