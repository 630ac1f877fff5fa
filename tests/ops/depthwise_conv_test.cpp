// The CPU depthwise forward and backward-data kernels (src/backend/cpu/depthwise_conv.cpp) against
// the reference loops (conv_reference.h) on float64 copies of the same values: float32 within a
// float32 summation bound, float16/bfloat16 exactly the float32 kernel's result on the widened
// values rounded once; every tile path and the generic loop, tiny inputs, non-finite values, the
// thread count, and the dispatch from cpu::conv2d_forward / conv2d_backward_data with its switch.
#include "backend/cpu/depthwise_conv.h"

#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/conv.h"
#include "backend/cpu/conv_reference.h"
#include "backend/cpu/depthwise_filters.h"
#include "core/convert_kernels.h"
#include "mixprec/error.h"
#include "support/depthwise_test_helpers.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::normal;

struct DwCase {
  std::int64_t n, h, w, c, kh, kw, stride;
  bool same;
  std::int64_t dilation = 1;
  std::string label() const {
    return "n" + std::to_string(n) + " " + std::to_string(h) + "x" + std::to_string(w) + " c" +
           std::to_string(c) + " k" + std::to_string(kh) + "x" + std::to_string(kw) + " s" +
           std::to_string(stride) + (same ? " same" : " valid") + " d" + std::to_string(dilation);
  }
};

// The summation bounds below allow one term more than the kernel's taps (kh * kw + 1).
ConvGeometry geometry(const DwCase& c) {
  return testing::depthwise_geometry(c.n, c.h, c.w, c.c, c.kh, c.kw, c.stride, c.dilation, c.same);
}

DwCase square(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t k,
              std::int64_t stride, bool same) {
  return {n, h, w, c, k, k, stride, same};
}

// The forward kernel on case c in every dtype, with and without a bias, against the float64
// reference; 16-bit results exactly the float32 kernel's on the widened values, rounded once.
void check_forward(const DwCase& c, std::uint64_t seed) {
  const ConvGeometry g = geometry(c);
  const Tensor x32 = normal({c.n, c.h, c.w, c.c}, seed);
  const Tensor w32 = normal({c.kh, c.kw, 1, c.c}, seed + 1);
  const Tensor b32 = normal({c.c}, seed + 2);
  for (DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    for (bool bias : {false, true}) {
      const Tensor x = x32.to(dtype), w = w32.to(dtype);
      const Tensor x64 = x.to(DType::float64), w64 = w.to(DType::float64);
      const Tensor b = bias ? b32 : Tensor(), b64 = bias ? b32.to(DType::float64) : Tensor();
      const Tensor exact = cpu::conv2d_reference_forward(x64, w64, b64, g);
      const Tensor mag =
          cpu::conv2d_reference_forward(abs(x64), abs(w64), bias ? abs(b64) : Tensor(), g);
      const Tensor got = cpu::depthwise_forward(x, w, b, g);
      ASSERT_EQ(got.dtype(), dtype);
      ASSERT_EQ(got.shape(), (Shape{c.n, g.out_h, g.out_w, c.c}));
      const std::string what = std::string(dtype_name(dtype)) + (bias ? " bias " : " ") + c.label();
      EXPECT_TRUE(testing::within_summation_bound(got, exact, mag, double(c.kh * c.kw) + 1))
          << what;
      if (dtype != DType::float32) {
        const Tensor wide =
            cpu::depthwise_forward(x64.to(DType::float32), w64.to(DType::float32), b, g);
        EXPECT_TRUE(all_close(got, wide.to(dtype), {0, 0})) << what;
      }
    }
  }
}

// The backward-data kernel on case c, as check_forward.
void check_backward_data(const DwCase& c, std::uint64_t seed) {
  const ConvGeometry g = geometry(c);
  const Tensor dy32 = normal({c.n, g.out_h, g.out_w, c.c}, seed);
  const Tensor w32 = normal({c.kh, c.kw, 1, c.c}, seed + 1);
  for (DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    const Tensor dy = dy32.to(dtype), w = w32.to(dtype);
    const Tensor dy64 = dy.to(DType::float64), w64 = w.to(DType::float64);
    const Tensor exact = cpu::conv2d_reference_backward_data(dy64, w64, g);
    const Tensor mag = cpu::conv2d_reference_backward_data(abs(dy64), abs(w64), g);
    const Tensor got = cpu::depthwise_backward_data(dy, w, g);
    ASSERT_EQ(got.dtype(), dtype);
    ASSERT_EQ(got.shape(), (Shape{c.n, c.h, c.w, c.c}));
    const std::string what = std::string(dtype_name(dtype)) + " " + c.label();
    EXPECT_TRUE(testing::within_summation_bound(got, exact, mag, double(c.kh * c.kw) + 1)) << what;
    if (dtype != DType::float32) {
      const Tensor wide =
          cpu::depthwise_backward_data(dy64.to(DType::float32), w64.to(DType::float32), g);
      EXPECT_TRUE(all_close(got, wide.to(dtype), {0, 0})) << what;
    }
  }
}

