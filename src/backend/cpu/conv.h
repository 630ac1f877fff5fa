// CPU 2-D convolution on oneDNN, NHWC: forward, backward data and backward weights (filters).
// The op layer (src/ops/conv.cpp) validates and builds the geometry; the backend's NnKernels table
// (cpu/nn_kernels.cpp) sends float64 and 16-bit accumulation to the plain loops of
// conv_reference.h instead.
#pragma once

#include <cstdint>
#include <optional>

#include "backend/cpu/dnnl_context.h"
#include "core/window_geometry.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// All tensors are contiguous, on the CPU, of one dtype: float32, float16 or bfloat16.
// float32 runs the float32 primitive. bfloat16 runs the native bf16 primitive when
// use_native_bf16() (float32 accumulation inside oneDNN, one rounding on store); float16, and
// bfloat16 otherwise, are widened exactly to float32, computed in float32 and rounded once (oneDNN
// 2.6 has no float16 convolution on CPU). Either way the 16-bit result is the float32 result of
// the stored 16-bit values rounded once, up to float32 summation order.

// y (batch, out_h, out_w, out_channels) = x * filters (+ bias (out_channels) when defined).
Tensor conv2d_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                      const ConvGeometry& g);
// dx (batch, in_h, in_w, in_channels) from dy (batch, out_h, out_w, out_channels).
Tensor conv2d_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g);
// dfilters (kernel_h, kernel_w, in_channels / groups, out_channels) from x and dy, summed over
// the batch and the output positions.
Tensor conv2d_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g);

// Pointwise convolutions (conv_pointwise.h) and convolutions with few output positions
// (conv_im2col.h) run as matmuls unless this is off: set_conv_gemm_paths' value if one was set,
// else the environment (MIXPREC_CONV_GEMM=0 sends every convolution to oneDNN's convolution
// primitives; for A/B measurements and for tests comparing the two). Thread-safe.
bool conv_gemm_paths_enabled();
// Overrides the environment; nullopt restores it.
void set_conv_gemm_paths(std::optional<bool> enabled);

// The conv primitives (all three passes) are cached by geometry, data type and bias, least
// recently used first out beyond the capacity. Thread-safe.
PrimitiveCacheStats conv_cache_stats();
void clear_conv_cache();

}  // namespace mixprec::cpu
