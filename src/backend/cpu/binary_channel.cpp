// The per-channel broadcast kernels of binary_channel.h: rows of the full operand against the row
// of its group in the small one, read in place; 16-bit storage is widened and rounded in
// registers. bfloat16 add and mul round with AVX512_BF16's native instruction where the CPU has it
// (bf16_native_rounding.h), bit-identical with the compiled loops.
#include "backend/cpu/binary_channel.h"

#include <algorithm>
#include <type_traits>

#include "backend/channel_geometry.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/simd_convert.h"
#include "backend/cpu/target_clones.h"
#include "backend/kernel_math/elementwise_math.h"
#include "core/bf16_native_rounding.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

// Channels handled per segment (one buffer of float each).
constexpr std::int64_t kSegment = 256;
// Rows summed in the compute type before the partial sum joins the float64 total.
constexpr std::int64_t kRowBlock = 64;

// The row loops are compiled for AVX-512 / AVX2 / the baseline (target_clones.h).

// o[j] = op(f[j], s[j]) (small_first: op(s[j], f[j])) for j < c, in float32 for 16-bit storage.
template <BinaryOp Op, typename T>
MIXPREC_CPU_CLONES void row_op(const T* f, const T* s, T* o, std::int64_t c, bool small_first) {
  if (small_first) {
#pragma omp simd
    for (std::int64_t j = 0; j < c; ++j) {
      simd::store(o + j, kernel_math::binary_value(Op, simd::load(s + j), simd::load(f + j)));
    }
  } else {
#pragma omp simd
    for (std::int64_t j = 0; j < c; ++j) {
      simd::store(o + j, kernel_math::binary_value(Op, simd::load(f + j), simd::load(s + j)));
    }
  }
}

#if MIXPREC_BF16_NATIVE
template <BinaryOp Op>
MIXPREC_BF16_NATIVE_STEP __m512 apply_native(__m512 a, __m512 b) {
  if constexpr (Op == BinaryOp::add) {
    return _mm512_add_ps(a, b);
  } else {
    return _mm512_mul_ps(a, b);
  }
}

// row_op<Op, bfloat16> for add and mul with the native rounding: o[j] = a[j] op b[j] for j < c,
// the same single float32 operation, stored by bf16_native_rounding.h's steps.
template <BinaryOp Op>
MIXPREC_BF16_NATIVE_TARGET void row_op_native(const bfloat16* a, const bfloat16* b, bfloat16* o,
                                              std::int64_t c) {
  using namespace core::bf16_native;
  const bool integer = denormals_are_zero();
  constexpr __mmask16 all = 0xffff;
  std::int64_t j = 0;
  for (; j + 2 * kLanes <= c; j += 2 * kLanes) {
    const __m512 lo = apply_native<Op>(load_bf16<false>(a + j, all), load_bf16<false>(b + j, all));
    const __m512 hi = apply_native<Op>(load_bf16<false>(a + j + kLanes, all),
                                       load_bf16<false>(b + j + kLanes, all));
    store32(o + j, lo, hi, integer);
  }
  for (; j < c; j += kLanes) {
    const __mmask16 k = first_lanes(c - j);
    store16(o + j, apply_native<Op>(load_bf16<true>(a + j, k), load_bf16<true>(b + j, k)), k,
            integer);
  }
}
#endif

// The native row loop for Op on T where there is one and the CPU runs it, else null.
template <BinaryOp Op, typename T>
auto native_row_op() -> void (*)(const T*, const T*, T*, std::int64_t) {
#if MIXPREC_BF16_NATIVE
  if constexpr (std::is_same_v<T, bfloat16> && (Op == BinaryOp::add || Op == BinaryOp::mul)) {
    if (core::bf16_native::native_bf16_rounding()) return row_op_native<Op>;
  }
#endif
  return nullptr;
}

// partial[j] += g[j] * x[j] for j < m.
template <typename T>
MIXPREC_CPU_CLONES void row_dot(const T* g, const T* x, std::int64_t m, float* partial) {
#pragma omp simd
  for (std::int64_t j = 0; j < m; ++j) partial[j] += simd::load(g + j) * simd::load(x + j);
}

// out row = op(full row, small row) (small_first: op(small row, full row)) for every row. 16-bit
// values are widened and rounded in registers (simd_convert.h): no buffers, no conversion calls.
template <BinaryOp Op, typename T>
void channel_rows(const T* full, const T* small, T* out, ChannelGeometry g, bool small_first) {
  const std::int64_t units = g.groups * g.rows;
  const std::int64_t c = g.channels;
  const auto native = native_row_op<Op, T>();
#pragma omp parallel for schedule(static) if (units * c >= kParallelThreshold)
  for (std::int64_t u = 0; u < units; ++u) {
    const T* f = full + u * c;
    const T* s = small + (u / g.rows) * c;
    T* o = out + u * c;
    if constexpr (std::is_same_v<T, double>) {
      for (std::int64_t j = 0; j < c; ++j) {
        o[j] = small_first ? kernel_math::binary_value(Op, s[j], f[j])
                           : kernel_math::binary_value(Op, f[j], s[j]);
      }
    } else if (native != nullptr) {
      small_first ? native(s, f, o, c) : native(f, s, o, c);
    } else {
      row_op<Op, T>(f, s, o, c, small_first);
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

// total[n, j] = sum over the rows of group n of g * x, for the channels [j0, j0 + m): float32
// (float64 for float64) over blocks of kRowBlock rows, the block sums added in float64.
template <typename T>
void gate_segment(const T* g, const T* x, ChannelGeometry geo, std::int64_t n, std::int64_t j0,
                  std::int64_t m, double* total) {
  using C = core::compute_t<T>;
  alignas(64) C partial[kSegment];
  std::fill_n(total, m, 0.0);
  for (std::int64_t r0 = 0; r0 < geo.rows; r0 += kRowBlock) {
    std::fill_n(partial, m, C(0));
    const std::int64_t r1 = std::min(geo.rows, r0 + kRowBlock);
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t at = (n * geo.rows + r) * geo.channels + j0;
      if constexpr (std::is_same_v<T, double>) {
#pragma omp simd
        for (std::int64_t j = 0; j < m; ++j) partial[j] += g[at + j] * x[at + j];
      } else {
        row_dot<T>(g + at, x + at, m, partial);
      }
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
