// CPU batch normalization: the loops first (the default path, and the oracle of the oneDNN path),
// then the oneDNN path with its primitive cache (on request).
#include "backend/cpu/batch_norm.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cpu/batch_norm_activation_sweeps.h"
#include "backend/cpu/batch_norm_loops.h"
#include "backend/cpu/cast.h"
#include "backend/cpu/scratch.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "mixprec/convert.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

using namespace bn_loops;  // NOLINT: the shared loop helpers (batch_norm_loops.h)

// float32 and 16-bit storage run the register-resident sweeps of batch_norm_activation_sweeps.h
// (no activation); float64 the generic loops of batch_norm_loops.h.
template <typename T>
constexpr bool kSweeps = !std::is_same_v<T, double>;

// y = (x - mean) * scale + shift per channel.
template <typename T, typename P>
void normalize_rows(const T* x, Rows r, const P* mean, const P* scale, const P* shift, T* y) {
  if constexpr (kSweeps<T>) {
    bn_sweeps::forward(x, r, {mean, scale, shift}, bn_kernels::Act::none, y);
  } else {
    normalize(x, r, mean, scale, shift, y);
  }
}

// Training forward: the statistics (one sweep for float32 and 16-bit, two passes for float64),
// then one pass to normalize.
template <typename T>
void reference_training(const T* x, Rows r, const std::vector<core::compute_t<T>>& gamma,
                        const std::vector<core::compute_t<T>>& beta, core::compute_t<T> epsilon,
                        T* y, core::compute_t<T>* mean, core::compute_t<T>* variance) {
  using P = core::compute_t<T>;
  const std::int64_t c = r.c;
  if constexpr (kSweeps<T>) {
    bn_sweeps::statistics(x, r, mean, variance);
  } else {
    batch_statistics(x, r, mean, variance);
  }
  std::vector<P> var(variance, variance + c);
  std::vector<P> scale = inverse_std(var, epsilon);
  for (std::size_t j = 0; j < scale.size(); ++j) scale[j] *= gamma[j];
  normalize_rows(x, r, mean, scale.data(), beta.data(), y);
}

template <typename T>
void reference_inference(const T* x, Rows r, const std::vector<core::compute_t<T>>& gamma,
                         const std::vector<core::compute_t<T>>& beta,
                         const std::vector<core::compute_t<T>>& mean,
                         const std::vector<core::compute_t<T>>& variance,
                         core::compute_t<T> epsilon, T* y) {
  auto scale = inverse_std(variance, epsilon);
  for (std::size_t j = 0; j < scale.size(); ++j) scale[j] *= gamma[j];
  normalize_rows(x, r, mean.data(), scale.data(), beta.data(), y);
}

