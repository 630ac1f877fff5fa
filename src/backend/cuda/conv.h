// CUDA 2-D convolution (mirrors cpu/conv.h) on cuDNN 9's convolution API
// (cudnnConvolutionForward / BackwardData / BackwardFilter), NHWC activations, same geometry struct
// as the CPU (ConvGeometry: Keras HWIO filters, TensorFlow `same` padding with the odd
// row/column at the bottom/right). The op layer (src/ops/conv.cpp) validates and builds the
// geometry; depthwise convolutions go to depthwise.h instead (cuda/nn_kernels.cpp chooses).
//
// Numerics (DESIGN §2.4): float32 accumulates in float32 with FMA-only kernels, or TF32 tensor
// cores when enable_tensor_float_32_execution(true); float16 and bfloat16 run tensor-core kernels
// accumulating in float32; float16 with Accumulation::compute_dtype accumulates in float16 (cuDNN's
// TRUE_HALF configuration; where cuDNN has no such kernel for a shape, float32); bfloat16 has no
// 16-bit accumulation in cuDNN and stays float32; float64 computes in double. Each pass keeps the
// acceptable algorithms of cuDNN's heuristics (within the workspace limit, best first) or, with
// MIXPREC_CUDNN_BENCHMARK=1 in the environment, of a timed search on the first call
// (cudnnFind*AlgorithmEx), cached per (device, pass, shapes, parameters, dtype, compute type, math
// type); it runs the first one cuDNN does not refuse at execution (any status of the
// NOT_SUPPORTED category, cuDNN 9's 3000-3014) and remembers the refusals (detail::run_candidates).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "backend/cpu/conv.h"
#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

// All tensors contiguous or not, on one CUDA device, of one floating dtype; shapes as in cpu/conv.h
// (filters in HWIO). bias may be undefined. Return new contiguous tensors.
//
// What the forward builds for cuDNN and the backward needs again: the input with TensorFlow's
// extra bottom row / right column of zeros (cuDNN pads symmetrically, see CudnnPadding) and the
// filters in cuDNN's KRSC order. The op layer keeps them in its autograd node instead of x and the
// HWIO filters (the same sizes; ConvSaved with ConvSavedForm::prepared, see cuda/nn_kernels.cpp),
// so the backward passes do not rebuild them: pass `prepared` to
// the forward, then prepared->krsc to conv2d_backward_data and prepared->input to
// conv2d_backward_filters (which then ignores x).
struct ConvPrepared {
  Tensor input;  // (N, H + extra_bottom, W + extra_right, Cin) contiguous (x itself when unpadded)
  Tensor krsc;   // (Cout, KH, KW, Cin / G) contiguous
};
//
// A bias on float16/bfloat16 data is added to the float32 result before the one rounding to the
// data type (as the CPU does): cuDNN's fused convolution + bias + identity activation, or, where
// cuDNN refuses it, a float32-output convolution of the same (exactly widened) values + bias,
// rounded once. float32 and float64 add the bias after the convolution (one rounding either way);
// 16-bit accumulation (Accumulation::compute_dtype) rounds every partial sum to 16 bits anyway and
// keeps the separate add.
Tensor conv2d_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                      const ConvGeometry& g, Accumulation accumulation,
                      ConvPrepared* prepared = nullptr);
Tensor conv2d_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g,
                            Accumulation accumulation, const Tensor& krsc = Tensor());
Tensor conv2d_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g,
                               Accumulation accumulation, const Tensor& prepared_input = Tensor());

struct ConvCacheStats {
  std::int64_t entries = 0;  // cached plans (descriptors + algorithm candidates)
  std::int64_t hits = 0;
  std::int64_t misses = 0;         // each one a heuristic query (or a timed search)
  std::int64_t refusals = 0;       // candidates cuDNN refused at execution (NOT_SUPPORTED class)
  std::int64_t padded_inputs = 0;  // explicitly zero-padded inputs built
  std::int64_t krsc_filters = 0;   // HWIO -> KRSC filter copies built
  std::int64_t float32_bias_paths = 0;  // 16-bit biased forwards run by the float32-output path
};
ConvCacheStats conv_cache_stats();

