// The CPU depthwise backward-filters kernel (src/backend/cpu/depthwise_filters.cpp) against the
// reference loops (conv_reference.h) on float64 copies of the same values: float32 within a
// float32 summation bound, float16/bfloat16 as the float32 result rounded once; plus independence
// of the thread count and the dispatch from cpu::conv2d_backward_filters. bfloat16's AVX512_BF16
// loop (depthwise_filters_bf16.cpp) is also checked against the float32-FMA loop bit for bit.
#include "backend/cpu/depthwise_filters.h"

#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/conv.h"
#include "backend/cpu/conv_reference.h"
#include "backend/cpu/depthwise_filters_bf16.h"
#include "core/convert_kernels.h"
#include "support/depthwise_test_helpers.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::normal;

struct DwCase {
  std::int64_t n, h, w, c, k, stride;
  bool same;
  std::int64_t dilation = 1;
  std::string label() const {
    return "n" + std::to_string(n) + " " + std::to_string(h) + "x" + std::to_string(w) + " c" +
           std::to_string(c) + " k" + std::to_string(k) + " s" + std::to_string(stride) +
           (same ? " same" : " valid") + " d" + std::to_string(dilation);
  }
};

ConvGeometry geometry(const DwCase& c) {
  return testing::depthwise_geometry(c.n, c.h, c.w, c.c, c.k, c.k, c.stride, c.dilation, c.same);
}

const std::vector<DwCase> kCases = {
    {1, 7, 9, 5, 3, 1, true},      {3, 7, 9, 5, 3, 1, false},    {1, 9, 7, 19, 3, 2, true},
    {3, 9, 7, 19, 3, 2, false},    {1, 11, 13, 33, 5, 1, true},  {3, 11, 13, 33, 5, 2, true},
    {3, 12, 10, 67, 5, 1, false},  {1, 13, 11, 70, 5, 2, false}, {3, 8, 8, 130, 3, 2, true},
    {2, 9, 10, 24, 3, 1, true, 2},
};

// cpu::conv2d_backward_filters (which dispatches to the depthwise kernel) on case c in every dtype
// against the float64 reference, and the 16-bit results against the float32 kernel on the widened
// values rounded once (the same sums in the same order).
void check_against_reference(const DwCase& c, std::uint64_t seed) {
  const ConvGeometry g = geometry(c);
  ASSERT_TRUE(cpu::is_depthwise_geometry(g));
  const Tensor x32 = normal({c.n, c.h, c.w, c.c}, seed);
  const Tensor dy32 = normal({c.n, g.out_h, g.out_w, c.c}, seed + 1);
  for (DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    const Tensor x = x32.to(dtype), dy = dy32.to(dtype);
    const Tensor x64 = x.to(DType::float64), dy64 = dy.to(DType::float64);
    const Tensor exact = cpu::conv2d_reference_backward_filters(x64, dy64, g);
    const Tensor mag = cpu::conv2d_reference_backward_filters(abs(x64), abs(dy64), g);
    const Tensor got = cpu::conv2d_backward_filters(x, dy, g);
    ASSERT_EQ(got.dtype(), dtype);
    ASSERT_EQ(got.shape(), (Shape{c.k, c.k, 1, c.c}));
    const double terms = double(c.n * g.out_h * g.out_w);
    EXPECT_TRUE(testing::within_summation_bound(got, exact, mag, terms))
        << dtype_name(dtype) << " " << c.label();
    if (dtype != DType::float32) {
      const Tensor wide =
          cpu::depthwise_backward_filters(x64.to(DType::float32), dy64.to(DType::float32), g);
      EXPECT_TRUE(all_close(got, wide.to(dtype), {0, 0})) << dtype_name(dtype) << c.label();
    }
  }
}

TEST(DepthwiseFilters, MatchesReferenceAllDtypes) {
  std::uint64_t seed = 900;
  for (const DwCase& c : kCases) {
    check_against_reference(c, seed);
    seed += 2;
  }
}

// The register-blocked loop (kernel width 3 or 5, stride 1 or 2, dilation 1) in every
// combination, 'same' and 'valid', with channel counts that fill its channel blocks exactly
// (128 at width 3: two blocks of 64; 64 at width 5: two of 32), that leave every tail (117 =
// 64 + 32 + 16 + 5 generic channels; 53 = 32 + 16 + 5) and that fill only the narrow block (16).
// 13 columns give edge columns on both sides and interior ones.
TEST(DepthwiseFilters, RegisterBlockedPathsMatchReference) {
  std::uint64_t seed = 2000;
  for (std::int64_t k : {3, 5}) {
    for (std::int64_t stride : {1, 2}) {
      for (bool same : {true, false}) {
        for (std::int64_t channels : {k == 3 ? 128 : 64, k == 3 ? 117 : 53, 16}) {
          check_against_reference({2, 7, 13, channels, k, stride, same}, seed);
          seed += 2;
        }
      }
    }
  }
}