// Backward: one pass for sum(dy) and sum(dy * (x - mean)) per channel, one for dx (the sweeps for
// float32 and 16-bit storage, the generic loops for float64).
template <typename T>
void reference_backward(const T* dy, const T* x, Rows r,
                        const std::vector<core::compute_t<T>>& gamma,
                        const std::vector<core::compute_t<T>>& mean,
                        const std::vector<core::compute_t<T>>& variance, core::compute_t<T> epsilon,
                        BatchNormStats stats, T* dx, core::compute_t<T>* dgamma,
                        core::compute_t<T>* dbeta) {
  using P = core::compute_t<T>;
  const std::int64_t c = r.c;
  const std::vector<P> inv_std = inverse_std(variance, epsilon);
  if constexpr (kSweeps<T>) {
    std::vector<P> scale(inv_std), shift(inv_std.size(), P(0));
    for (std::size_t j = 0; j < scale.size(); ++j) scale[j] *= gamma[j];
    bn_sweeps::backward(dy, x, r, {mean.data(), scale.data(), shift.data()}, inv_std.data(), stats,
                        bn_kernels::Act::none, dx, dgamma, dbeta);
    return;
  }
  const P* pm = mean.data();
  const auto sums = channel_sums<P>(r, 2, [&](std::int64_t r0, std::int64_t r1, P* acc) {
    std::vector<P> in_x(buffer_size(c)), in_g(buffer_size(c));
    P* acc_g = acc;
    P* acc_gx = acc + c;
    for_each_chunk(r0, r1, c, [&](std::int64_t row, std::int64_t n) {
      const P* px = view_or_convert(x + row * c, n * c, in_x.data());
      const P* pg = view_or_convert(dy + row * c, n * c, in_g.data());
      for (std::int64_t i = 0; i < n; ++i) {
#pragma omp simd
        for (std::int64_t j = 0; j < c; ++j) {
          const P g = pg[i * c + j];
          acc_g[j] += g;
          acc_gx[j] += g * (px[i * c + j] - pm[j]);
        }
      }
    });
  });
  // dx = k * (dy - a - (x - mean) * b) with k = gamma * inv_std, a = dbeta / M and
  // b = dgamma * inv_std / M (both 0 for moving statistics).
  std::vector<P> k(static_cast<std::size_t>(c)), a(k.size()), b(k.size());
  for (std::size_t j = 0; j < k.size(); ++j) {
    const double sum_g = sums[j], sum_gx = sums[j + k.size()];
    const double inv = inv_std[j];
    dbeta[j] = P(sum_g);
    dgamma[j] = P(sum_gx * inv);
    k[j] = gamma[j] * inv_std[j];
    a[j] = stats == BatchNormStats::batch ? P(sum_g / double(r.m)) : P(0);
    b[j] = stats == BatchNormStats::batch ? P(sum_gx * inv * inv / double(r.m)) : P(0);
  }
  parallel_rows(r, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<P> in_x(buffer_size(c)), in_g(buffer_size(c)), out(buffer_size(c));
    for_each_chunk(r0, r1, c, [&](std::int64_t row, std::int64_t n) {
      const P* px = view_or_convert(x + row * c, n * c, in_x.data());
      const P* pg = view_or_convert(dy + row * c, n * c, in_g.data());
      P* pd = output<P>(dx + row * c, out.data());
      for (std::int64_t i = 0; i < n; ++i) {
#pragma omp simd
        for (std::int64_t j = 0; j < c; ++j) {
          pd[i * c + j] = k[j] * (pg[i * c + j] - a[j] - (px[i * c + j] - pm[j]) * b[j]);
        }
      }
      store(pd, n * c, dx + row * c);
    });
  });
}

// ---- oneDNN ----

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

enum class Pass { forward_training, forward_inference, backward };

// One batch-norm call as oneDNN sees it: x (N, ..., C) as an NHWC tensor (N, C, S, 1) in oneDNN's
// NCHW-ordered dims, S the product of the axes between the first and the last ((N, C): S = 1).
// The same memory in every case; the shape only steers oneDNN's choice of kernel. As a plain
// (M, C) `nc` matrix oneDNN 2.6 picks its generic ncsp kernel, 50-100x slower than the channel-last
// jit kernel it picks here (32x56x56x64 float32: 158 ms against 2.2 ms forward).
struct Geometry {
  std::int64_t n = 0, c = 0, s = 0;
  dt data_type = dt::f32;
  Pass pass = Pass::forward_training;
  BatchNormStats stats = BatchNormStats::batch;  // backward only
  float epsilon = 0;
};

struct BnormPrimitive {
  dnnl::primitive primitive;
  dnnl::memory::desc data;     // src, dst, diff_dst, diff_src: (N, C, S, 1) in nhwc
  dnnl::memory::desc channel;  // mean, variance, scale, shift: (C) float32
  dnnl::memory::desc packed;   // backward: scale_shift and its diff, (2, C) float32
  std::size_t scratchpad_bytes = 0;
  std::string implementation;
  // oneDNN's jit kernel ("bnorm_jit:..."), which oneDNN 2.6 has only for C a multiple of the
  // vector width (16 floats with AVX-512). For other C it runs a generic C++ kernel
  // ("nspc_bnorm:any"), several times slower than the reference loops here (32x224x224x3 float32
  // forward, 2 threads: 9-50 ms against 5 ms), so the loops run instead.
  bool jit = false;
};

