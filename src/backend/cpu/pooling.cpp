// CPU pooling: oneDNN primitives on the NHWC tensors as stored (format tag nhwc, no reorders),
// cached by geometry; plain loops for float64 and as the oracle.
#include "backend/cpu/pooling.h"

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cpu/cast.h"
#include "backend/cpu/scratch.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

constexpr std::size_t kCacheCapacity = 256;
constexpr std::int64_t kParallelWork = std::int64_t{1} << 15;

// ---- the reference loops ----

// The real rows (or columns) [begin, end) of the window starting at `start` (which may be
// negative: padding).
struct Span {
  std::int64_t begin, end;
};
Span window_span(std::int64_t start, std::int64_t window, std::int64_t in) {
  return {std::max<std::int64_t>(start, 0), std::min(start + window, in)};
}

Shape x_shape(const PoolGeometry& g) { return Shape{g.batch, g.in_h, g.in_w, g.channels}; }
Shape y_shape(const PoolGeometry& g) { return Shape{g.batch, g.out_h, g.out_w, g.channels}; }

// Calls f(oh, ow, rows, cols) for every output position of image n.
template <typename F>
void for_each_window(const PoolGeometry& g, F&& f) {
  for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
    const Span rows = window_span(oh * g.stride_h - g.pad_top, g.window_h, g.in_h);
    for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
      f(oh, ow, rows, window_span(ow * g.stride_w - g.pad_left, g.window_w, g.in_w));
    }
  }
}

// Offset of the first maximum (row-major window order; a later equal value does not replace it)
// of channel c in the window, relative to x's start. Every window holds a real element (both
// padding rules guarantee it).
template <typename T>
std::int64_t argmax(const T* x, const PoolGeometry& g, std::int64_t n, Span rows, Span cols,
                    std::int64_t c) {
  std::int64_t best = -1;
  double best_value = 0.0;
  for (std::int64_t h = rows.begin; h < rows.end; ++h) {
    for (std::int64_t w = cols.begin; w < cols.end; ++w) {
      const std::int64_t at = ((n * g.in_h + h) * g.in_w + w) * g.channels + c;
      const double v = core::to_double(x[at]);
      if (best < 0 || v > best_value) best = at, best_value = v;
    }
  }
  return best;
}

template <typename T>
void reference_forward(PoolKind kind, const T* x, T* y, const PoolGeometry& g) {
  const std::int64_t work = g.batch * g.out_h * g.out_w * g.channels * g.window_h * g.window_w;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (std::int64_t n = 0; n < g.batch; ++n) {
    for_each_window(g, [&](std::int64_t oh, std::int64_t ow, Span rows, Span cols) {
      T* out = y + ((n * g.out_h + oh) * g.out_w + ow) * g.channels;
      const double count = static_cast<double>((rows.end - rows.begin) * (cols.end - cols.begin));
      for (std::int64_t c = 0; c < g.channels; ++c) {
        if (kind == PoolKind::max) {
          out[c] = x[argmax(x, g, n, rows, cols, c)];
          continue;
        }
        double sum = 0.0;
        for (std::int64_t h = rows.begin; h < rows.end; ++h) {
          for (std::int64_t w = cols.begin; w < cols.end; ++w) {
            sum += core::to_double(x[((n * g.in_h + h) * g.in_w + w) * g.channels + c]);
          }
        }
        out[c] = core::store_as<T>(sum / count);
      }
    });
  }
}

// dx accumulated in float64 (overlapping windows add up), rounded once. x is read for max only.
template <typename T>
void reference_backward(PoolKind kind, const T* dy, const T* x, T* dx, const PoolGeometry& g) {
  const std::int64_t image = g.in_h * g.in_w * g.channels;
  const std::int64_t work = g.batch * g.out_h * g.out_w * g.channels * g.window_h * g.window_w;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (std::int64_t n = 0; n < g.batch; ++n) {
    std::vector<double> acc(static_cast<std::size_t>(image), 0.0);
    const std::int64_t base = n * image;
    for_each_window(g, [&](std::int64_t oh, std::int64_t ow, Span rows, Span cols) {
      const T* grad = dy + ((n * g.out_h + oh) * g.out_w + ow) * g.channels;
      const double count = static_cast<double>((rows.end - rows.begin) * (cols.end - cols.begin));
      for (std::int64_t c = 0; c < g.channels; ++c) {
        const double gv = core::to_double(grad[c]);
        if (kind == PoolKind::max) {
          acc[static_cast<std::size_t>(argmax(x, g, n, rows, cols, c) - base)] += gv;
          continue;
        }
        for (std::int64_t h = rows.begin; h < rows.end; ++h) {
          for (std::int64_t w = cols.begin; w < cols.end; ++w) {
            acc[static_cast<std::size_t>((h * g.in_w + w) * g.channels + c)] += gv / count;
          }
        }
      }
    });
    for (std::int64_t i = 0; i < image; ++i) {
      dx[base + i] = core::store_as<T>(acc[static_cast<std::size_t>(i)]);
    }
  }
}