void check_both(const DwCase& c, std::uint64_t seed) {
  SCOPED_TRACE(c.label());
  check_forward(c, seed);
  check_backward_data(c, seed + 10);
}

// The tile loops (kernel 3 or 5, stride 1 or 2, dilation 1) in every combination, 'same' and
// 'valid', with widths that give wide tiles, narrow tiles and generic interior columns after them
// (21, 13, 10 columns) and both phases of the stride-2 backward tiles (odd and even widths), and
// channel counts that fill the register blocks (64, 16), leave a tail (53 = 48 + 5) or have no
// full block (5: generic loop only).
TEST(DepthwiseConvKernels, TilePathsMatchReference) {
  std::uint64_t seed = 100;
  for (std::int64_t k : {3, 5}) {
    for (std::int64_t stride : {1, 2}) {
      for (bool same : {true, false}) {
        for (std::int64_t w : {21, 13, 10}) {
          for (std::int64_t channels : {64, 53, 16, 5}) {
            check_both(square(2, 7, w, channels, k, stride, same), seed);
            seed += 20;
          }
        }
      }
    }
  }
}

// The bfloat16 tile loops run only on an AVX-512 CPU (core::convert_isa()); below that limit every
// geometry takes the generic loop, which must give the same results.
TEST(DepthwiseConvKernels, GenericLoopBelowAvx512MatchesReference) {
  const core::ConvertIsa before = core::set_convert_isa_limit(core::ConvertIsa::avx2_f16c);
  std::uint64_t seed = 3000;
  for (std::int64_t k : {3, 5}) {
    for (std::int64_t stride : {1, 2}) {
      check_both(square(2, 7, 13, 53, k, stride, true), seed);
      seed += 20;
    }
  }
  core::set_convert_isa_limit(before);
}

// Geometries outside the tile loops: dilation, even and other kernel sizes, stride 3, non-square
// kernels (the tile loop covers only the width: a 3-wide, 1-high kernel still tiles).
TEST(DepthwiseConvKernels, GenericPathsMatchReference) {
  const std::vector<DwCase> cases = {
      {2, 9, 10, 24, 3, 3, 1, true, 2}, {2, 11, 12, 19, 5, 5, 2, true, 2},
      {2, 8, 9, 33, 2, 2, 1, true},     {2, 8, 9, 33, 2, 2, 2, false},
      {2, 10, 11, 20, 7, 7, 1, true},   {2, 10, 11, 20, 3, 3, 3, true},
      {2, 9, 17, 32, 1, 3, 1, true},    {2, 9, 17, 32, 5, 1, 2, true},
      {2, 9, 17, 32, 3, 5, 2, false},   {1, 6, 6, 17, 4, 4, 3, false},
  };
  std::uint64_t seed = 5000;
  for (const DwCase& c : cases) {
    check_both(c, seed);
    seed += 20;
  }
}

// Tiny maps with 5x5 (and 3x3) kernels: every column and row is an edge, some wholly padding
// except one tap (1x1), inputs narrower than the padding.
TEST(DepthwiseConvKernels, TinyInputsMatchReference) {
  std::uint64_t seed = 7000;
  for (std::int64_t size : {1, 2, 3, 4}) {
    for (std::int64_t k : {3, 5}) {
      for (std::int64_t stride : {1, 2}) {
        for (std::int64_t channels : {48, 21}) {
          check_both(square(3, size, size, channels, k, stride, true), seed);
          seed += 20;
        }
      }
    }
  }
  check_both(square(2, 5, 5, 32, 5, 1, false), seed);  // 'valid': one output position
}

