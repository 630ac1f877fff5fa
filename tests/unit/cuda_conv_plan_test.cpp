// Host-side decisions of the cuDNN convolution (backend/cuda/conv.h), testable without a GPU: the
// accumulation and math types chosen per dtype, the split of TensorFlow's asymmetric `same` padding
// into explicit padding plus cuDNN's symmetric padding, the plan-cache key and its hash, and the
// workspace limit (scaled to the device, its environment override) and the screening under it. Also
// the host-side plans of the other convolutional-network kernels: the work split of the depthwise
// filter gradient and of the batch-norm sums, and the bilinear-resize tables.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "backend/cuda/batch_norm.h"
#include "backend/cuda/conv.h"
#include "backend/cuda/depthwise.h"
#include "backend/cuda/image.h"
#include "mixprec/error.h"
#include "ops/window.h"

namespace mixprec::cuda::detail {
namespace {

TEST(CudaConvPlanTest, AccumulationFollowsTheDtypeTable) {
  EXPECT_EQ(conv_compute(DType::float32, Accumulation::float32), ConvCompute::float32);
  EXPECT_EQ(conv_compute(DType::float32, Accumulation::compute_dtype), ConvCompute::float32);
  EXPECT_EQ(conv_compute(DType::float16, Accumulation::float32), ConvCompute::float32);
  EXPECT_EQ(conv_compute(DType::float16, Accumulation::compute_dtype), ConvCompute::float16);
  // cuDNN has no bfloat16 accumulation: bfloat16 always accumulates in float32.
  EXPECT_EQ(conv_compute(DType::bfloat16, Accumulation::compute_dtype), ConvCompute::float32);
  EXPECT_EQ(conv_compute(DType::bfloat16, Accumulation::float32), ConvCompute::float32);
  EXPECT_EQ(conv_compute(DType::float64, Accumulation::float32), ConvCompute::float64);
}

TEST(CudaConvPlanTest, TensorCoresOnlyWhereAllowed) {
  EXPECT_EQ(conv_math(DType::float32, false), ConvMath::fma);  // true float32 unless TF32 is on
  EXPECT_EQ(conv_math(DType::float32, true), ConvMath::tensor_op);
  EXPECT_EQ(conv_math(DType::float16, false), ConvMath::tensor_op);
  EXPECT_EQ(conv_math(DType::bfloat16, false), ConvMath::tensor_op);
  EXPECT_EQ(conv_math(DType::float64, true), ConvMath::fma);
}

ConvGeometry geometry(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                      std::int64_t dilation, Padding padding) {
  ConvGeometry g;
  g.batch = 2, g.in_channels = 3, g.out_channels = 4, g.groups = 1;
  g.in_h = in, g.in_w = in + 1;
  g.kernel_h = kernel, g.kernel_w = kernel;
  g.stride_h = g.stride_w = stride;
  g.dilation_h = g.dilation_w = dilation;
  const ops::WindowDim h =
      ops::window_dim("t", "height", g.in_h, kernel, stride, dilation, padding);
  const ops::WindowDim w = ops::window_dim("t", "width", g.in_w, kernel, stride, dilation, padding);
  g.pad_top = h.pad_before, g.pad_bottom = h.pad_after, g.out_h = h.out;
  g.pad_left = w.pad_before, g.pad_right = w.pad_after, g.out_w = w.out;
  return g;
}

TEST(CudaConvPlanTest, AsymmetricSamePaddingBecomesExplicitRowsPlusSymmetricPadding) {
  // in 6, kernel 3, stride 2, same: TensorFlow pads 0 on top and 1 at the bottom.
  const CudnnPadding p = cudnn_padding(geometry(6, 3, 2, 1, Padding::same));
  EXPECT_EQ(p.pad_h, 0);
  EXPECT_EQ(p.extra_bottom, 1);
  // in 5, kernel 3, stride 1: 1 and 1, nothing explicit.
  const CudnnPadding q = cudnn_padding(geometry(5, 3, 1, 1, Padding::same));
  EXPECT_EQ(q.pad_h, 1);
  EXPECT_EQ(q.extra_bottom, 0);
}

// For every small geometry: cuDNN's output size on the explicitly padded input equals ours, and
// every tap of every output reads the same input row as ours, inside cuDNN's padded extent.
TEST(CudaConvPlanTest, CudnnGeometryReadsTheSameRowsAsTensorFlowPadding) {
  int checked = 0;
  for (Padding padding : {Padding::same, Padding::valid}) {
    for (std::int64_t in = 1; in <= 12; ++in) {
      for (std::int64_t kernel = 1; kernel <= 5; ++kernel) {
        for (std::int64_t stride = 1; stride <= 3; ++stride) {
          for (std::int64_t dilation = 1; dilation <= 2; ++dilation) {
            const std::int64_t window = dilation * (kernel - 1) + 1;
            if (padding == Padding::valid && window > in) continue;
            const ConvGeometry g = geometry(in, kernel, stride, dilation, padding);
            const CudnnPadding p = cudnn_padding(g);
            SCOPED_TRACE(::testing::Message() << "in " << in << " kernel " << kernel << " stride "
                                              << stride << " dilation " << dilation);
            ASSERT_GE(p.extra_bottom, 0);
            ASSERT_LE(p.extra_bottom, 1);
            ASSERT_GE(p.extra_right, 0);
            ASSERT_LE(p.extra_right, 1);
            const std::int64_t padded = in + p.extra_bottom;
            // cuDNN: out = (in' + 2 pad - window) / stride + 1.
            EXPECT_EQ((padded + 2 * p.pad_h - window) / stride + 1, g.out_h);
            for (std::int64_t o = 0; o < g.out_h; ++o) {
              for (std::int64_t k = 0; k < kernel; ++k) {
                const std::int64_t ours = o * stride - g.pad_top + k * dilation;
                const std::int64_t theirs = o * stride - p.pad_h + k * dilation;
                EXPECT_EQ(ours, theirs);
                // Inside [-pad, padded + pad): rows >= in are the explicit zeros.
                EXPECT_GE(theirs, -p.pad_h);
                EXPECT_LT(theirs, padded + p.pad_h);
                // A row ours treats as padding (outside [0, in)) is zero for cuDNN too.
                if (ours >= in) EXPECT_LT(ours, padded + p.pad_h);
              }
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
}

TEST(CudaConvPlanTest, PlanKeyDescribesWhatCudnnSees) {
  ConvGeometry g = geometry(6, 3, 2, 1, Padding::same);
  g.groups = 1;
  const ConvPlanKey k = make_plan_key(1, ConvPass::backward_data, g, DType::float16,
                                      Accumulation::compute_dtype, false);
  EXPECT_EQ(k.device, 1);
  EXPECT_EQ(k.pass, ConvPass::backward_data);
  EXPECT_EQ(k.dtype, DType::float16);
  EXPECT_EQ(k.compute, ConvCompute::float16);
  EXPECT_EQ(k.math, ConvMath::tensor_op);
  EXPECT_EQ(k.in_h, 7);  // 6 + the explicit bottom row
  EXPECT_EQ(k.in_w, 7);  // width 7: 1 and 1, symmetric, nothing explicit
  EXPECT_EQ(k.pad_h, 0);
  EXPECT_EQ(k.pad_w, 1);
  EXPECT_EQ(k.batch, 2);
  EXPECT_EQ(k.in_channels, 3);
  EXPECT_EQ(k.out_channels, 4);
  EXPECT_EQ(k.stride_h, 2);
}

TEST(CudaConvPlanTest, EveryFieldOfTheKeySeparatesPlans) {
  const ConvPlanKey base = make_plan_key(0, ConvPass::forward, geometry(9, 3, 1, 1, Padding::same),
                                         DType::float32, Accumulation::float32, false);
  std::vector<ConvPlanKey> keys(20, base);
  keys[1].device = 1;
  keys[2].pass = ConvPass::backward_filters;
  keys[3].dtype = DType::bfloat16;
  keys[4].compute = ConvCompute::float16;
  keys[5].math = ConvMath::tensor_op;
  keys[6].batch += 1;
  keys[7].in_h += 1;
  keys[8].in_w += 1;
  keys[9].in_channels += 3;
  keys[10].out_channels += 1;
  keys[11].kernel_h += 1;
  keys[12].kernel_w += 1;
  keys[13].groups = 3;
  keys[14].pad_h += 1;
  keys[15].pad_w += 1;
  keys[16].stride_h += 1;
  keys[17].stride_w += 1;
  keys[18].dilation_h += 1;
  keys[19].dilation_w += 1;
  const ConvPlanKeyHash hash;
  std::unordered_set<ConvPlanKey, ConvPlanKeyHash> set;
  std::unordered_set<std::size_t> hashes;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) EXPECT_FALSE(keys[i] == base) << "field " << i;
    set.insert(keys[i]);
    hashes.insert(hash(keys[i]));
  }
  EXPECT_EQ(set.size(), keys.size());
  EXPECT_EQ(hashes.size(), keys.size());  // no collisions among these neighbours
  // Equal keys hash equally and find each other.
  const ConvPlanKey copy = base;
  EXPECT_EQ(hash(copy), hash(base));
  EXPECT_EQ(set.count(copy), 1u);
}

TEST(CudaConvPlanTest, WorkspaceLimitScalesWithTheDeviceWithinFloorAndCap) {
  constexpr std::size_t kMiB = std::size_t{1} << 20, kGiB = std::size_t{1} << 30;
  EXPECT_EQ(kConvWorkspaceFloor, 256 * kMiB);
  EXPECT_EQ(kConvWorkspaceCap, 4 * kGiB);
  // Small devices keep the old fixed 256 MiB (a sixteenth of 4 GiB is exactly the floor).
  EXPECT_EQ(conv_workspace_limit(0), 256 * kMiB);
  EXPECT_EQ(conv_workspace_limit(2 * kGiB), 256 * kMiB);
  EXPECT_EQ(conv_workspace_limit(4 * kGiB), 256 * kMiB);
  // In between, a sixteenth of the memory.
  EXPECT_EQ(conv_workspace_limit(16 * kGiB), kGiB);
  EXPECT_EQ(conv_workspace_limit(24 * kGiB), 1536 * kMiB);
  EXPECT_EQ(conv_workspace_limit(40 * kGiB), 2560 * kMiB);
  // Enough for ResNet-50 float32's IMPLICIT_PRECOMP_GEMM at batch 256 (392-980 MiB) from 16 GiB.
  EXPECT_GE(conv_workspace_limit(16 * kGiB), 980 * kMiB);
  // An 80 GB H100 (cudaDeviceProp::totalGlobalMem 85,020,000,256 bytes) and larger: the cap.
  EXPECT_EQ(conv_workspace_limit(std::size_t{85020000256}), 4 * kGiB);
  EXPECT_EQ(conv_workspace_limit(std::size_t{150} * kGiB), 4 * kGiB);
  EXPECT_EQ(conv_workspace_limit(std::numeric_limits<std::size_t>::max()), 4 * kGiB);
}

TEST(CudaConvPlanTest, WorkspaceOverrideIsWholeMebibytes) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  EXPECT_FALSE(workspace_override(nullptr).has_value());
  EXPECT_FALSE(workspace_override("").has_value());
  EXPECT_EQ(workspace_override("0"), std::size_t{0});
  EXPECT_EQ(workspace_override("512"), 512 * kMiB);
  EXPECT_EQ(workspace_override("8192"), 8192 * kMiB);
  for (const char* bad : {"-1", "1.5", "256MiB", " 256", "abc", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(workspace_override(bad), ValueError);
  }
  try {
    workspace_override("lots");
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("MIXPREC_CUDNN_WORKSPACE_MIB"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("lots"), std::string::npos);
  }
}

TEST(CudaConvPlanTest, RankedResultsAreScreenedByStatusWorkspaceAndMathRule) {
  using detail::ConvMath;
  using detail::ConvScreen;
  using detail::screen_result;
  const std::size_t limit = conv_workspace_limit(std::size_t{80} << 30);  // an 80 GiB device
  EXPECT_EQ(screen_result(true, 0, limit, false, false, ConvMath::fma), ConvScreen::usable);
  EXPECT_EQ(screen_result(true, 0, limit, true, false, ConvMath::tensor_op), ConvScreen::usable);
  EXPECT_EQ(screen_result(false, 0, limit, false, false, ConvMath::fma), ConvScreen::failed);
  EXPECT_EQ(screen_result(true, limit + 1, limit, false, false, ConvMath::fma),
            ConvScreen::workspace);
  EXPECT_EQ(screen_result(true, limit, limit, false, false, ConvMath::fma), ConvScreen::usable);
  // ResNet-50's 980 MiB IMPLICIT_PRECOMP_GEMM: over a small device's limit, within an 80 GiB one's.
  const std::size_t precomp = std::size_t{980} << 20;
  EXPECT_EQ(screen_result(true, precomp, conv_workspace_limit(std::size_t{4} << 30), false, false,
                          ConvMath::fma),
            ConvScreen::workspace);
  EXPECT_EQ(screen_result(true, precomp, limit, false, false, ConvMath::fma), ConvScreen::usable);
  // A zero limit (MIXPREC_CUDNN_WORKSPACE_MIB=0) keeps only algorithms without workspace.
  EXPECT_EQ(screen_result(true, 0, 0, false, false, ConvMath::fma), ConvScreen::usable);
  EXPECT_EQ(screen_result(true, 1, 0, false, false, ConvMath::fma), ConvScreen::workspace);
  // True float32 never takes TF32 tensor cores; nothing ever computes float32 data in float16.
  EXPECT_EQ(screen_result(true, 0, limit, true, false, ConvMath::fma), ConvScreen::tensor_cores);
  EXPECT_EQ(screen_result(true, 0, limit, false, true, ConvMath::tensor_op),
            ConvScreen::conversion);
  EXPECT_STREQ(detail::screen_name(ConvScreen::tensor_cores),
               "tensor cores (TF32) where true float32 is asked");
}

TEST(CudaConvPlanTest, DepthwiseFilterGradientChunksCoverTheRows) {
  // A window the all-taps kernel does not take (multiplier 2): chunks of (N, OH) rows.
  kernels::DepthwiseGeometry g;
  g.batch = 4, g.out_h = 10, g.out_w = 10, g.channels = 32, g.multiplier = 2;
  g.kernel_h = 3, g.kernel_w = 3;
  // Rounding every partial sum fixes the order: one chunk.
  EXPECT_EQ(kernels::depthwise_filter_chunks(g, Accumulation::compute_dtype), 1);
  const std::int64_t chunks = kernels::depthwise_filter_chunks(g, Accumulation::float32);
  EXPECT_GE(chunks, 1);
  EXPECT_LE(chunks, g.batch * g.out_h);  // never more chunks than rows
  // A huge filter leaves one chunk; a tiny one as many as there are rows.
  g.channels = 1 << 20;
  EXPECT_EQ(kernels::depthwise_filter_chunks(g, Accumulation::float32), 1);
  g.channels = 1, g.kernel_h = g.kernel_w = 1, g.multiplier = 1, g.batch = 64, g.out_h = 112;
  EXPECT_EQ(kernels::depthwise_filter_chunks(g, Accumulation::float32), 64 * 112);
}

TEST(CudaConvPlanTest, DepthwiseAllTapsChunksFillTheGpuWithinBounds) {
  // Square 3x3 / 5x5, multiplier 1: chunks of output pixels, each thread a channel pair.
  kernels::DepthwiseGeometry g;
  g.batch = 64, g.out_h = g.out_w = 112, g.channels = 32, g.kernel_h = g.kernel_w = 3;
  EXPECT_EQ(kernels::depthwise_filter_chunks(g, Accumulation::compute_dtype), 1);
  // EfficientNet-B0's first depthwise layer: 16 channel pairs; 2^17 threads would need 8192
  // chunks, so the cap of 4096 (the second pass reads chunks * E partials) applies.
  EXPECT_EQ(kernels::depthwise_filter_chunks(g, Accumulation::float32), 4096);
  // Its last 5x5 layer at 7x7: 576 pairs; 2^17 / 576 -> 228 chunks, but at least 16 pixels each:
  // ceil(64 * 49 / 16) = 196.
  g.out_h = g.out_w = 7, g.channels = 1152, g.kernel_h = g.kernel_w = 5;
  EXPECT_EQ(kernels::depthwise_filter_chunks(g, Accumulation::float32), 196);
  // Odd channel counts round the pairs up; a tiny input leaves one chunk.
  g.channels = 1151;
  EXPECT_EQ(kernels::depthwise_filter_chunks(g, Accumulation::float32), 196);
  g.batch = 1, g.out_h = g.out_w = 2;
  EXPECT_EQ(kernels::depthwise_filter_chunks(g, Accumulation::float32), 1);
  // Enough threads where the pixels allow: 96 channels at 56x56, batch 64.
  g.batch = 64, g.out_h = g.out_w = 56, g.channels = 96, g.kernel_h = g.kernel_w = 3;
  const std::int64_t chunks = kernels::depthwise_filter_chunks(g, Accumulation::float32);
  EXPECT_EQ(chunks, (std::int64_t{1} << 17) / 48 + 1);  // ceil(2^17 / 48 pairs)
}

TEST(CudaConvPlanTest, BatchNormPartsStayWithinTheRows) {
  EXPECT_EQ(kernels::batch_norm_parts(DType::float32, 1, 3), 1);
  EXPECT_EQ(kernels::batch_norm_parts(DType::float32, 5, 3), 5);
  // 32 channels of float16: 4 vectors of 8 per row; 2^17 threads would need 32768 parts: capped.
  EXPECT_EQ(kernels::batch_norm_parts(DType::float16, 401408, 32), 8192);
  // float32: 4 per vector, 8 vectors per row: 16384 parts wanted, capped.
  EXPECT_EQ(kernels::batch_norm_parts(DType::float32, 401408, 32), 8192);
  // 1152 channels of bfloat16: 144 vectors, 2^17 / 144 = 910 parts.
  EXPECT_EQ(kernels::batch_norm_parts(DType::bfloat16, 401408, 1152), 910);
  // 3 channels (no vector): 2^17 / 3 -> capped at 8192; a huge C leaves one part.
  EXPECT_EQ(kernels::batch_norm_parts(DType::float16, 401408, 3), 8192);
  EXPECT_EQ(kernels::batch_norm_parts(DType::float32, 1000, std::int64_t{1} << 20), 1);
}

TEST(CudaConvPlanTest, ResizeTapsUseHalfPixelCenters) {
  // 4 -> 8: s = (o + 0.5) / 2 - 0.5 = o / 2 - 0.25, clamped at 0; the last output repeats row 3.
  const std::vector<ResizeTap> t = resize_taps(4, 8, DType::float32);
  ASSERT_EQ(t.size(), 8u);
  const std::int64_t i0[] = {0, 0, 0, 1, 1, 2, 2, 3};
  const double w[] = {0, 0.25, 0.75, 0.25, 0.75, 0.25, 0.75, 0};
  for (int o = 0; o < 8; ++o) {
    EXPECT_EQ(t[o].i0, i0[o]) << o;
    EXPECT_EQ(t[o].i1, std::min<std::int64_t>(i0[o] + 1, 3)) << o;
    EXPECT_DOUBLE_EQ(t[o].w, w[o]) << o;
  }
  // 3 -> 2 (downsampling by 1.5): s = 0.25 and 1.75.
  const std::vector<ResizeTap> d = resize_taps(3, 2, DType::float64);
  EXPECT_EQ(d[0].i0, 0);
  EXPECT_DOUBLE_EQ(d[0].w, 0.25);
  EXPECT_EQ(d[1].i0, 1);
  EXPECT_DOUBLE_EQ(d[1].w, 0.75);
  // float32 weights are float values: 1/3 rounds.
  const std::vector<ResizeTap> f = resize_taps(1, 3, DType::float32);
  for (const ResizeTap& tap : f) {
    EXPECT_EQ(tap.i0, 0);
    EXPECT_EQ(tap.i1, 0);
    EXPECT_EQ(tap.w, 0);
  }
  const std::vector<ResizeTap> third = resize_taps(2, 3, DType::float32);
  EXPECT_EQ(third[1].w, static_cast<double>(static_cast<float>(0.5)));
}

// The adjoint tables hold exactly the forward weights, transposed, in increasing output order.
TEST(CudaConvPlanTest, ResizeSourcesAreTheTransposeOfTheTaps) {
  for (DType dtype : {DType::float32, DType::float64}) {
    for (std::int64_t in : {1, 2, 3, 5, 8}) {
      for (std::int64_t out : {1, 2, 4, 7, 16}) {
        SCOPED_TRACE(::testing::Message() << in << " -> " << out);
        const std::vector<ResizeTap> t = resize_taps(in, out, dtype);
        std::map<std::pair<std::int64_t, std::int64_t>, double> forward, adjoint;
        for (std::int64_t o = 0; o < out; ++o) {
          const ResizeTap& tap = t[static_cast<std::size_t>(o)];
          const double one_minus = dtype == DType::float64
                                       ? 1.0 - tap.w
                                       : static_cast<double>(1.0f - static_cast<float>(tap.w));
          forward[{tap.i0, o}] += one_minus;
          if (tap.w != 0) forward[{tap.i1, o}] += tap.w;
        }
        const ResizeSources s = resize_sources(t, in, dtype);
        ASSERT_EQ(s.first.size(), static_cast<std::size_t>(in) + 1);
        EXPECT_EQ(s.first.front(), 0);
        EXPECT_EQ(static_cast<std::size_t>(s.first.back()), s.source.size());
        for (std::int64_t i = 0; i < in; ++i) {
          std::int64_t previous = -1;
          for (std::int64_t k = s.first[i]; k < s.first[i + 1]; ++k) {
            EXPECT_GE(s.source[k], previous);  // output order
            previous = s.source[k];
            adjoint[{i, s.source[k]}] += s.weight[k];
          }
        }
        EXPECT_EQ(adjoint, forward);
        // Each output's weights sum to 1 (up to the rounding of 1 - w).
        std::vector<double> total(static_cast<std::size_t>(out), 0.0);
        for (const auto& [key, value] : adjoint)
          total[static_cast<std::size_t>(key.second)] += value;
        for (double v : total) EXPECT_NEAR(v, 1.0, 1e-7);
      }
    }
  }
}

}  // namespace
}  // namespace mixprec::cuda::detail