void check_tensor(const char* op, const char* what, const Tensor& t, const Shape& expected,
                  DType dtype) {
  if (!t.defined() || t.shape() != expected || t.dtype() != dtype || !t.device().is_cpu() ||
      !is_floating(dtype)) {
    throw Error(std::string(op) + ": " + what + " must be a CPU floating tensor of dtype " +
                std::string(dtype_name(dtype)) + " and shape " + expected.to_string() + ", got " +
                (t.defined() ? std::string(dtype_name(t.dtype())) + " " + t.shape().to_string()
                             : std::string("an undefined tensor")));
  }
}

// ---- oneDNN ----

enum class Pass : std::int64_t { inference, training, backward };

struct PoolPrimitive {
  dnnl::primitive primitive;
  dnnl::memory::desc src, dst;   // (diff_)src and (diff_)dst, NHWC
  dnnl::memory::desc workspace;  // max pooling in training and backward; else a zero desc
  std::size_t scratchpad_bytes = 0;
  std::string implementation;
};

dnnl::memory::desc nhwc(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c, dt type) {
  return dnnl::memory::desc({n, c, h, w}, type, tag::nhwc);
}

std::string describe(PoolKind kind, const PoolGeometry& g, dt type) {
  auto s = [](std::int64_t v) { return std::to_string(v); };
  return std::string(kind == PoolKind::max ? "max" : "average") + " pooling of x (" + s(g.batch) +
         ", " + s(g.in_h) + ", " + s(g.in_w) + ", " + s(g.channels) + "), window (" +
         s(g.window_h) + ", " + s(g.window_w) + "), strides (" + s(g.stride_h) + ", " +
         s(g.stride_w) + "), padding (" + s(g.pad_top) + ", " + s(g.pad_bottom) + ", " +
         s(g.pad_left) + ", " + s(g.pad_right) + "), " +
         (type == dt::bf16 ? "bfloat16" : "float32");
}

std::shared_ptr<const PoolPrimitive> create(Pass pass, PoolKind kind, const PoolGeometry& g,
                                            dt type) {
  auto p = std::make_shared<PoolPrimitive>();
  dnnl::engine& engine = dnnl_engine();
  p->src = nhwc(g.batch, g.in_h, g.in_w, g.channels, type);
  p->dst = nhwc(g.batch, g.out_h, g.out_w, g.channels, type);
  const dnnl::memory::dims strides{g.stride_h, g.stride_w}, kernel{g.window_h, g.window_w};
  const dnnl::memory::dims pad_l{g.pad_top, g.pad_left}, pad_r{g.pad_bottom, g.pad_right};
  // Keras averages over the real elements only (with `valid` there is no padding anyway).
  const auto alg = kind == PoolKind::max ? dnnl::algorithm::pooling_max
                                         : dnnl::algorithm::pooling_avg_exclude_padding;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // from the mixprec allocator
  // Inference needs no workspace; training max pooling records the argmax of each window in it.
  const auto prop = pass == Pass::inference ? dnnl::prop_kind::forward_inference
                                            : dnnl::prop_kind::forward_training;
  const dnnl::pooling_forward::desc fwd_desc(prop, alg, p->src, p->dst, strides, kernel, pad_l,
                                             pad_r);
  const dnnl::pooling_forward::primitive_desc fwd_pd(fwd_desc, attr, engine);
  if (pass == Pass::backward) {
    const dnnl::pooling_backward::desc desc(alg, p->src, p->dst, strides, kernel, pad_l, pad_r);
    const dnnl::pooling_backward::primitive_desc pd(desc, attr, engine, fwd_pd);
    p->workspace = pd.workspace_desc();
    p->scratchpad_bytes = pd.scratchpad_desc().get_size();
    p->implementation = pd.impl_info_str();
    p->primitive = dnnl::pooling_backward(pd);
  } else {
    p->workspace = fwd_pd.workspace_desc();
    p->scratchpad_bytes = fwd_pd.scratchpad_desc().get_size();
    p->implementation = fwd_pd.impl_info_str();
    p->primitive = dnnl::pooling_forward(fwd_pd);
  }
  return p;
}