// Forward: separate float32 scale and shift (C). Backward: the packed (2, C) scale_shift weights
// and their packed diff, because oneDNN 2.6 fails to execute a backward primitive created with
// use_shift under a user-provided scratchpad (use_scale_shift works).
dnnl::normalization_flags flags_of(const Geometry& g) {
  using nf = dnnl::normalization_flags;
  nf flags = g.pass == Pass::backward ? nf::use_scale_shift : nf::use_scale | nf::use_shift;
  const bool global = g.pass == Pass::forward_inference ||
                      (g.pass == Pass::backward && g.stats == BatchNormStats::moving);
  if (global) flags = flags | nf::use_global_stats;
  return flags;
}

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::forward_training: return "forward training";
    case Pass::forward_inference: return "forward inference";
    case Pass::backward: return "backward";
  }
  return "?";
}

std::shared_ptr<const BnormPrimitive> create_primitive(const Geometry& g) {
  auto result = std::make_shared<BnormPrimitive>();
  try {
    dnnl::engine& engine = dnnl_engine();
    result->data = dnnl::memory::desc({g.n, g.c, g.s, 1}, g.data_type, tag::nhwc);
    result->channel = dnnl::memory::desc({g.c}, dt::f32, tag::a);
    result->packed = dnnl::memory::desc({2, g.c}, dt::f32, tag::nc);
    dnnl::primitive_attr attr;
    // The caller allocates the scratchpad through the mixprec allocator (memory_stats counts it).
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto flags = flags_of(g);
    if (g.pass == Pass::backward) {
      dnnl::batch_normalization_forward::desc hint_desc(dnnl::prop_kind::forward_training,
                                                        result->data, g.epsilon, flags);
      dnnl::batch_normalization_forward::primitive_desc hint(hint_desc, engine);
      dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, result->data,
                                                    result->data, g.epsilon, flags);
      dnnl::batch_normalization_backward::primitive_desc pd(desc, attr, engine, hint);
      result->scratchpad_bytes = pd.scratchpad_desc().get_size();
      result->implementation = pd.impl_info_str();
      result->primitive = dnnl::batch_normalization_backward(pd);
    } else {
      const auto prop = g.pass == Pass::forward_training ? dnnl::prop_kind::forward_training
                                                         : dnnl::prop_kind::forward_inference;
      dnnl::batch_normalization_forward::desc desc(prop, result->data, g.epsilon, flags);
      dnnl::batch_normalization_forward::primitive_desc pd(desc, attr, engine);
      result->scratchpad_bytes = pd.scratchpad_desc().get_size();
      result->implementation = pd.impl_info_str();
      result->primitive = dnnl::batch_normalization_forward(pd);
    }
    result->jit = result->implementation.rfind("bnorm_jit", 0) == 0;
  } catch (const dnnl::error& e) {
    throw Error(std::string("batch_norm: oneDNN cannot create a ") + pass_name(g.pass) +
                " primitive for NHWC (" + std::to_string(g.n) + ", " + std::to_string(g.s) +
                ", 1, " + std::to_string(g.c) + ") " + (g.data_type == dt::bf16 ? "bf16" : "f32") +
                " data: " + e.what());
  }
  return result;
}

// Compiled primitives by geometry, least recently used evicted beyond the capacity (a network has
// a few batch-norm shapes per layer; recompiling costs about a millisecond).
constexpr std::size_t kCacheCapacity = 512;

// n, c, s, data type, pass, statistics and the bits of the float32 epsilon.
using Key = std::array<std::int64_t, 7>;

PrimitiveCache<Key, BnormPrimitive>& cache() {
  static PrimitiveCache<Key, BnormPrimitive> instance(kCacheCapacity);
  return instance;
}

std::shared_ptr<const BnormPrimitive> cached_primitive(const Geometry& g) {
  const Key key{g.n,
                g.c,
                g.s,
                static_cast<std::int64_t>(g.data_type),
                static_cast<std::int64_t>(g.pass),
                static_cast<std::int64_t>(g.stats),
                static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(g.epsilon))};
  return cache().get(key, [&] { return create_primitive(g); });
}

// oneDNN takes non-const handles; it only reads the inputs.
dnnl::memory memory_of(const dnnl::memory::desc& desc, const Tensor& t) {
  return dnnl::memory(desc, dnnl_engine(), const_cast<void*>(t.data_ptr()));
}

