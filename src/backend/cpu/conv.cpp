// CPU convolution on oneDNN. Activations go to oneDNN as they are stored (NHWC, format tag nhwc),
// so they are never reordered. The Keras filters (KH, KW, Cin/G, Cout) are described to oneDNN by
// strides (a 4-D (O, I, H, W) desc, or a 5-D (G, O/G, I/G, H, W) one for grouped convolutions),
// and the primitive picks its own blocked filter layout (format tag any); one oneDNN reorder per
// call converts between the two. Filters are small next to activations, and a blocked layout is
// what oneDNN's fast kernels need. Pointwise (1x1) convolutions are matmuls instead
// (conv_pointwise.h), so are convolutions with few output positions (conv_im2col.h), and depthwise
// backward filters are our own kernel (depthwise_filters.h).
// The bias joins the primitive (and matmul_bias) as an argument, added before the one rounding.
// Activations are not fused as oneDNN post-ops: measured on oneDNN 2.6 (matmul and convolution,
// f32 and bf16), its relu, clip, clip_v2 and bounded_relu post-ops map a NaN input to 0, which
// would hide a NaN forward pass from the loss scaler and the user (the CUDA Dense layer refuses
// cuBLASLt's RELU epilogues for the same reason, ops/dense_op.cpp); logistic and tanh keep NaN
// but their fused backward would have to differentiate from the rounded 16-bit output, which is
// wrong where they saturate (the unfused ops recompute from x), for no gain at the 1x1 extents
// of the squeeze-and-excitation gates where CNNs use them.
#include "backend/cpu/conv.h"

#include <array>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cpu/cast.h"
#include "backend/cpu/conv_im2col.h"
#include "backend/cpu/conv_pointwise.h"
#include "backend/cpu/depthwise_conv.h"
#include "backend/cpu/depthwise_filters.h"
#include "backend/cpu/scratch.h"
#include "core/env_switch.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// Forward, backward data and backward filters of every conv layer of a large model, at a few
// batch sizes; beyond it the least recently used primitive is dropped (recompiled on demand).
constexpr std::size_t kCacheCapacity = 512;

enum class Pass : std::int64_t { forward, backward_data, backward_filters };
enum class Bias : std::int64_t { none, present };

// One cached primitive and the memory descriptors to run it with.
struct ConvPrimitive {
  dnnl::primitive primitive;
  dnnl::memory::desc activations;   // src (forward, backward filters) or diff_src: NHWC
  dnnl::memory::desc output;        // dst or diff_dst: NHWC
  dnnl::memory::desc filters;       // weights or diff_weights in the primitive's layout
  dnnl::memory::desc bias;          // forward only; a zero desc when there is none
  dnnl::memory::desc user_filters;  // the Keras (KH, KW, Cin/G, Cout) layout, by strides
  // Converts user_filters -> filters (forward, backward data) or filters -> user_filters
  // (backward filters); absent when the primitive takes the Keras layout as it is.
  bool reorder_filters = false;
  dnnl::reorder filters_reorder;
  std::size_t scratchpad_bytes = 0;
  std::string implementation;
};

dnnl::memory::dims dims2(std::int64_t a, std::int64_t b) { return {a, b}; }

dnnl::memory::desc nhwc(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c, dt type) {
  return dnnl::memory::desc({n, c, h, w}, type, tag::nhwc);
}

// Keras HWIO filters as oneDNN's logical (O, I, KH, KW) or (G, O/G, I/G, KH, KW): element
// (kh, kw, i, g * O/G + o) sits at ((kh * KW + kw) * I/G + i) * Cout + g * O/G + o.
dnnl::memory::desc user_filters_desc(const ConvGeometry& g, dt type) {
  const std::int64_t kh = g.kernel_h, kw = g.kernel_w, icg = g.in_per_group();
  const std::int64_t oc = g.out_channels, ocg = g.out_per_group();
  if (g.groups == 1)
    return dnnl::memory::desc({oc, icg, kh, kw}, type, {1, oc, kw * icg * oc, icg * oc});
  return dnnl::memory::desc({g.groups, ocg, icg, kh, kw}, type,
                            {ocg, 1, oc, kw * icg * oc, icg * oc});
}

dnnl::memory::desc any_filters_desc(const ConvGeometry& g, dt type) {
  const std::int64_t kh = g.kernel_h, kw = g.kernel_w, icg = g.in_per_group();
  if (g.groups == 1) return dnnl::memory::desc({g.out_channels, icg, kh, kw}, type, tag::any);
  return dnnl::memory::desc({g.groups, g.out_per_group(), icg, kh, kw}, type, tag::any);
}