// Pass, kind, data type and the 14 integers of the geometry.
using Key = std::array<std::int64_t, 17>;

PrimitiveCache<Key, PoolPrimitive>& cache() {
  static PrimitiveCache<Key, PoolPrimitive> instance(kCacheCapacity);
  return instance;
}

std::shared_ptr<const PoolPrimitive> cached_primitive(Pass pass, PoolKind kind,
                                                      const PoolGeometry& g, dt type) {
  const Key key = {static_cast<std::int64_t>(pass),
                   static_cast<std::int64_t>(kind),
                   static_cast<std::int64_t>(type),
                   g.batch,
                   g.in_h,
                   g.in_w,
                   g.channels,
                   g.window_h,
                   g.window_w,
                   g.stride_h,
                   g.stride_w,
                   g.pad_top,
                   g.pad_bottom,
                   g.pad_left,
                   g.pad_right,
                   g.out_h,
                   g.out_w};
  return cache().get(key, [&] {
    try {
      return create(pass, kind, g, type);
    } catch (const dnnl::error& e) {
      throw Error("pool2d: oneDNN cannot create a primitive for " + describe(kind, g, type) + ": " +
                  e.what());
    }
  });
}

dnnl::memory memory_of(const dnnl::memory::desc& desc, const Tensor& t) {
  return dnnl::memory(desc, dnnl_engine(), const_cast<void*>(t.data_ptr()));
}

Tensor bytes(std::size_t n) {
  return core::make_tensor(Shape{static_cast<std::int64_t>(n)}, DType::uint8, Device::cpu());
}

// Runs `p` with `args` plus its scratchpad, a block of the host allocator's cache (scratch.h).
void execute(const PoolPrimitive& p, std::unordered_map<int, dnnl::memory> args) {
  Scratchpad pad;
  if (p.scratchpad_bytes > 0) {
    pad = dnnl_scratchpad(p.scratchpad_bytes);
    args[DNNL_ARG_SCRATCHPAD] = pad.memory;
  }
  dnnl::stream& stream = dnnl_stream();
  p.primitive.execute(stream, args);
  stream.wait();
}

// x of float32 or bfloat16 (the primitive's data type).
PoolForward forward_dnnl(PoolKind kind, const Tensor& x, const PoolGeometry& g,
                         SaveForBackward save) {
  const dt type = x.dtype() == DType::bfloat16 ? dt::bf16 : dt::f32;
  const bool training = kind == PoolKind::max && save == SaveForBackward::yes;
  const auto p = cached_primitive(training ? Pass::training : Pass::inference, kind, g, type);
  PoolForward result;
  result.y = core::make_tensor(y_shape(g), x.dtype(), Device::cpu());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, memory_of(p->src, x)},
                                             {DNNL_ARG_DST, memory_of(p->dst, result.y)}};
  if (training) {
    result.saved.argmax = bytes(p->workspace.get_size());
    args[DNNL_ARG_WORKSPACE] = memory_of(p->workspace, result.saved.argmax);
  }
  execute(*p, std::move(args));
  result.saved.native_bf16 = type == dt::bf16;
  return result;
}

Tensor backward_dnnl(PoolKind kind, const Tensor& dy, const PoolSaved& state,
                     const PoolGeometry& g) {
  const dt type = dy.dtype() == DType::bfloat16 ? dt::bf16 : dt::f32;
  const auto p = cached_primitive(Pass::backward, kind, g, type);
  Tensor dx = core::make_tensor(x_shape(g), dy.dtype(), Device::cpu());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, memory_of(p->dst, dy)},
                                             {DNNL_ARG_DIFF_SRC, memory_of(p->src, dx)}};
  if (kind == PoolKind::max) {
    if (!state.argmax.defined() || state.argmax.nbytes() != p->workspace.get_size()) {
      throw Error(
          "cpu::pool2d_backward: max pooling needs the workspace of a forward run with "
          "SaveForBackward::yes on the same geometry and data type");
    }
    args[DNNL_ARG_WORKSPACE] = memory_of(p->workspace, state.argmax);
  }
  execute(*p, std::move(args));
  return dx;
}

