// The per-channel broadcast kernels of binary_channel.h: rows of the full operand against the row
// of its group in the small one, read in place for float32/float64 and a segment at a time
// through float buffers for 16-bit storage.
#include "backend/cpu/binary_channel.h"

#include <algorithm>
#include <type_traits>

#include "backend/channel_geometry.h"
#include "backend/cpu/elementwise.h"
#include "backend/kernel_math/elementwise_math.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "mixprec/convert.h"

namespace mixprec::cpu {

namespace {

// Channels handled per segment (one buffer of float each).
constexpr std::int64_t kSegment = 256;
// Rows summed in the compute type before the partial sum joins the float64 total.
constexpr std::int64_t kRowBlock = 64;

template <typename C, typename T>
const C* as_compute(const T* src, std::int64_t n, C* buffer) {
  if constexpr (std::is_same_v<T, C>) {
    return src;
  } else {
    convert(src, buffer, static_cast<std::size_t>(n));
    return buffer;
  }
}

// out row = op(full row, small row) (small_first: op(small row, full row)) for every row.
template <BinaryOp Op, typename T>
void channel_rows(const T* full, const T* small, T* out, ChannelGeometry g, bool small_first) {
  using C = core::compute_t<T>;
  const std::int64_t units = g.groups * g.rows;
  const std::int64_t c = g.channels;
#pragma omp parallel for schedule(static) if (units * c >= kParallelThreshold)
  for (std::int64_t u = 0; u < units; ++u) {
    const std::int64_t n = u / g.rows;
    alignas(64) C bf[kSegment], bs[kSegment], bo[kSegment];
    for (std::int64_t j0 = 0; j0 < c; j0 += kSegment) {
      const std::int64_t m = std::min(kSegment, c - j0);
      const C* f = as_compute<C>(full + u * c + j0, m, bf);
      const C* s = as_compute<C>(small + n * c + j0, m, bs);
      C* o = std::is_same_v<T, C> ? reinterpret_cast<C*>(out + u * c + j0) : bo;
      if (small_first) {
#pragma omp simd
        for (std::int64_t j = 0; j < m; ++j) o[j] = kernel_math::binary_value(Op, s[j], f[j]);
      } else {
#pragma omp simd
        for (std::int64_t j = 0; j < m; ++j) o[j] = kernel_math::binary_value(Op, f[j], s[j]);
      }
      if constexpr (!std::is_same_v<T, C>) {
        convert(static_cast<const C*>(bo), out + u * c + j0, static_cast<std::size_t>(m));
      }
    }
  }
}

template <typename T>
void run_channel(BinaryOp op, const T* full, const T* small, T* out, ChannelGeometry g,
                 bool small_first) {
  switch (op) {
#define MIXPREC_BINARY_CASE(name, text) \
  case BinaryOp::name: return channel_rows<BinaryOp::name, T>(full, small, out, g, small_first);
    MIXPREC_FOR_EACH_BINARY_OP(MIXPREC_BINARY_CASE)
#undef MIXPREC_BINARY_CASE
  }
}

// total[n, j] = sum over the rows of group n of g * x, for the channels [j0, j0 + m).
template <typename T>
void gate_segment(const T* g, const T* x, ChannelGeometry geo, std::int64_t n, std::int64_t j0,
                  std::int64_t m, double* total) {
  using C = core::compute_t<T>;
  alignas(64) C bg[kSegment], bx[kSegment], partial[kSegment];
  std::fill_n(total, m, 0.0);
  for (std::int64_t r0 = 0; r0 < geo.rows; r0 += kRowBlock) {
    std::fill_n(partial, m, C(0));
    const std::int64_t r1 = std::min(geo.rows, r0 + kRowBlock);
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t at = (n * geo.rows + r) * geo.channels + j0;
      const C* pg = as_compute<C>(g + at, m, bg);
      const C* px = as_compute<C>(x + at, m, bx);
#pragma omp simd
      for (std::int64_t j = 0; j < m; ++j) partial[j] += pg[j] * px[j];
    }
    for (std::int64_t j = 0; j < m; ++j) total[j] += static_cast<double>(partial[j]);
  }
}

}  // namespace

bool binary_channel(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  if (!a.is_contiguous() || !b.is_contiguous() || a.dtype() != b.dtype()) return false;
  const Tensor* full = &a;
  const Tensor* small = &b;
  bool small_first = false;
  if (b.shape() == out.shape() && a.shape() != out.shape()) {
    full = &b, small = &a, small_first = true;
  } else if (a.shape() != out.shape()) {
    return false;
  }
  const auto geo = channel_geometry(out.shape(), small->shape());
  if (!geo) return false;
  core::dispatch_floating(a.dtype(), "binary op", [&]<typename T>() {
    run_channel<T>(op, full->data<T>(), small->data<T>(), out.data<T>(), *geo, small_first);
  });
  return true;
}

Tensor channel_gate_backward(const Tensor& g, const Tensor& full, const Shape& small_shape) {
  const auto geo = channel_geometry(full.shape(), small_shape);
  if (!geo || g.shape() != full.shape() || g.dtype() != full.dtype() || !g.is_contiguous() ||
      !full.is_contiguous()) {
    throw Error(
        "cpu::channel_gate_backward: expected contiguous g and x of one shape and dtype "
        "and a per-channel broadcast shape, got " +
        full.shape().to_string() + " and " + small_shape.to_string());
  }
  Tensor out = core::make_tensor(small_shape, g.dtype(), g.device());
  core::dispatch_floating(g.dtype(), "channel_gate_backward", [&]<typename T>() {
    const std::int64_t segments = (geo->channels + kSegment - 1) / kSegment;
    const std::int64_t units = geo->groups * segments;
    T* o = out.data<T>();
#pragma omp parallel for schedule(static) if (full.numel() >= kParallelThreshold)
    for (std::int64_t u = 0; u < units; ++u) {
      const std::int64_t n = u / segments;
      const std::int64_t j0 = (u % segments) * kSegment;
      const std::int64_t m = std::min(kSegment, geo->channels - j0);
      double total[kSegment];
      gate_segment(g.data<T>(), full.data<T>(), *geo, n, j0, m, total);
      for (std::int64_t j = 0; j < m; ++j)
        o[n * geo->channels + j0 + j] = core::store_as<T>(total[j]);
    }
  });
  return out;
}

}  // namespace mixprec::cpu