// Rows too narrow for an interior column (every column is an edge column, some taps of each read
// padding), one column (also narrower than the left padding), and channel counts below the narrow
// block (generic loop only).
TEST(DepthwiseFilters, NarrowRowsAndFewChannelsMatchReference) {
  const std::vector<DwCase> cases = {
      {3, 4, 2, 48, 5, 1, true}, {2, 3, 3, 40, 5, 2, true}, {2, 5, 1, 20, 3, 1, true},
      {2, 4, 4, 96, 5, 1, true}, {2, 6, 5, 35, 3, 2, true}, {2, 6, 6, 15, 3, 1, true},
      {2, 6, 7, 8, 5, 2, false}, {2, 4, 1, 24, 5, 1, true}, {1, 3, 1, 16, 5, 2, true},
  };
  std::uint64_t seed = 3000;
  for (const DwCase& c : cases) {
    check_against_reference(c, seed);
    seed += 2;
  }
}

// Enough partial elements (16 blocks * 5 * 5 * 176) for the parallel sum of the partials.
TEST(DepthwiseFilters, ParallelSumMatchesReference) {
  check_against_reference({4, 9, 11, 176, 5, 2, true}, 4000);
}

// An infinite dy at an edge column reaches only the taps that read inside the input: padding adds
// nothing (a zero times inf would be NaN), as in the reference.
TEST(DepthwiseFilters, PaddingAddsNothingForNonFiniteGradients) {
  for (std::int64_t k : {3, 5}) {
    const DwCase c{1, 5, 9, 48, k, 1, true};
    const ConvGeometry g = geometry(c);
    std::vector<float> dy = normal({c.n, g.out_h, g.out_w, c.c}, 51).to_vector<float>();
    dy[0] = std::numeric_limits<float>::infinity();                        // (0, 0, 0, channel 0)
    dy[(g.out_w - 1) * c.c + 1] = std::numeric_limits<float>::infinity();  // last column, ch 1
    const Tensor x = normal({c.n, c.h, c.w, c.c}, 52);
    const Tensor dyt = from_vector(dy, {c.n, g.out_h, g.out_w, c.c});
    const auto exact =
        cpu::conv2d_reference_backward_filters(x.to(DType::float64), dyt.to(DType::float64), g)
            .to_vector<double>();
    for (DType dtype : {DType::float32, DType::bfloat16}) {
      const auto got =
          cpu::depthwise_backward_filters(x.to(dtype), dyt.to(dtype), g).to_vector<double>();
      ASSERT_EQ(got.size(), exact.size());
      int infinite = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        infinite += std::isinf(exact[i]) ? 1 : 0;
        EXPECT_EQ(std::isnan(got[i]), std::isnan(exact[i])) << dtype_name(dtype) << k << " " << i;
        EXPECT_EQ(std::isinf(got[i]), std::isinf(exact[i])) << dtype_name(dtype) << k << " " << i;
      }
      // Row 0's taps kh >= k / 2 read x; of the columns' kw, the padded ones stay finite.
      EXPECT_EQ(infinite, 2 * (k / 2 + 1) * (k / 2 + 1)) << dtype_name(dtype) << " k" << k;
    }
  }
}

TEST(DepthwiseFilters, IndependentOfThreadCount) {
  // The first sums its partials on the calling thread, the second in parallel; bfloat16 runs the
  // AVX512_BF16 loop where the CPU has it.
  for (const DwCase& c : {DwCase{3, 17, 15, 48, 5, 1, true}, DwCase{4, 9, 11, 176, 5, 2, true},
                          DwCase{4, 16, 16, 144, 3, 1, true}}) {
    for (DType dtype : {DType::float32, DType::bfloat16}) {
      const ConvGeometry g = geometry(c);
      const Tensor x = normal({c.n, c.h, c.w, c.c}, 31).to(dtype);
      const Tensor dy = normal({c.n, g.out_h, g.out_w, c.c}, 32).to(dtype);
      const int threads = omp_get_max_threads();
      omp_set_num_threads(1);
      const auto one = cpu::depthwise_backward_filters(x, dy, g).to_vector<float>();
      omp_set_num_threads(3);
      const auto three = cpu::depthwise_backward_filters(x, dy, g).to_vector<float>();
      omp_set_num_threads(threads);
      EXPECT_EQ(one, three) << dtype_name(dtype) << " " << c.label();
    }
  }
}