Tensor widen(const Tensor& t) {
  return t.dtype() == DType::float32 ? t : cpu::cast(t, DType::float32);
}

}  // namespace

Tensor pool2d_reference_forward(PoolKind kind, const Tensor& x, const PoolGeometry& g) {
  check_tensor("cpu::pool2d_reference_forward", "x", x, x_shape(g), x.dtype());
  const Tensor xc = x.detach().contiguous();
  Tensor y = core::make_tensor(y_shape(g), x.dtype(), Device::cpu());
  core::dispatch_floating(x.dtype(), "pool2d", [&]<typename T>() {
    reference_forward<T>(kind, static_cast<const T*>(xc.data_ptr()), static_cast<T*>(y.data_ptr()),
                         g);
  });
  return y;
}

Tensor pool2d_reference_backward(PoolKind kind, const Tensor& dy, const Tensor& x,
                                 const PoolGeometry& g) {
  constexpr const char* op = "cpu::pool2d_reference_backward";
  check_tensor(op, "dy", dy, y_shape(g), dy.dtype());
  if (kind == PoolKind::max) check_tensor(op, "x", x, x_shape(g), dy.dtype());
  const Tensor dyc = dy.detach().contiguous();
  const Tensor xc = kind == PoolKind::max ? x.detach().contiguous() : Tensor();
  Tensor dx = core::make_tensor(x_shape(g), dy.dtype(), Device::cpu());
  core::dispatch_floating(dy.dtype(), "pool2d", [&]<typename T>() {
    reference_backward<T>(kind, static_cast<const T*>(dyc.data_ptr()),
                          xc.defined() ? static_cast<const T*>(xc.data_ptr()) : nullptr,
                          static_cast<T*>(dx.data_ptr()), g);
  });
  return dx;
}

PoolForward pool2d_forward(PoolKind kind, const Tensor& x, const PoolGeometry& g,
                           SaveForBackward save) {
  check_tensor("cpu::pool2d_forward", "x", x, x_shape(g), x.dtype());
  const DType dtype = x.dtype();
  if (dtype == DType::float64 || x.numel() == 0) {
    PoolForward result{pool2d_reference_forward(kind, x, g), {}};
    if (save == SaveForBackward::yes && kind == PoolKind::max) result.saved.x = x;
    return result;
  }
  const Tensor xc = x.contiguous();
  if (dtype == DType::float32 || (dtype == DType::bfloat16 && use_native_bf16())) {
    return forward_dnnl(kind, xc, g, save);
  }
  // float16, or bfloat16 through float32: the max of widened values is one of them, so max
  // pooling is exact either way; the average is computed in float32 and rounded once.
  PoolForward result = forward_dnnl(kind, widen(xc), g, save);
  result.y = cpu::cast(result.y, dtype);
  return result;
}

Tensor pool2d_backward(PoolKind kind, const Tensor& dy, const PoolSaved& state,
                       const PoolGeometry& g) {
  check_tensor("cpu::pool2d_backward", "dy", dy, y_shape(g), dy.dtype());
  const DType dtype = dy.dtype();
  if (dtype == DType::float64 || dy.numel() == 0 || g.batch * g.in_h * g.in_w * g.channels == 0) {
    return pool2d_reference_backward(kind, dy, state.x, g);
  }
  const Tensor dyc = dy.contiguous();
  if (dtype == DType::float32) return backward_dnnl(kind, dyc, state, g);
  // 16-bit: the float32 primitive, rounded once. oneDNN's native bf16 backward adds the windows'
  // contributions in bfloat16 (each overlapping window rounds the partial sum: up to 3 ulps off
  // the float32 sum rounded once, 7x7 stride 2 windows), which breaks DESIGN §2's one rounding.
  // A max-pooling workspace of a native bf16 forward serves the float32 primitive as well:
  // oneDNN's pooling workspace is the dst shape of window offsets (u8, or s32 past 255 window
  // elements) whatever the data type, and backward_dnnl checks its size.
  return cpu::cast(backward_dnnl(kind, widen(dyc), state, g), dtype);
}

PrimitiveCacheStats pooling_cache_stats() { return cache().stats(); }

void clear_pooling_cache() { cache().clear(); }

}  // namespace mixprec::cpu
