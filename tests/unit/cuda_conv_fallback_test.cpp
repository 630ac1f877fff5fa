// Host-side logic of the cuDNN convolution's refusals and fallbacks (backend/cuda/conv.h), and the
// padding arithmetic of the asymmetric `same` geometries of ResNet/EfficientNet, without a GPU:
// cuDNN 9's status categories (3000-3014 are all "not supported"), the candidate list that moves
// on past a refused algorithm (fake statuses), what a pass falls back to when none is left, how a
// forward adds its bias, and TensorFlow's padding split into explicit rows plus cuDNN's symmetric
// padding for 3x3 stride 2 on even inputs, 2x2 stride 1 and 7x7 stride 2 on 224.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/conv.h"
#include "ops/window.h"

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define MIXPREC_TEST_HAS_CUDNN_H 1
#endif

namespace mixprec::cuda::detail {
namespace {

TEST(CudaConvFallbackTest, EveryNotSupportedCodeIsARefusal) {
  for (int code = 3000; code <= 3014; ++code) {
    EXPECT_EQ(cudnn_status_category(code), kCudnnNotSupportedCategory) << code;
    EXPECT_TRUE(cudnn_refused(code)) << code;
  }
  EXPECT_TRUE(cudnn_refused(3999));
  // Success, bad parameters (2000s), internal errors (4000s), execution failures (5000s): not
  // refusals (a real error is reported, not retried with another algorithm).
  for (int code : {0, 1, 2000, 2002, 2999, 4000, 4001, 5000, 5003}) {
    EXPECT_FALSE(cudnn_refused(code)) << code;
  }
#if defined(MIXPREC_TEST_HAS_CUDNN_H)
  // The constants agree with cuDNN 9's header.
  EXPECT_EQ(static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED), kCudnnNotSupportedCategory);
  for (int code : {static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED_SHAPE),
                   static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE),
                   static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT),
                   static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED_PADDING),
                   static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)}) {
    EXPECT_EQ(CUDNN_STATUS_CATEGORY(code), cudnn_status_category(code)) << code;
    EXPECT_TRUE(cudnn_refused(code)) << code;
  }
  EXPECT_FALSE(cudnn_refused(static_cast<int>(CUDNN_STATUS_SUCCESS)));
  EXPECT_FALSE(cudnn_refused(static_cast<int>(CUDNN_STATUS_BAD_PARAM)));
  EXPECT_FALSE(cudnn_refused(static_cast<int>(CUDNN_STATUS_EXECUTION_FAILED)));
#endif
}

// Fake executions: statuses[i] is what candidate i "returns"; `tried` records the order.
struct Fake {
  std::vector<int> statuses;
  std::vector<int> tried;
  int operator()(int i) {
    tried.push_back(i);
    return statuses[static_cast<std::size_t>(i)];
  }
};

TEST(CudaConvFallbackTest, RefusedCandidatesAreSkippedInOrder) {
  Fake f{{3002, 3011, 0, 0}, {}};
  const CandidateRun r = run_candidates(4, 0, std::ref(f));
  EXPECT_EQ(r.ran, 2);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.refused, 2);
  EXPECT_EQ(r.next, 2);  // later calls start at the one that ran
  EXPECT_EQ(f.tried, (std::vector<int>{0, 1, 2}));
}

TEST(CudaConvFallbackTest, TheFusedBiasPathAlsoTakesBadParamAsARefusal) {
  EXPECT_EQ(refusal_rule(ConvPass::forward_bias), Refusal::not_supported_or_bad_param);
  for (ConvPass pass : {ConvPass::forward, ConvPass::backward_data, ConvPass::backward_filters}) {
    EXPECT_EQ(refusal_rule(pass), Refusal::not_supported);
  }
  EXPECT_TRUE(is_refusal(2000, Refusal::not_supported_or_bad_param));
  EXPECT_TRUE(is_refusal(2002, Refusal::not_supported_or_bad_param));
  EXPECT_FALSE(is_refusal(2000, Refusal::not_supported));
  EXPECT_TRUE(is_refusal(3003, Refusal::not_supported));
  EXPECT_FALSE(is_refusal(5000, Refusal::not_supported_or_bad_param));
  EXPECT_FALSE(is_refusal(0, Refusal::not_supported_or_bad_param));
  // Through the candidate list: a BAD_PARAM candidate is skipped on the fused path only.
  Fake f{{2000, 0}, {}};
  EXPECT_EQ(run_candidates(2, 0, std::ref(f), Refusal::not_supported_or_bad_param).ran, 1);
  Fake g{{2000, 0}, {}};
  const CandidateRun strict = run_candidates(2, 0, std::ref(g));
  EXPECT_EQ(strict.ran, 0);
  EXPECT_EQ(strict.status, 2000);  // reported by the caller as an error
}