std::string describe(const ConvGeometry& g, dt type) {
  auto s = [](std::int64_t v) { return std::to_string(v); };
  return "x (" + s(g.batch) + ", " + s(g.in_h) + ", " + s(g.in_w) + ", " + s(g.in_channels) +
         "), filters (" + s(g.kernel_h) + ", " + s(g.kernel_w) + ", " + s(g.in_per_group()) + ", " +
         s(g.out_channels) + "), groups " + s(g.groups) + ", strides (" + s(g.stride_h) + ", " +
         s(g.stride_w) + "), dilation (" + s(g.dilation_h) + ", " + s(g.dilation_w) +
         "), padding (" + s(g.pad_top) + ", " + s(g.pad_bottom) + ", " + s(g.pad_left) + ", " +
         s(g.pad_right) + "), " + (type == dt::bf16 ? "bfloat16" : "float32");
}

std::shared_ptr<const ConvPrimitive> create(Pass pass, const ConvGeometry& g, dt type, Bias bias) {
  auto p = std::make_shared<ConvPrimitive>();
  dnnl::engine& engine = dnnl_engine();
  p->activations = nhwc(g.batch, g.in_h, g.in_w, g.in_channels, type);
  p->output = nhwc(g.batch, g.out_h, g.out_w, g.out_channels, type);
  p->user_filters = user_filters_desc(g, type);
  const dnnl::memory::desc filters_any = any_filters_desc(g, type);
  // The bias is float32 in every case (a 16-bit bias is widened by the caller: it is tiny).
  if (bias == Bias::present) p->bias = dnnl::memory::desc({g.out_channels}, dt::f32, tag::a);
  const auto strides = dims2(g.stride_h, g.stride_w);
  const auto dilates = dims2(g.dilation_h - 1, g.dilation_w - 1);  // oneDNN: 0 = no dilation
  const auto pad_l = dims2(g.pad_top, g.pad_left), pad_r = dims2(g.pad_bottom, g.pad_right);
  const auto alg = dnnl::algorithm::convolution_direct;

  dnnl::primitive_attr attr;
  // The scratchpad comes from the mixprec allocator (counted in memory_stats(); concurrent calls
  // of one primitive never share it).
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // The forward descriptor; the backward passes need its primitive_desc as a hint.
  const dnnl::convolution_forward::desc fwd_desc(dnnl::prop_kind::forward_training, alg,
                                                 p->activations, filters_any, p->bias, p->output,
                                                 strides, dilates, pad_l, pad_r);
  const dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, attr, engine);
  dnnl::primitive_desc_base pd = fwd_pd;
  switch (pass) {
    case Pass::forward: {
      p->filters = fwd_pd.weights_desc();
      p->primitive = dnnl::convolution_forward(fwd_pd);
      break;
    }
    case Pass::backward_data: {
      const dnnl::convolution_backward_data::desc desc(alg, p->activations, filters_any, p->output,
                                                       strides, dilates, pad_l, pad_r);
      const dnnl::convolution_backward_data::primitive_desc bwd_pd(desc, attr, engine, fwd_pd);
      p->filters = bwd_pd.weights_desc();
      p->primitive = dnnl::convolution_backward_data(bwd_pd);
      pd = bwd_pd;
      break;
    }
    case Pass::backward_filters: {
      const dnnl::convolution_backward_weights::desc desc(
          alg, p->activations, filters_any, p->output, strides, dilates, pad_l, pad_r);
      const dnnl::convolution_backward_weights::primitive_desc bwd_pd(desc, attr, engine, fwd_pd);
      p->filters = bwd_pd.diff_weights_desc();
      p->primitive = dnnl::convolution_backward_weights(bwd_pd);
      pd = bwd_pd;
      break;
    }
  }
  p->scratchpad_bytes = pd.scratchpad_desc().get_size();
  p->implementation = pd.impl_info_str();
  p->reorder_filters = p->filters != p->user_filters;
  if (p->reorder_filters) {
    const bool to_user = pass == Pass::backward_filters;
    const dnnl::reorder::primitive_desc reorder_pd(engine, to_user ? p->filters : p->user_filters,
                                                   engine, to_user ? p->user_filters : p->filters);
    p->filters_reorder = dnnl::reorder(reorder_pd);
  }
  return p;
}

// Pass, data type, bias and the 18 integers of the geometry.
using Key = std::array<std::int64_t, 21>;

PrimitiveCache<Key, ConvPrimitive>& cache() {
  static PrimitiveCache<Key, ConvPrimitive> instance(kCacheCapacity);
  return instance;
}