// An infinite weight whose tap reads padding for the edge outputs, and infinite inputs at the
// corners: the outputs whose taps skip them stay finite (padding is skipped, never 0 * inf), the
// others are inf or NaN where the reference's are.
TEST(DepthwiseConvKernels, NonFiniteValuesPropagateLikeReference) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const DwCase& c : {square(2, 9, 13, 48, 3, 1, true), square(2, 9, 13, 48, 5, 2, true),
                          square(2, 2, 2, 32, 5, 1, true), square(2, 8, 11, 21, 3, 2, true)}) {
    const ConvGeometry g = geometry(c);
    std::vector<float> w = normal({c.kh, c.kw, 1, c.c}, 61).to_vector<float>();
    w[0] = inf;              // tap (0, 0) of channel 0
    w[w.size() - 1] = -inf;  // last tap of the last channel
    std::vector<float> x = normal({c.n, c.h, c.w, c.c}, 62).to_vector<float>();
    x[1] = inf;             // (0, 0, 0, channel 1)
    x[x.size() - 2] = inf;  // last position, channel c - 2
    std::vector<float> dy = normal({c.n, g.out_h, g.out_w, c.c}, 63).to_vector<float>();
    dy[2] = -inf;             // (0, 0, 0, channel 2)
    dy[dy.size() - 1] = inf;  // last position, last channel
    const Tensor wt = from_vector(w, {c.kh, c.kw, 1, c.c});
    const Tensor xt = from_vector(x, {c.n, c.h, c.w, c.c});
    const Tensor dyt = from_vector(dy, {c.n, g.out_h, g.out_w, c.c});
    const Tensor w64 = wt.to(DType::float64);
    const auto fwd =
        cpu::conv2d_reference_forward(xt.to(DType::float64), w64, Tensor(), g).to_vector<double>();
    const auto bwd =
        cpu::conv2d_reference_backward_data(dyt.to(DType::float64), w64, g).to_vector<double>();
    for (DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
      const auto got_f =
          cpu::depthwise_forward(xt.to(dtype), wt.to(dtype), Tensor(), g).to_vector<double>();
      const auto got_b =
          cpu::depthwise_backward_data(dyt.to(dtype), wt.to(dtype), g).to_vector<double>();
      int finite = 0;
      for (std::size_t i = 0; i < fwd.size(); ++i) {
        finite += std::isfinite(fwd[i]) ? 1 : 0;
        EXPECT_EQ(std::isnan(got_f[i]), std::isnan(fwd[i])) << dtype_name(dtype) << " y " << i;
        EXPECT_EQ(std::isinf(got_f[i]), std::isinf(fwd[i])) << dtype_name(dtype) << " y " << i;
      }
      for (std::size_t i = 0; i < bwd.size(); ++i) {
        EXPECT_EQ(std::isnan(got_b[i]), std::isnan(bwd[i])) << dtype_name(dtype) << " dx " << i;
        EXPECT_EQ(std::isinf(got_b[i]), std::isinf(bwd[i])) << dtype_name(dtype) << " dx " << i;
      }
      EXPECT_GT(finite, 0) << c.label();
    }
  }
}

TEST(DepthwiseConvKernels, IndependentOfThreadCount) {
  for (const DwCase& c : {square(3, 17, 15, 48, 5, 1, true), square(4, 16, 16, 144, 3, 2, true),
                          square(8, 4, 4, 67, 5, 1, true)}) {
    const ConvGeometry g = geometry(c);
    const Tensor x = normal({c.n, c.h, c.w, c.c}, 31, DType::bfloat16);
    const Tensor dy = normal({c.n, g.out_h, g.out_w, c.c}, 32, DType::bfloat16);
    const Tensor w = normal({c.kh, c.kw, 1, c.c}, 33, DType::bfloat16);
    const Tensor b = normal({c.c}, 34);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto y1 = cpu::depthwise_forward(x, w, b, g).to_vector<float>();
    const auto dx1 = cpu::depthwise_backward_data(dy, w, g).to_vector<float>();
    omp_set_num_threads(3);
    const auto y3 = cpu::depthwise_forward(x, w, b, g).to_vector<float>();
    const auto dx3 = cpu::depthwise_backward_data(dy, w, g).to_vector<float>();
    omp_set_num_threads(threads);
    EXPECT_EQ(y1, y3) << c.label();
    EXPECT_EQ(dx1, dx3) << c.label();
  }
}

// cpu::conv2d_forward / conv2d_backward_data take the kernels where the dispatch rule says so
// (bit-identical results) and oneDNN with the switch off (still matching the reference).
TEST(DepthwiseConvKernels, DispatchAndSwitch) {
  for (const DwCase& c : {square(2, 16, 16, 144, 3, 1, true), square(2, 4, 4, 240, 5, 2, true)}) {
    const ConvGeometry g = geometry(c);
    for (DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
      const Tensor x = normal({c.n, c.h, c.w, c.c}, 41, dtype);
      const Tensor dy = normal({c.n, g.out_h, g.out_w, c.c}, 42, dtype);
      const Tensor w = normal({c.kh, c.kw, 1, c.c}, 43, dtype);
      const Tensor b = normal({c.c}, 44, dtype);
      const std::string what = std::string(dtype_name(dtype)) + " " + c.label();
      cpu::set_depthwise_conv(true);
      EXPECT_TRUE(cpu::depthwise_conv_enabled());
      if (cpu::depthwise_forward_path(g, dtype)) {
        const Tensor mine = cpu::depthwise_forward(x, w, b.to(DType::float32), g);
        EXPECT_TRUE(all_close(cpu::conv2d_forward(x, w, b, g), mine, {0, 0})) << what;
      }
      if (cpu::depthwise_backward_data_path(g, dtype)) {
        const Tensor mine = cpu::depthwise_backward_data(dy, w, g);
        EXPECT_TRUE(all_close(cpu::conv2d_backward_data(dy, w, g), mine, {0, 0})) << what;
      }
      cpu::set_depthwise_conv(false);
      EXPECT_FALSE(cpu::depthwise_forward_path(g, dtype));
      EXPECT_FALSE(cpu::depthwise_backward_data_path(g, dtype));
      const Tensor y = cpu::conv2d_forward(x, w, b, g);
      const Tensor dx = cpu::conv2d_backward_data(dy, w, g);
      cpu::set_depthwise_conv(std::nullopt);
      const Tensor x64 = x.to(DType::float64), w64 = w.to(DType::float64);
      const double tol = dtype == DType::float32 ? 1e-5 : (dtype == DType::float16 ? 4e-3 : 2e-2);
      EXPECT_TRUE(all_close(y.to(DType::float64),
                            cpu::conv2d_reference_forward(x64, w64, b.to(DType::float64), g),
                            {tol, tol}))
          << what;
      EXPECT_TRUE(all_close(dx.to(DType::float64),
                            cpu::conv2d_reference_backward_data(dy.to(DType::float64), w64, g),
                            {tol, tol}))
          << what;
    }
  }
}