TEST(CudaConvFallbackTest, AFirstCandidateThatRunsIsTheOnlyOneTried) {
  Fake f{{0, 3000}, {}};
  const CandidateRun r = run_candidates(2, 0, std::ref(f));
  EXPECT_EQ(r.ran, 0);
  EXPECT_EQ(r.refused, 0);
  EXPECT_EQ(r.next, 0);
  EXPECT_EQ(f.tried, (std::vector<int>{0}));
}

TEST(CudaConvFallbackTest, ARealErrorStopsTheSearchAndIsReported) {
  Fake f{{3003, 5000, 0}, {}};  // EXECUTION_FAILED: not a refusal, not retried
  const CandidateRun r = run_candidates(3, 0, std::ref(f));
  EXPECT_EQ(r.ran, 1);
  EXPECT_EQ(r.status, 5000);
  EXPECT_EQ(f.tried, (std::vector<int>{0, 1}));
}

TEST(CudaConvFallbackTest, AllRefusedLeavesNothingToTryAgain) {
  Fake f{{3000, 3014, 3007}, {}};
  const CandidateRun r = run_candidates(3, 0, std::ref(f));
  EXPECT_EQ(r.ran, -1);
  EXPECT_EQ(r.refused, 3);
  EXPECT_EQ(r.next, 3);
  // A later call starting at `next` tries nothing (the caller's fallback).
  Fake g{{0, 0, 0}, {}};
  const CandidateRun again = run_candidates(3, r.next, std::ref(g));
  EXPECT_EQ(again.ran, -1);
  EXPECT_TRUE(g.tried.empty());
  // An empty list (the heuristic offered nothing acceptable) is the same.
  EXPECT_EQ(run_candidates(0, 0, std::ref(g)).ran, -1);
}

TEST(CudaConvFallbackTest, ALaterCallResumesPastTheRefusedOnes) {
  Fake f{{3002, 0, 0}, {}};
  const CandidateRun first = run_candidates(3, 0, std::ref(f));
  Fake g{{3002, 0, 0}, {}};
  const CandidateRun second = run_candidates(3, first.next, std::ref(g));
  EXPECT_EQ(second.ran, 1);
  EXPECT_EQ(g.tried, (std::vector<int>{1}));  // the refused candidate 0 is not tried again
}

ConvGeometry same_geometry(std::int64_t in_h, std::int64_t in_w, std::int64_t kernel,
                           std::int64_t stride) {
  ConvGeometry g;
  g.batch = 1, g.in_channels = 3, g.out_channels = 8, g.groups = 1;
  g.in_h = in_h, g.in_w = in_w, g.kernel_h = g.kernel_w = kernel;
  g.stride_h = g.stride_w = stride;
  const ops::WindowDim h = ops::window_dim("t", "height", in_h, kernel, stride, 1, Padding::same);
  const ops::WindowDim w = ops::window_dim("t", "width", in_w, kernel, stride, 1, Padding::same);
  g.pad_top = h.pad_before, g.pad_bottom = h.pad_after, g.out_h = h.out;
  g.pad_left = w.pad_before, g.pad_right = w.pad_after, g.out_w = w.out;
  return g;
}