// The cached primitive of `pass` for geometry g, data type and bias, keyed by every integer that
// defines one.
std::shared_ptr<const ConvPrimitive> cached_primitive(Pass pass, const ConvGeometry& g, dt type,
                                                      Bias bias) {
  const Key key = {static_cast<std::int64_t>(pass),
                   static_cast<std::int64_t>(type),
                   static_cast<std::int64_t>(bias),
                   g.batch,
                   g.in_h,
                   g.in_w,
                   g.in_channels,
                   g.kernel_h,
                   g.kernel_w,
                   g.out_channels,
                   g.groups,
                   g.stride_h,
                   g.stride_w,
                   g.dilation_h,
                   g.dilation_w,
                   g.pad_top,
                   g.pad_bottom,
                   g.pad_left,
                   g.pad_right,
                   g.out_h,
                   g.out_w};
  return cache().get(key, [&] {
    try {
      return create(pass, g, type, bias);
    } catch (const dnnl::error& e) {
      static constexpr const char* kPass[] = {"forward", "backward data", "backward filters"};
      throw Error(std::string("conv2d: oneDNN cannot create a ") + kPass[static_cast<int>(pass)] +
                  " primitive for " + describe(g, type) + ": " + e.what());
    }
  });
}

dnnl::memory memory_of(const dnnl::memory::desc& desc, const Tensor& t) {
  // oneDNN takes non-const handles; inputs are only read.
  return dnnl::memory(desc, dnnl_engine(), const_cast<void*>(t.data_ptr()));
}

// Runs `p` with `args` plus its scratchpad; `filters` is the user (Keras-layout) filter tensor,
// converted into (or, for backward filters, out of) the primitive's layout around the call. The
// blocked filters and the scratchpad are scratch blocks (scratch.h) from the host allocator's
// block cache for this call: the same sizes come back every step and map no fresh memory.
void execute(const ConvPrimitive& p, Pass pass, std::unordered_map<int, dnnl::memory> args,
             const Tensor& filters) {
  dnnl::stream& stream = dnnl_stream();
  const int filters_arg = pass == Pass::backward_filters ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS;
  const dnnl::memory user = memory_of(p.user_filters, filters);
  Tensor blocked;  // the filters in the primitive's layout, when it differs
  if (p.reorder_filters) {
    blocked = scratch(ScratchSlot::filters, DType::uint8,
                      static_cast<std::int64_t>(p.filters.get_size()));
    args[filters_arg] = memory_of(p.filters, blocked);
    if (pass != Pass::backward_filters) {
      p.filters_reorder.execute(stream, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, args[filters_arg]}});
    }
  } else {
    args[filters_arg] = user;
  }
  Scratchpad pad;
  if (p.scratchpad_bytes > 0) {
    pad = dnnl_scratchpad(p.scratchpad_bytes);
    args[DNNL_ARG_SCRATCHPAD] = pad.memory;
  }
  p.primitive.execute(stream, args);
  if (p.reorder_filters && pass == Pass::backward_filters) {
    p.filters_reorder.execute(stream, {{DNNL_ARG_FROM, args[filters_arg]}, {DNNL_ARG_TO, user}});
  }
  stream.wait();
}

constinit core::EnvSwitch g_gemm_paths("MIXPREC_CONV_GEMM");

bool pointwise_path(const ConvGeometry& g) {
  return conv_gemm_paths_enabled() && is_pointwise_geometry(g);
}

bool im2col_path(const ConvGeometry& g, DType dtype) {
  return conv_gemm_paths_enabled() && is_im2col_geometry(g, dtype);
}

dt data_type(DType dtype) { return dtype == DType::bfloat16 ? dt::bf16 : dt::f32; }

// float16 always, and bfloat16 without native support (or with the fallback forced), run the
// float32 primitive on exactly widened copies and round the result once.
bool via_float32(DType dtype) {
  return dtype == DType::float16 || (dtype == DType::bfloat16 && !use_native_bf16());
}

void check(const char* what, const Tensor& t, const Shape& expected, DType dtype) {
  if (!t.defined() || t.shape() != expected || t.dtype() != dtype || !t.is_contiguous() ||
      !t.device().is_cpu() ||
      !(dtype == DType::float32 || dtype == DType::float16 || dtype == DType::bfloat16)) {
    throw Error(std::string("cpu::conv2d: ") + what + " must be a contiguous CPU " +
                (t.defined() ? std::string(dtype_name(dtype)) : std::string("tensor")) + " " +
                expected.to_string() + " (float32, float16 or bfloat16), got " +
                (t.defined() ? std::string(dtype_name(t.dtype())) + " " + t.shape().to_string()
                             : std::string("an undefined tensor")));
  }
}

Shape x_shape(const ConvGeometry& g) { return Shape{g.batch, g.in_h, g.in_w, g.in_channels}; }
Shape y_shape(const ConvGeometry& g) { return Shape{g.batch, g.out_h, g.out_w, g.out_channels}; }
Shape filters_shape(const ConvGeometry& g) {
  return Shape{g.kernel_h, g.kernel_w, g.in_per_group(), g.out_channels};
}