// The measured rule (depthwise_conv.cpp): float32 (and float16) take ours on 2x2 output maps,
// bfloat16 backward data on larger ones on an AVX-512 CPU, bfloat16 forward never.
TEST(DepthwiseConvKernels, DispatchRule) {
  const ConvGeometry big = geometry(square(2, 32, 32, 32, 3, 1, true));
  const ConvGeometry to_2x2 = geometry(square(2, 4, 4, 672, 5, 2, true));
  const ConvGeometry tiny = geometry(square(2, 2, 2, 1152, 5, 1, true));
  const ConvGeometry four = geometry(square(2, 4, 4, 480, 3, 1, true));
  for (DType dtype : {DType::float32, DType::float16}) {
    EXPECT_FALSE(cpu::depthwise_forward_path(big, dtype));
    EXPECT_FALSE(cpu::depthwise_backward_data_path(four, dtype));
    EXPECT_TRUE(cpu::depthwise_forward_path(to_2x2, dtype));
    EXPECT_TRUE(cpu::depthwise_backward_data_path(tiny, dtype));
  }
  for (const ConvGeometry& g : {big, to_2x2, tiny, four}) {
    EXPECT_FALSE(cpu::depthwise_forward_path(g, DType::bfloat16));
  }
  const bool avx512 = core::convert_isa() >= core::ConvertIsa::avx512;
  EXPECT_EQ(cpu::depthwise_backward_data_path(big, DType::bfloat16), avx512);
  EXPECT_EQ(cpu::depthwise_backward_data_path(four, DType::bfloat16), avx512);
  EXPECT_FALSE(cpu::depthwise_backward_data_path(to_2x2, DType::bfloat16));
  EXPECT_FALSE(cpu::depthwise_backward_data_path(tiny, DType::bfloat16));
  // Without AVX-512 the bfloat16 tiles do not run: oneDNN everywhere.
  const core::ConvertIsa before = core::set_convert_isa_limit(core::ConvertIsa::avx2_f16c);
  EXPECT_FALSE(cpu::depthwise_backward_data_path(big, DType::bfloat16));
  EXPECT_FALSE(cpu::depthwise_backward_data_path(four, DType::bfloat16));
  core::set_convert_isa_limit(before);
}

TEST(DepthwiseConvKernels, RejectsNonDepthwiseGeometry) {
  ConvGeometry g = geometry(square(1, 5, 5, 4, 3, 1, true));
  g.groups = 2;
  const Tensor x = normal({1, 5, 5, 4}, 1);
  EXPECT_THROW(cpu::depthwise_forward(x, normal({3, 3, 2, 4}, 2), Tensor(), g), Error);
  EXPECT_THROW(cpu::depthwise_backward_data(x, normal({3, 3, 2, 4}, 2), g), Error);
  EXPECT_FALSE(cpu::depthwise_forward_path(g, DType::float32));
}

TEST(DepthwiseConvKernels, EmptyBatch) {
  const ConvGeometry g = geometry(square(0, 5, 5, 3, 3, 1, true));
  const Tensor w = normal({3, 3, 1, 3}, 2);
  EXPECT_EQ(cpu::depthwise_forward(normal({0, 5, 5, 3}, 1), w, Tensor(), g).shape(),
            (Shape{0, 5, 5, 3}));
  EXPECT_EQ(cpu::depthwise_backward_data(normal({0, 5, 5, 3}, 1), w, g).shape(),
            (Shape{0, 5, 5, 3}));
}

}  // namespace
}  // namespace mixprec