TEST(CudaConvFallbackTest, WhenNothingIsLeftEachKeyHasItsFallback) {
  const ConvGeometry g = same_geometry(8, 8, 3, 2);
  const ConvPlanKey half = make_plan_key(0, ConvPass::backward_data, g, DType::float16,
                                         Accumulation::compute_dtype, false);
  EXPECT_EQ(when_exhausted(half), WhenExhausted::accumulate_in_float32);
  const ConvPlanKey wide = fallback_key(half);
  EXPECT_EQ(wide.compute, ConvCompute::float32);
  EXPECT_EQ(wide.dtype, DType::float16);
  EXPECT_EQ(wide.pass, ConvPass::backward_data);
  EXPECT_EQ(when_exhausted(wide), WhenExhausted::fail);  // nothing further: DeviceError

  const ConvPlanKey biased =
      make_plan_key(0, ConvPass::forward_bias, g, DType::bfloat16, Accumulation::float32, false);
  EXPECT_EQ(when_exhausted(biased), WhenExhausted::float32_output);
  const ConvPlanKey out32 = fallback_key(biased);
  EXPECT_EQ(out32.pass, ConvPass::forward);
  EXPECT_EQ(out32.dtype, DType::float32);
  EXPECT_EQ(out32.compute, ConvCompute::float32);
  EXPECT_EQ(out32.math, ConvMath::tensor_op);  // 16-bit values are exact in TF32
  EXPECT_EQ(out32.in_h, biased.in_h);
  EXPECT_EQ(out32.pad_h, biased.pad_h);

  for (DType dtype : {DType::float32, DType::float64}) {
    const ConvPlanKey k =
        make_plan_key(0, ConvPass::forward, g, dtype, Accumulation::float32, true);
    EXPECT_EQ(when_exhausted(k), WhenExhausted::fail);
  }
}

TEST(CudaConvFallbackTest, SixteenBitBiasIsAddedBeforeTheRounding) {
  EXPECT_EQ(conv_bias(DType::float16, Accumulation::float32, true), ConvBias::fused);
  EXPECT_EQ(conv_bias(DType::bfloat16, Accumulation::float32, true), ConvBias::fused);
  // bfloat16 always accumulates in float32 (conv_compute), so compute_dtype fuses too.
  EXPECT_EQ(conv_bias(DType::bfloat16, Accumulation::compute_dtype, true), ConvBias::fused);
  // float16 accumulation rounds every partial sum anyway: the separate add stays.
  EXPECT_EQ(conv_bias(DType::float16, Accumulation::compute_dtype, true), ConvBias::after);
  EXPECT_EQ(conv_bias(DType::float32, Accumulation::float32, true), ConvBias::after);
  EXPECT_EQ(conv_bias(DType::float64, Accumulation::float32, true), ConvBias::after);
  EXPECT_EQ(conv_bias(DType::float16, Accumulation::float32, false), ConvBias::none);
}

TEST(CudaConvFallbackTest, FusedBiasKeysAreTheirOwnPlans) {
  const ConvGeometry g = same_geometry(8, 8, 3, 2);
  const ConvPlanKey plain =
      make_plan_key(0, ConvPass::forward, g, DType::float16, Accumulation::float32, false);
  const ConvPlanKey fused =
      make_plan_key(0, ConvPass::forward_bias, g, DType::float16, Accumulation::float32, false);
  EXPECT_FALSE(plain == fused);
  EXPECT_NE(ConvPlanKeyHash()(plain), ConvPlanKeyHash()(fused));
}

// The asymmetric `same` geometries (issue 16, item 4): TensorFlow's split, the explicit rows, and
// the output size cuDNN computes on the explicitly padded input.
struct SameCase {
  std::int64_t in_h, in_w, kernel, stride;
  std::int64_t out_h, pad_top, pad_bottom, out_w, pad_left, pad_right;
};