Tensor widen(const Tensor& t) {
  return t.dtype() == DType::float32 ? t : cpu::cast(t, DType::float32);
}

Tensor forward_dnnl(const Tensor& x, const Tensor& filters, const Tensor& bias32,
                    const ConvGeometry& g) {
  const Bias bias = bias32.defined() ? Bias::present : Bias::none;
  const auto p = cached_primitive(Pass::forward, g, data_type(x.dtype()), bias);
  Tensor y = core::make_tensor(y_shape(g), x.dtype(), Device::cpu());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(p->activations, x)},
                                             {DNNL_ARG_DST, memory_of(p->output, y)}};
  if (bias == Bias::present) args[DNNL_ARG_BIAS] = memory_of(p->bias, bias32);
  execute(*p, Pass::forward, std::move(args), filters);
  return y;
}

Tensor backward_data_dnnl(const Tensor& dy, const Tensor& filters, const ConvGeometry& g) {
  const auto p = cached_primitive(Pass::backward_data, g, data_type(dy.dtype()), Bias::none);
  Tensor dx = core::make_tensor(x_shape(g), dy.dtype(), Device::cpu());
  execute(*p, Pass::backward_data,
          {{DNNL_ARG_DIFF_DST, memory_of(p->output, dy)},
           {DNNL_ARG_DIFF_SRC, memory_of(p->activations, dx)}},
          filters);
  return dx;
}

Tensor backward_filters_dnnl(const Tensor& x, const Tensor& dy, const ConvGeometry& g) {
  const auto p = cached_primitive(Pass::backward_filters, g, data_type(x.dtype()), Bias::none);
  Tensor dfilters = core::make_tensor(filters_shape(g), x.dtype(), Device::cpu());
  execute(
      *p, Pass::backward_filters,
      {{DNNL_ARG_SRC, memory_of(p->activations, x)}, {DNNL_ARG_DIFF_DST, memory_of(p->output, dy)}},
      dfilters);
  return dfilters;
}

}  // namespace

Tensor conv2d_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                      const ConvGeometry& g) {
  const DType dtype = x.dtype();
  check("x", x, x_shape(g), dtype);
  check("filters", filters, filters_shape(g), dtype);
  if (bias.defined()) check("bias", bias, Shape{g.out_channels}, dtype);
  const Tensor bias32 = bias.defined() ? widen(bias) : Tensor();
  // Depthwise: our kernel where it is faster than oneDNN's (depthwise_conv.h).
  if (depthwise_forward_path(g, dtype)) return depthwise_forward(x, filters, bias32, g);
  if (pointwise_path(g)) return pointwise_forward(x, filters, bias32, g);
  if (im2col_path(g, dtype)) return im2col_forward(x, filters, bias32, g);
  if (!via_float32(dtype)) return forward_dnnl(x, filters, bias32, g);
  return cpu::cast(forward_dnnl(widen(x), widen(filters), bias32, g), dtype);
}

Tensor conv2d_backward_data(const Tensor& dy, const Tensor& filters, const ConvGeometry& g) {
  const DType dtype = dy.dtype();
  check("dy", dy, y_shape(g), dtype);
  check("filters", filters, filters_shape(g), dtype);
  if (depthwise_backward_data_path(g, dtype)) return depthwise_backward_data(dy, filters, g);
  if (pointwise_path(g)) return pointwise_backward_data(dy, filters, g);
  if (im2col_path(g, dtype)) return im2col_backward_data(dy, filters, g);
  if (!via_float32(dtype)) return backward_data_dnnl(dy, filters, g);
  return cpu::cast(backward_data_dnnl(widen(dy), widen(filters), g), dtype);
}

Tensor conv2d_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g) {
  const DType dtype = x.dtype();
  check("x", x, x_shape(g), dtype);
  check("dy", dy, y_shape(g), dtype);
  // Depthwise: our kernel (oneDNN 2.6's jit depthwise one covers only some geometries).
  if (is_depthwise_geometry(g)) return depthwise_backward_filters(x, dy, g);
  if (pointwise_path(g)) return pointwise_backward_filters(x, dy, g);
  if (im2col_path(g, dtype)) return im2col_backward_filters(x, dy, g);
  if (!via_float32(dtype)) return backward_filters_dnnl(x, dy, g);
  return cpu::cast(backward_filters_dnnl(widen(x), widen(dy), g), dtype);
}

bool conv_gemm_paths_enabled() { return g_gemm_paths.enabled(); }

void set_conv_gemm_paths(std::optional<bool> enabled) { g_gemm_paths.set(enabled); }

PrimitiveCacheStats conv_cache_stats() { return cache().stats(); }

void clear_conv_cache() { cache().clear(); }

}  // namespace mixprec::cpu