// Runs `p` with `args` plus its scratchpad, a block of the host allocator's cache (scratch.h).
void execute(const BnormPrimitive& p, std::unordered_map<int, dnnl::memory> args) {
  const Scratchpad pad = dnnl_scratchpad(p.scratchpad_bytes);
  args.emplace(DNNL_ARG_SCRATCHPAD, pad.memory);
  dnnl::stream& stream = dnnl_stream();
  p.primitive.execute(stream, args);
  stream.wait();
}

// A (C) parameter or statistic as a contiguous float32 tensor.
Tensor as_float32(const Tensor& t) {
  if (t.dtype() == DType::float32 && t.is_contiguous()) return t;
  return cpu::cast(t, DType::float32);
}

// The oneDNN primitive for this call, or null where the loops run: oneDNN not asked for, float64,
// float16, bfloat16 without native support, or no jit kernel for the geometry.
std::shared_ptr<const BnormPrimitive> dnnl_primitive(const Tensor& x, Pass pass, double epsilon,
                                                     BatchNormStats stats, BatchNormImpl impl) {
  if (impl != BatchNormImpl::onednn) return nullptr;
  const DType dtype = x.dtype();
  if (dtype != DType::float32 && !(dtype == DType::bfloat16 && use_native_bf16())) return nullptr;
  const Rows r = rows_of(x);
  Geometry g;
  g.n = x.dim(0);
  g.c = r.c;
  g.s = r.m / g.n;
  g.data_type = dtype == DType::bfloat16 ? dt::bf16 : dt::f32;
  g.pass = pass;
  g.stats = pass == Pass::backward ? stats : BatchNormStats::batch;
  g.epsilon = static_cast<float>(epsilon);
  auto p = cached_primitive(g);
  return p->jit ? p : nullptr;
}

template <typename P>
std::vector<P> values_of(const Tensor& t) {
  return t.to_vector<P>();
}

Tensor channel_tensor(std::int64_t c, DType dtype) {
  return core::make_tensor(Shape{c}, dtype, Device::cpu());
}

}  // namespace

DType batch_norm_stat_dtype(DType x_dtype) {
  return x_dtype == DType::float64 ? DType::float64 : DType::float32;
}

BatchNormTrainingResult batch_norm_training(const Tensor& x, const Tensor& gamma,
                                            const Tensor& beta, double epsilon,
                                            BatchNormImpl impl) {
  const Rows r = rows_of(x);
  if (r.m == 0) throw ValueError("cpu::batch_norm_training: no rows to take statistics over");
  const DType stat = batch_norm_stat_dtype(x.dtype());
  BatchNormTrainingResult out{core::make_tensor(x.shape(), x.dtype(), Device::cpu()),
                              channel_tensor(r.c, stat), channel_tensor(r.c, stat)};
  if (x.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  if (const auto p = dnnl_primitive(x, Pass::forward_training, epsilon, {}, impl)) {
    execute(*p, {{DNNL_ARG_SRC, memory_of(p->data, xc)},
                 {DNNL_ARG_DST, memory_of(p->data, out.y)},
                 {DNNL_ARG_SCALE, memory_of(p->channel, as_float32(gamma))},
                 {DNNL_ARG_SHIFT, memory_of(p->channel, as_float32(beta))},
                 {DNNL_ARG_MEAN, memory_of(p->channel, out.mean)},
                 {DNNL_ARG_VARIANCE, memory_of(p->channel, out.variance)}});
    return out;
  }
  core::dispatch_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using P = core::compute_t<T>;
    reference_training(xc.data<T>(), r, values_of<P>(gamma), values_of<P>(beta), P(epsilon),
                       out.y.data<T>(), out.mean.data<P>(), out.variance.data<P>());
  });
  return out;
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& mean, const Tensor& variance, double epsilon,
                            BatchNormImpl impl) {
  const Rows r = rows_of(x);
  Tensor y = core::make_tensor(x.shape(), x.dtype(), Device::cpu());
  if (x.numel() == 0) return y;
  const Tensor xc = x.contiguous();
  if (const auto p = dnnl_primitive(x, Pass::forward_inference, epsilon, {}, impl)) {
    execute(*p, {{DNNL_ARG_SRC, memory_of(p->data, xc)},
                 {DNNL_ARG_DST, memory_of(p->data, y)},
                 {DNNL_ARG_SCALE, memory_of(p->channel, as_float32(gamma))},
                 {DNNL_ARG_SHIFT, memory_of(p->channel, as_float32(beta))},
                 {DNNL_ARG_MEAN, memory_of(p->channel, as_float32(mean))},
                 {DNNL_ARG_VARIANCE, memory_of(p->channel, as_float32(variance))}});
    return y;
  }
  core::dispatch_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using P = core::compute_t<T>;
    reference_inference(xc.data<T>(), r, values_of<P>(gamma), values_of<P>(beta),
                        values_of<P>(mean), values_of<P>(variance), P(epsilon), y.data<T>());
  });
  return y;
}