TEST(CudaConvFallbackTest, AsymmetricSamePaddingOfTheCommonStemsAndDownsamplers) {
  const SameCase cases[] = {
      {8, 10, 3, 2, 4, 0, 1, 5, 0, 1},         // 3x3 stride 2, even input
      {56, 56, 3, 2, 28, 0, 1, 28, 0, 1},      // a ResNet/EfficientNet downsampling 3x3
      {5, 6, 2, 1, 5, 0, 1, 6, 0, 1},          // 2x2 stride 1
      {224, 224, 7, 2, 112, 2, 3, 112, 2, 3},  // the ResNet stem
      {32, 30, 7, 2, 16, 2, 3, 15, 2, 3},      // 7x7 stride 2, small
      {9, 7, 3, 2, 5, 1, 1, 4, 1, 1},          // control: odd input, symmetric
  };
  for (const SameCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << c.in_h << "x" << c.in_w << " kernel " << c.kernel << " stride " << c.stride);
    const ConvGeometry g = same_geometry(c.in_h, c.in_w, c.kernel, c.stride);
    EXPECT_EQ(g.out_h, c.out_h);
    EXPECT_EQ(g.pad_top, c.pad_top);
    EXPECT_EQ(g.pad_bottom, c.pad_bottom);
    EXPECT_EQ(g.out_w, c.out_w);
    EXPECT_EQ(g.pad_left, c.pad_left);
    EXPECT_EQ(g.pad_right, c.pad_right);
    const CudnnPadding p = cudnn_padding(g);
    EXPECT_EQ(p.pad_h, c.pad_top);
    EXPECT_EQ(p.pad_w, c.pad_left);
    EXPECT_EQ(p.extra_bottom, c.pad_bottom - c.pad_top);
    EXPECT_EQ(p.extra_right, c.pad_right - c.pad_left);
    // cuDNN's output extent on the padded input equals TensorFlow's.
    EXPECT_EQ((c.in_h + p.extra_bottom + 2 * p.pad_h - c.kernel) / c.stride + 1, c.out_h);
    EXPECT_EQ((c.in_w + p.extra_right + 2 * p.pad_w - c.kernel) / c.stride + 1, c.out_w);
    // The last output row's window reaches the explicit zero rows exactly when the split is
    // asymmetric: rows in + 0 .. in + extra_bottom - 1 are read, none beyond.
    const std::int64_t last_row = (c.out_h - 1) * c.stride - p.pad_h + c.kernel - 1;
    EXPECT_EQ(last_row, c.in_h - 1 + c.pad_bottom);
    EXPECT_LE(last_row, c.in_h + p.extra_bottom + p.pad_h - 1);
    const ConvPlanKey k =
        make_plan_key(0, ConvPass::backward_data, g, DType::float16, Accumulation::float32, false);
    EXPECT_EQ(k.in_h, c.in_h + p.extra_bottom);  // dx is computed padded, then sliced to in_h
    EXPECT_EQ(k.in_w, c.in_w + p.extra_right);
  }
}

// A candidate whose workspace the device cannot hold is passed over like a refused one: the next
// one (less workspace) runs, and later calls start past it (no allocation retried every step).
TEST(CudaConvFallbackTest, AWorkspaceTheDeviceCannotHoldIsPassedOver) {
  Fake f{{kWorkspaceUnavailable, 0}, {}};
  const CandidateRun r = run_candidates(2, 0, std::ref(f));
  EXPECT_EQ(r.ran, 1);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.short_of_memory, 1);
  EXPECT_EQ(r.refused, 0);
  EXPECT_EQ(r.next, 1);
  Fake g{{3002, kWorkspaceUnavailable, 3011, 0}, {}};
  const CandidateRun mixed = run_candidates(4, 0, std::ref(g));
  EXPECT_EQ(mixed.ran, 3);
  EXPECT_EQ(mixed.refused, 2);
  EXPECT_EQ(mixed.short_of_memory, 1);
  EXPECT_EQ(mixed.next, 3);
  EXPECT_EQ(g.tried, (std::vector<int>{0, 1, 2, 3}));
  // Every candidate short of memory: nothing ran (the caller reports out of memory, not "no
  // algorithm", and leaves its plan as it was).
  Fake h{{kWorkspaceUnavailable, kWorkspaceUnavailable}, {}};
  const CandidateRun none = run_candidates(2, 0, std::ref(h));
  EXPECT_EQ(none.ran, -1);
  EXPECT_EQ(none.short_of_memory, 2);
  EXPECT_EQ(none.refused, 0);
  EXPECT_FALSE(is_refusal(kWorkspaceUnavailable, Refusal::not_supported_or_bad_param));
}

}  // namespace
}  // namespace mixprec::cuda::detail