// ---- host-side decisions, exposed for tests/unit/cuda_conv_plan_test.cpp ----
namespace detail {

// forward_bias: cudnnConvolutionBiasActivationForward with the identity activation (16-bit data
// with a bias: the bias is added before the one rounding).
enum class ConvPass { forward, backward_data, backward_filters, forward_bias };
// cuDNN's compute (accumulation) type of a call.
enum class ConvCompute { float32, float16, float64 };
// fma: no tensor cores (true float32, and float64); tensor_op: tensor cores (16-bit data; TF32
// for float32 when allowed).
enum class ConvMath { fma, tensor_op };

ConvCompute conv_compute(DType dtype, Accumulation accumulation);
ConvMath conv_math(DType dtype, bool tf32_allowed);

// cuDNN's legacy API pads symmetrically. TensorFlow's `same` may pad one more row (column) at the
// bottom (right); such an input is zero-padded explicitly by `extra_bottom` rows and `extra_right`
// columns first, and cuDNN pads the rest symmetrically by (pad_h, pad_w). The padded input is then
// (in_h + extra_bottom, in_w + extra_right) and the output size is unchanged:
// (in_h + extra_bottom + 2 pad_h - window_h) / stride_h + 1 == out_h.
struct CudnnPadding {
  int pad_h = 0, pad_w = 0;
  std::int64_t extra_bottom = 0, extra_right = 0;
};
CudnnPadding cudnn_padding(const ConvGeometry& g);

// Everything that determines a cuDNN plan (descriptors and algorithm). Sizes are those cuDNN sees:
// the explicitly padded input extent and the symmetric padding.
struct ConvPlanKey {
  int device = 0;
  ConvPass pass = ConvPass::forward;
  DType dtype = DType::float32;
  ConvCompute compute = ConvCompute::float32;
  ConvMath math = ConvMath::fma;
  std::int64_t batch = 0, in_h = 0, in_w = 0, in_channels = 0;
  std::int64_t out_channels = 0, kernel_h = 0, kernel_w = 0, groups = 1;
  std::int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  bool operator==(const ConvPlanKey&) const = default;
};
struct ConvPlanKeyHash {
  std::size_t operator()(const ConvPlanKey& k) const;
};

ConvPlanKey make_plan_key(int device, ConvPass pass, const ConvGeometry& g, DType dtype,
                          Accumulation accumulation, bool tf32_allowed);

// cuDNN 9 groups its status codes in categories of a thousand (cudnn_graph.h,
// CUDNN_STATUS_CATEGORY): 3000 is CUDNN_STATUS_NOT_SUPPORTED and 3001-3014 its specific reasons
// (shape, data type, layout, padding, shared memory, ...). A refusal of any of them means "this
// algorithm/configuration cannot run this problem": try the next one, never fail the step.
inline constexpr int kCudnnNotSupportedCategory = 3000;
constexpr int cudnn_status_category(int status) { return status / 1000 * 1000; }
constexpr bool cudnn_refused(int status) {
  return cudnn_status_category(status) == kCudnnNotSupportedCategory;
}
// Which statuses count as a refusal. The fused bias path (cudnnConvolutionBiasActivationForward)
// has under-documented type rules (the bias's type under 16-bit data, bfloat16 at all) and a
// correct fallback, so there a BAD_PARAM-class status (2000-2999) also means "not this way";
// everywhere else it is a real error, reported.
inline constexpr int kCudnnBadParamCategory = 2000;
enum class Refusal { not_supported, not_supported_or_bad_param };
constexpr bool is_refusal(int status, Refusal rule) {
  return cudnn_refused(status) || (rule == Refusal::not_supported_or_bad_param &&
                                   cudnn_status_category(status) == kCudnnBadParamCategory);
}
Refusal refusal_rule(ConvPass pass);

// The heuristic's (or the timed search's) acceptable algorithms are kept in its order; a pass
// runs the first one not yet refused. run_candidates executes candidates [first, count) with
// `execute(i)` (returning cuDNN's status as an int) until one is not refused: `ran` is its index
// (its status, success or a real error, in `status`), or -1 when every one was refused; `next` is
// where the following call should start (the refused ones are never tried again).
// kWorkspaceUnavailable (no cuDNN status: they are non-negative) is what execute returns when the
// candidate's workspace could not be allocated (the device is out of memory after the cache was
// released): that candidate is passed over like a refused one (`short_of_memory` counts them), so
// the next one, with less workspace, runs instead of the step failing. It is not tried again
// either: a training loop repeats the same shapes under the same memory pressure, and every
// failed attempt would release the allocator's cache.
inline constexpr int kWorkspaceUnavailable = -1;
struct CandidateRun {
  int ran = -1;
  int status = 0;
  int refused = 0;
  int short_of_memory = 0;
  int next = 0;
};
template <typename Execute>
CandidateRun run_candidates(int count, int first, Execute&& execute,
                            Refusal rule = Refusal::not_supported) {
  CandidateRun r;
  r.next = first;
  for (int i = first; i < count; ++i) {
    const int status = execute(i);
    const bool short_of_memory = status == kWorkspaceUnavailable;
    if (short_of_memory || is_refusal(status, rule)) {
      ++(short_of_memory ? r.short_of_memory : r.refused);
      r.next = i + 1;
      continue;
    }
    r.ran = i;
    r.status = status;
    return r;
  }
  r.next = count;
  return r;
}

// What a pass does when no candidate of its key is left (none offered, or all refused): a float16
// key with 16-bit accumulation (TRUE_HALF, few NHWC kernels) retries with float32 accumulation;
// a biased 16-bit forward retries as a float32-output convolution + bias (round once); any other
// key fails with DeviceError.
enum class WhenExhausted { accumulate_in_float32, float32_output, fail };
WhenExhausted when_exhausted(const ConvPlanKey& key);
// The key of that retry (the same geometry).
ConvPlanKey fallback_key(const ConvPlanKey& key);

// How a forward adds its bias (see conv2d_forward).
enum class ConvBias { none, after, fused };
ConvBias conv_bias(DType dtype, Accumulation accumulation, bool has_bias);

// The most workspace one cuDNN call may take (from the caching allocator) on a device with
// `device_total_bytes` of memory: algorithms that want more are skipped. A sixteenth of the
// device's memory, at least kConvWorkspaceFloor and at most kConvWorkspaceCap. The workspace is
// transient (allocated for the call, released stream-ordered after it, so one is live per stream),
// and a fixed 256 MiB made cuDNN drop its fast algorithms on large problems: ResNet-50 float32 at
// batch 256 wants 392-980 MiB for IMPLICIT_PRECOMP_GEMM; with the plain IMPLICIT_GEMM a step took
// 4.5 times as long per image as at batch 16 (H100). 256 MiB (the old fixed limit) stays the floor
// for GPUs of 4 GiB or less; 16 GiB gets 1 GiB, 40 GiB 2.5 GiB, an 80 GB H100 the 4 GiB cap
// (TensorFlow's default cuDNN workspace limit).
inline constexpr std::size_t kConvWorkspaceFloor = std::size_t{256} << 20;
inline constexpr std::size_t kConvWorkspaceCap = std::size_t{4} << 30;
std::size_t conv_workspace_limit(std::size_t device_total_bytes);
// MIXPREC_CUDNN_WORKSPACE_MIB=<n> sets the limit to n MiB on every device instead (0: algorithms
// without workspace only). The variable's text: nothing when unset or empty, else n MiB in bytes;
// ValueError naming the variable when it is not a non-negative integer of MiB that fits.
std::optional<std::size_t> workspace_override(const char* text);

// The first screening of one of cuDNN's ranked results (heuristic or timed) for a key: usable, or
// why not. A usable result is then set up under its math type and its workspace re-read.
// `tensor_op` and `conversion`: the result's math type is CUDNN_TENSOR_OP_MATH, or
// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION (float32 data computed in float16: never taken).
enum class ConvScreen { usable, failed, workspace, conversion, tensor_cores };
// `limit`: the device's workspace limit (conv_workspace_limit or the override).
ConvScreen screen_result(bool succeeded, std::size_t workspace, std::size_t limit, bool tensor_op,
                         bool conversion, ConvMath rule);
const char* screen_name(ConvScreen screen);

// MIXPREC_CUDNN_LOG=1: each new convolution plan writes one line to stderr: the pass, dtype, math
// rule and geometry, and every result cuDNN ranked with what became of it (a diagnostic for
// slow convolutions, e.g. which algorithms true float32 is left with).
bool conv_log_enabled();

}  // namespace detail

}  // namespace mixprec::cuda