TEST(DepthwiseFilters, OnlyOneFilterPerChannelIsDepthwise) {
  ConvGeometry g = geometry({1, 5, 5, 4, 3, 1, true});
  EXPECT_TRUE(cpu::is_depthwise_geometry(g));
  g.out_channels = 8;  // channel multiplier 2: oneDNN's path
  EXPECT_FALSE(cpu::is_depthwise_geometry(g));
  g.out_channels = 4, g.groups = 2;
  EXPECT_FALSE(cpu::is_depthwise_geometry(g));
  g.groups = 1;
  EXPECT_FALSE(cpu::is_depthwise_geometry(g));
}

TEST(DepthwiseFilters, EmptyBatchGivesZeros) {
  const ConvGeometry g = geometry({0, 5, 5, 3, 3, 1, true});
  const Tensor dw =
      cpu::conv2d_backward_filters(normal({0, 5, 5, 3}, 1), normal({0, 5, 5, 3}, 2), g);
  EXPECT_EQ(dw.to_vector<float>(), std::vector<float>(27, 0.0f));
}

// Channel counts for the AVX512_BF16 loop's blocks: 16 (one ymm block), 32 (one zmm block), 48
// (32 + 16), 96 (64 + 32 at kernel width 3, three of 32 at width 5), 144 (2 * 64 + 16 at width 3,
// 4 * 32 + 16 at width 5) and 1168 (1152 + 16); 40 leaves 8 channels to the generic loop.
const std::vector<std::int64_t> kBf16Channels = {16, 32, 40, 48, 96, 144, 1168};

bool bf16_dot_runs() {
  cpu::depthwise::set_bf16_dot_allowed(true);
  return cpu::depthwise::bf16_dot_in_use();
}

constexpr const char* kNoBf16Dot =
    "the CPU lacks AVX512_BF16: bfloat16 runs the float32-FMA loop, nothing to compare";

// Every kind of the register-blocked loop (on a CPU with AVX512_BF16, bfloat16's vdpbf16ps loop)
// against the float64 reference, odd and even widths, 'same' and 'valid', all channel blocks.
TEST(DepthwiseFilters, Bf16DotLoopMatchesReference) {
  std::uint64_t seed = 5000;
  for (std::int64_t k : {3, 5}) {
    for (std::int64_t stride : {1, 2}) {
      for (bool same : {true, false}) {
        for (std::int64_t width : {6, 13}) {
          for (std::int64_t channels : kBf16Channels) {
            check_against_reference({2, 6, width, channels, k, stride, same}, seed);
            seed += 2;
          }
        }
      }
    }
  }
}

// EfficientNet-B0's small depthwise shapes at 64x64 input: rows of at most 4 columns, where every
// column of a 5-wide kernel reads padding.
TEST(DepthwiseFilters, EfficientNetSmallShapesMatchReference) {
  const std::vector<DwCase> cases = {
      {2, 4, 4, 480, 3, 1, true},  {2, 4, 4, 672, 5, 1, true},  {2, 4, 4, 672, 5, 2, true},
      {2, 2, 2, 1152, 5, 1, true}, {2, 2, 2, 1152, 3, 1, true}, {2, 8, 8, 240, 3, 2, true},
  };
  std::uint64_t seed = 6000;
  for (const DwCase& c : cases) {
    check_against_reference(c, seed);
    seed += 2;
  }
}

