// CUDA 2-D convolution (mirrors cpu/conv.h) on cuDNN 9's convolution API
// (cudnnConvolutionForward / BackwardData / BackwardFilter), NHWC activations, same geometry struct
// as the CPU (cpu::ConvGeometry: Keras HWIO filters, TensorFlow `same` padding with the odd
// row/column at the bottom/right). The op layer (src/ops/conv.cpp) validates and builds the
// geometry; depthwise convolutions go to depthwise.h instead.
//
// Numerics (DESIGN §2.4): float32 accumulates in float32 with FMA-only kernels, or TF32 tensor
// cores when enable_tensor_float_32_execution(true); float16 and bfloat16 run tensor-core kernels
// accumulating in float32; float16 with Accumulation::compute_dtype accumulates in float16 (cuDNN's
// TRUE_HALF configuration; where cuDNN has no such kernel for a shape, float32); bfloat16 has no
// 16-bit accumulation in cuDNN and stays float32; float64 computes in double. Each pass picks its
// algorithm from cuDNN's heuristics (the first that succeeds within the workspace limit) or, with
// MIXPREC_CUDNN_BENCHMARK=1 in the environment, by timing them on the first call
// (cudnnFind*AlgorithmEx); either choice is cached per (device, pass, shapes, parameters, dtype,
// compute type, math type).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "backend/cpu/conv.h"
#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cuda {

using ConvGeometry = cpu::ConvGeometry;

// All tensors contiguous or not, on one CUDA device, of one floating dtype; shapes as in cpu/conv.h
// (filters in HWIO). bias may be undefined. Return new contiguous tensors.
Tensor conv2d_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                      const ConvGeometry& g, Accumulation accumulation);
Tensor conv2d_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g,
                            Accumulation accumulation);
Tensor conv2d_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g,
                               Accumulation accumulation);

struct ConvCacheStats {
  std::int64_t entries = 0;  // cached plans (descriptors + algorithm)
  std::int64_t hits = 0;
  std::int64_t misses = 0;  // each one a heuristic query (or a timed search)
};
ConvCacheStats conv_cache_stats();

// ---- host-side decisions, exposed for tests/unit/cuda_conv_plan_test.cpp ----
namespace detail {

enum class ConvPass { forward, backward_data, backward_filters };
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

// The most workspace one call may take (from the caching allocator): algorithms that want more
// are skipped.
inline constexpr std::size_t kMaxConvWorkspace = std::size_t{256} << 20;

}  // namespace detail

}  // namespace mixprec::cuda