BatchNormGradients batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                       const Tensor& mean, const Tensor& variance, double epsilon,
                                       BatchNormStats stats, BatchNormImpl impl) {
  if (dy.dtype() != x.dtype() || dy.shape() != x.shape()) {
    throw Error("cpu::batch_norm_backward: the gradient must have x's shape and dtype");
  }
  const Rows r = rows_of(x);
  const DType stat = batch_norm_stat_dtype(x.dtype());
  BatchNormGradients out{core::make_tensor(x.shape(), x.dtype(), Device::cpu()),
                         channel_tensor(r.c, stat), channel_tensor(r.c, stat)};
  if (x.numel() == 0) {
    // No rows: the parameter gradients are empty sums.
    for (Tensor* t : {&out.dgamma, &out.dbeta}) {
      std::fill_n(static_cast<unsigned char*>(t->data_ptr()), t->nbytes(), 0);
    }
    return out;
  }
  const Tensor xc = x.contiguous(), gc = dy.contiguous();
  if (const auto p = dnnl_primitive(x, Pass::backward, epsilon, stats, impl)) {
    // (2, C): gamma, then the shift (unused by the backward: left zero).
    Tensor weights = core::make_tensor(Shape{2, r.c}, DType::float32, Device::cpu());
    float* w = weights.data<float>();
    const Tensor gamma32 = as_float32(gamma);
    std::copy_n(gamma32.data<float>(), r.c, w);
    std::fill_n(w + r.c, r.c, 0.0f);
    Tensor diff = core::make_tensor(Shape{2, r.c}, DType::float32, Device::cpu());
    execute(*p, {{DNNL_ARG_SRC, memory_of(p->data, xc)},
                 {DNNL_ARG_DIFF_DST, memory_of(p->data, gc)},
                 {DNNL_ARG_WEIGHTS, memory_of(p->packed, weights)},
                 {DNNL_ARG_MEAN, memory_of(p->channel, as_float32(mean))},
                 {DNNL_ARG_VARIANCE, memory_of(p->channel, as_float32(variance))},
                 {DNNL_ARG_DIFF_SRC, memory_of(p->data, out.dx)},
                 {DNNL_ARG_DIFF_WEIGHTS, memory_of(p->packed, diff)}});
    out.dgamma = core::make_view(diff, Shape{r.c}, {1}, 0);
    out.dbeta = core::make_view(diff, Shape{r.c}, {1}, r.c);
    return out;
  }
  core::dispatch_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using P = core::compute_t<T>;
    reference_backward(gc.data<T>(), xc.data<T>(), r, values_of<P>(gamma), values_of<P>(mean),
                       values_of<P>(variance), P(epsilon), stats, out.dx.data<T>(),
                       out.dgamma.data<P>(), out.dbeta.data<P>());
  });
  return out;
}

std::string batch_norm_implementation(const Tensor& x, BatchNormImpl impl) {
  if (x.numel() == 0) return "reference loops";
  const auto p = dnnl_primitive(x, Pass::forward_training, 1e-3, {}, impl);
  return p ? "oneDNN " + p->implementation : "reference loops";
}

PrimitiveCacheStats batch_norm_cache_stats() { return cache().stats(); }

void clear_batch_norm_cache() { cache().clear(); }

}  // namespace mixprec::cpu
