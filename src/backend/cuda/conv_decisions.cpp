// The host-side decisions of the CUDA convolution (conv.h, namespace detail): plan keys and their
// hash, the compute type and math rule of a call, what to do when cuDNN refuses every algorithm,
// how a forward adds its bias, the workspace limit and the screening of cuDNN's ranked results. No
// cuDNN call: unit tests run all of it without a GPU (tests/unit/cuda_conv_plan_test.cpp).
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "backend/cuda/conv.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace detail {

ConvCompute conv_compute(DType dtype, Accumulation accumulation) {
  if (dtype == DType::float64) return ConvCompute::float64;
  // bfloat16 has no 16-bit accumulation in cuDNN: it stays float32 (as the cuBLASLt matmul does).
  if (dtype == DType::float16 && accumulation == Accumulation::compute_dtype) {
    return ConvCompute::float16;
  }
  return ConvCompute::float32;
}

ConvMath conv_math(DType dtype, bool tf32_allowed) {
  if (dtype == DType::float64) return ConvMath::fma;
  if (dtype == DType::float32) return tf32_allowed ? ConvMath::tensor_op : ConvMath::fma;
  return ConvMath::tensor_op;
}

CudnnPadding cudnn_padding(const ConvGeometry& g) {
  // TensorFlow's rule gives pad_bottom - pad_top (pad_right - pad_left) of 0 or 1; `valid` pads 0.
  CudnnPadding p;
  p.pad_h = static_cast<int>(g.pad_top);
  p.pad_w = static_cast<int>(g.pad_left);
  p.extra_bottom = g.pad_bottom - g.pad_top;
  p.extra_right = g.pad_right - g.pad_left;
  return p;
}

std::size_t ConvPlanKeyHash::operator()(const ConvPlanKey& k) const {
  std::size_t h = 0;
  const auto mix = [&h](std::int64_t v) {
    h ^= std::hash<std::int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  for (std::int64_t v : {std::int64_t{k.device}, static_cast<std::int64_t>(k.pass),
                         static_cast<std::int64_t>(k.dtype), static_cast<std::int64_t>(k.compute),
                         static_cast<std::int64_t>(k.math), k.batch, k.in_h, k.in_w, k.in_channels,
                         k.out_channels, k.kernel_h, k.kernel_w, k.groups, k.pad_h, k.pad_w,
                         k.stride_h, k.stride_w, k.dilation_h, k.dilation_w}) {
    mix(v);
  }
  return h;
}

ConvPlanKey make_plan_key(int device, ConvPass pass, const ConvGeometry& g, DType dtype,
                          Accumulation accumulation, bool tf32_allowed) {
  const CudnnPadding p = cudnn_padding(g);
  ConvPlanKey k;
  k.device = device;
  k.pass = pass;
  k.dtype = dtype;
  k.compute = conv_compute(dtype, accumulation);
  k.math = conv_math(dtype, tf32_allowed);
  k.batch = g.batch, k.in_h = g.in_h + p.extra_bottom, k.in_w = g.in_w + p.extra_right;
  k.in_channels = g.in_channels, k.out_channels = g.out_channels;
  k.kernel_h = g.kernel_h, k.kernel_w = g.kernel_w, k.groups = g.groups;
  k.pad_h = p.pad_h, k.pad_w = p.pad_w;
  k.stride_h = g.stride_h, k.stride_w = g.stride_w;
  k.dilation_h = g.dilation_h, k.dilation_w = g.dilation_w;
  return k;
}

Refusal refusal_rule(ConvPass pass) {
  return pass == ConvPass::forward_bias ? Refusal::not_supported_or_bad_param
                                        : Refusal::not_supported;
}

WhenExhausted when_exhausted(const ConvPlanKey& key) {
  if (key.pass == ConvPass::forward_bias) return WhenExhausted::float32_output;
  if (key.compute == ConvCompute::float16) return WhenExhausted::accumulate_in_float32;
  return WhenExhausted::fail;
}

ConvPlanKey fallback_key(const ConvPlanKey& key) {
  ConvPlanKey k = key;
  switch (when_exhausted(key)) {
    case WhenExhausted::accumulate_in_float32: k.compute = ConvCompute::float32; break;
    case WhenExhausted::float32_output:
      // float16/bfloat16 values widen exactly to float32, and their products are exact in TF32
      // (11 significant bits each, 22 in the product): tensor-core math loses nothing here.
      k.pass = ConvPass::forward;
      k.dtype = DType::float32;
      k.compute = ConvCompute::float32;
      k.math = ConvMath::tensor_op;
      break;
    case WhenExhausted::fail: break;
  }
  return k;
}

ConvBias conv_bias(DType dtype, Accumulation accumulation, bool has_bias) {
  if (!has_bias) return ConvBias::none;
  if (is_16bit_float(dtype) && conv_compute(dtype, accumulation) == ConvCompute::float32) {
    return ConvBias::fused;
  }
  return ConvBias::after;
}

std::size_t conv_workspace_limit(std::size_t device_total_bytes) {
  const std::size_t share = device_total_bytes / 16;
  return share < kConvWorkspaceFloor ? kConvWorkspaceFloor
                                     : (share > kConvWorkspaceCap ? kConvWorkspaceCap : share);
}

std::optional<std::size_t> workspace_override(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  std::size_t mib = 0;
  for (const char* c = text; *c != '\0'; ++c) {
    const bool digit = *c >= '0' && *c <= '9';
    if (!digit || mib > (std::numeric_limits<std::size_t>::max() / kMiB - 9) / 10) {
      throw ValueError(std::string("MIXPREC_CUDNN_WORKSPACE_MIB must be a whole number of MiB, ") +
                       "got '" + text + "'");
    }
    mib = mib * 10 + static_cast<std::size_t>(*c - '0');
  }
  return mib * kMiB;
}

ConvScreen screen_result(bool succeeded, std::size_t workspace, std::size_t limit, bool tensor_op,
                         bool conversion, ConvMath rule) {
  if (!succeeded) return ConvScreen::failed;
  if (workspace > limit) return ConvScreen::workspace;
  if (conversion) return ConvScreen::conversion;  // float32 data computed in float16: never
  if (tensor_op && rule == ConvMath::fma) return ConvScreen::tensor_cores;  // true float32
  return ConvScreen::usable;
}

const char* screen_name(ConvScreen screen) {
  switch (screen) {
    case ConvScreen::usable: return "usable";
    case ConvScreen::failed: return "not available";
    case ConvScreen::workspace: return "workspace over the limit";
    case ConvScreen::conversion: return "would compute float32 data in float16";
    case ConvScreen::tensor_cores: return "tensor cores (TF32) where true float32 is asked";
  }
  return "";
}

bool conv_log_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("MIXPREC_CUDNN_LOG");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

}  // namespace detail

}  // namespace mixprec::cuda