// The float32 sums of the vdpbf16ps loop for filter row kh and output rows [r0, r1), starting from
// `start`, against the same sums added one std::fma at a time in the float32-FMA loop's order
// (rows, then columns, increasing): equal bit for bit, the channels from the returned one on
// untouched.
void check_dot_sums(const DwCase& c, std::int64_t kh, std::int64_t r0, std::int64_t r1,
                    std::uint64_t seed) {
  const ConvGeometry g = geometry(c);
  const auto x = normal({c.n, c.h, c.w, c.c}, seed).to(DType::bfloat16);
  const auto dy = normal({c.n, g.out_h, g.out_w, c.c}, seed + 1).to(DType::bfloat16);
  const std::vector<float> xf = x.to_vector<float>(), dyf = dy.to_vector<float>();
  const std::int64_t C = c.c;
  const std::vector<float> start = normal({g.kernel_w * C}, seed + 2).to_vector<float>();
  std::vector<float> got = start, want = start;
  const cpu::depthwise::RowPlan plan = cpu::depthwise::plan_rows(g);
  ASSERT_NE(plan.kind, 0) << c.label();
  const std::int64_t end = cpu::depthwise::blocked_channels_bf16_dot(
      static_cast<const bfloat16*>(x.data_ptr()), static_cast<const bfloat16*>(dy.data_ptr()), g,
      plan, {kh, r0, r1}, got.data());
  ASSERT_EQ(end, C - C % 16) << c.label();
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t n = r / g.out_h, ih = r % g.out_h * g.stride_h - g.pad_top + kh;
    if (ih < 0 || ih >= g.in_h) continue;
    for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
      for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const std::int64_t iw = ow * g.stride_w - g.pad_left + kw;
        if (iw < 0 || iw >= g.in_w) continue;
        for (std::int64_t ch = 0; ch < end; ++ch) {
          float& a = want[kw * C + ch];
          a = std::fma(xf[((n * g.in_h + ih) * g.in_w + iw) * C + ch],
                       dyf[(r * g.out_w + ow) * C + ch], a);
        }
      }
    }
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << c.label() << " kh " << kh << " rows " << r0 << ".." << r1
                               << " tap " << i / C << " channel " << i % C;
  }
}

TEST(DepthwiseFilters, Bf16DotSumsEqualFmaOrderBitForBit) {
  if (!bf16_dot_runs()) GTEST_SKIP() << kNoBf16Dot;
  std::uint64_t seed = 7000;
  for (std::int64_t k : {3, 5}) {
    for (std::int64_t stride : {1, 2}) {
      for (bool same : {true, false}) {
        for (std::int64_t width : {1, 2, 4, 5, 12, 13}) {
          for (std::int64_t channels : kBf16Channels) {
            const DwCase c{2, 5, width, channels, k, stride, same};
            const ConvGeometry g = geometry(c);
            if (g.out_w < 1) continue;  // 'valid' narrower than the kernel
            const std::int64_t rows = c.n * g.out_h;
            check_dot_sums(c, k / 2, 0, rows, seed);      // every row, from the first
            check_dot_sums(c, 0, 1, rows - 1, seed + 3);  // from inside an image, padded rows
            seed += 6;
          }
        }
      }
    }
  }
}

// The whole kernel with the vdpbf16ps loop and with the float32-FMA loop (forced by the test hook):
// the same bfloat16 results.
TEST(DepthwiseFilters, Bf16DotLoopEqualsFmaLoopBitForBit) {
  if (!bf16_dot_runs()) GTEST_SKIP() << kNoBf16Dot;
  std::uint64_t seed = 8000;
  for (std::int64_t k : {3, 5}) {
    for (std::int64_t stride : {1, 2}) {
      for (std::int64_t width : {4, 7, 16}) {
        for (std::int64_t channels : kBf16Channels) {
          const DwCase c{3, 9, width, channels, k, stride, true};
          const ConvGeometry g = geometry(c);
          const Tensor x = normal({c.n, c.h, c.w, c.c}, seed).to(DType::bfloat16);
          const Tensor dy = normal({c.n, g.out_h, g.out_w, c.c}, seed + 1).to(DType::bfloat16);
          const auto dot = cpu::depthwise_backward_filters(x, dy, g).to_vector<float>();
          cpu::depthwise::set_bf16_dot_allowed(false);
          const auto fma = cpu::depthwise_backward_filters(x, dy, g).to_vector<float>();
          cpu::depthwise::set_bf16_dot_allowed(true);
          EXPECT_EQ(dot, fma) << c.label();
          seed += 2;
        }
      }
    }
  }
}

// The conversion paths' limit below avx512_bf16 and the test hook both turn the loop off.
TEST(DepthwiseFilters, Bf16DotFollowsConvertIsaAndHook) {
  if (!bf16_dot_runs()) GTEST_SKIP() << kNoBf16Dot;
  const core::ConvertIsa before = core::set_convert_isa_limit(core::ConvertIsa::avx512);
  EXPECT_FALSE(cpu::depthwise::bf16_dot_in_use());
  core::set_convert_isa_limit(before);
  EXPECT_TRUE(cpu::depthwise::bf16_dot_in_use());
  EXPECT_TRUE(cpu::depthwise::set_bf16_dot_allowed(false));
  EXPECT_FALSE(cpu::depthwise::bf16_dot_in_use());
  EXPECT_FALSE(cpu::depthwise::set_bf16_dot_allowed(true));
  EXPECT_TRUE(cpu::depthwise::bf16_dot_in_use());
}

}  // namespace
}  // namespace mixprec
