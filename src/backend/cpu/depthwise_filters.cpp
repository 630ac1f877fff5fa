// The depthwise backward-filters kernel; see depthwise_filters.h. Vectorised over the contiguous
// channels, float32 accumulation, 16-bit values widened in registers, parallel over fixed blocks
// of (n, oh) rows with one partial of KH * KW * C floats per block, the partials summed in block
// order in parallel over the filter elements.
//
// The common geometries (kernel width 3 or 5, stride 1 or 2, dilation 1: EfficientNet, MobileNet)
// run a register-blocked loop: for one kh and a block of channels, all KW taps' sums stay in
// registers over all rows and columns of a block of rows, and each dy vector of an interior column
// is loaded once for the KW taps. Every other geometry, and channels left over after the blocks,
// run the generic loop (one tap at a time). Both add every sum's rows, and each row's columns, in
// increasing order. On a CPU with AVX512_BF16, bfloat16's register-blocked loop is the one in
// depthwise_filters_bf16.cpp (vdpbf16ps on column pairs, same order, same sums but for subnormals).
#include "backend/cpu/depthwise_filters.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/depthwise_filters_bf16.h"
#include "backend/cpu/depthwise_filters_rows.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd_convert.h"
#include "backend/cpu/target_clones.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

using depthwise::ColumnRange;
using depthwise::kNarrowBlock;
using depthwise::kWideBlock;
using depthwise::RowPlan;
using depthwise::RowSpan;
using depthwise::valid_columns;

// At most this many blocks of (n, oh) rows: a fixed partition (it depends on the geometry only),
// so the block sums, added in block order, do not depend on the thread count.
constexpr std::int64_t kMaxBlocks = 16;
// At least this many output columns (rows * out_w) per block, so that zeroing and summing a
// block's partial (KH * KW * C floats) stays small next to its multiply-adds (up to KH * KW * C per
// column): EfficientNet's 2x2 rows would otherwise zero and sum 16 partials of 4 rows each.
constexpr std::int64_t kMinColumnsPerBlock = 64;
// Parallel only when there is enough work to pay for the threads (multiply-adds).
constexpr std::int64_t kParallelWork = std::int64_t{1} << 15;
// Channels per register block of the generic loop.
constexpr std::int64_t kChannelBlock = 64;
// Filter elements per chunk of the sum of the block partials, and the least number of partial
// elements (blocks * filter elements) that the sum runs in parallel for.
constexpr std::int64_t kSumChunk = 2048;
constexpr std::int64_t kParallelSum = std::int64_t{1} << 16;

// acc[c] += sum over j in [0, columns) of x[j * x_step + c] * dy[j * C + c] for c in [0, count);
// count == kChannelBlock keeps the block's sums in registers over the columns. 16-bit values are
// widened in registers (simd_convert.h), so every input row is read as stored, once per tap.
template <typename T>
MIXPREC_CPU_ALWAYS_INLINE void accumulate_body(const T* x, std::int64_t x_step, const T* dy,
                                               std::int64_t channels, std::int64_t columns,
                                               std::int64_t count, float* acc) {
  if (count == kChannelBlock) {
    float a[kChannelBlock];
    for (std::int64_t c = 0; c < kChannelBlock; ++c) a[c] = acc[c];
    for (std::int64_t ow = 0; ow < columns; ++ow) {
      const T* xp = x + ow * x_step;
      const T* dp = dy + ow * channels;
#pragma omp simd
      for (std::int64_t c = 0; c < kChannelBlock; ++c) {
        a[c] += simd::load(xp + c) * simd::load(dp + c);
      }
    }
    for (std::int64_t c = 0; c < kChannelBlock; ++c) acc[c] = a[c];
    return;
  }
  for (std::int64_t ow = 0; ow < columns; ++ow) {
    const T* xp = x + ow * x_step;
    const T* dp = dy + ow * channels;
#pragma omp simd
    for (std::int64_t c = 0; c < count; ++c) acc[c] += simd::load(xp + c) * simd::load(dp + c);
  }
}

// The generic loop for one input row x_row (kh fixed) and output row dy_row over the channels
// [c_begin, C): tap by tap, all of its valid columns. acc holds this kh's KW * C sums.
template <typename T>
MIXPREC_CPU_ALWAYS_INLINE void generic_taps(const T* x_row, const T* dy_row, const ConvGeometry& g,
                                            std::int64_t c_begin, float* acc) {
  const std::int64_t C = g.in_channels;
  for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
    const ColumnRange cols = valid_columns(g, kw);
    if (cols.lo >= cols.hi) continue;
    // Column ow reads input column ow * stride_w + kw * dilation_w - pad_left.
    const T* x0 = x_row + (cols.lo * g.stride_w + kw * g.dilation_w - g.pad_left) * C;
    const T* dy0 = dy_row + cols.lo * C;
    float* a = acc + kw * C;
    for (std::int64_t c0 = c_begin; c0 < C; c0 += kChannelBlock) {
      accumulate_body(x0 + c0, g.stride_w * C, dy0 + c0, C, cols.hi - cols.lo,
                      std::min(kChannelBlock, C - c0), a + c0);
    }
  }
}

// One edge column of the register-blocked loop: the taps that read inside the row (iw in
// [0, in_w)), each on its own, so that padding adds nothing (not even 0 * inf).
template <typename T, int KW, int B>
MIXPREC_CPU_ALWAYS_INLINE void edge_column(float (&a)[KW][B], const T* x_row, const T* dp,
                                           std::int64_t first_iw, std::int64_t in_w,
                                           std::int64_t C) {
  for (int kw = 0; kw < KW; ++kw) {
    const std::int64_t iw = first_iw + kw;
    if (iw < 0 || iw >= in_w) continue;
    const T* xp = x_row + iw * C;
#pragma omp simd
    for (int c = 0; c < B; ++c) a[kw][c] += simd::load(xp + c) * simd::load(dp + c);
  }
}

// The register-blocked loop for the rows of `rows` at filter row kh and the B channels at x / dy
// / acc (offset by the block's first channel): a[kw] holds tap kw's sums over all the rows and
// columns; an interior column loads each dy vector once for its KW taps.
template <typename T, int KW, int S, int B>
MIXPREC_CPU_ALWAYS_INLINE void blocked_taps(const T* x, const T* dy, const ConvGeometry& g,
                                            const RowPlan& p, const RowSpan& rows, float* acc) {
  const std::int64_t C = g.in_channels;
  float a[KW][B];
  for (int kw = 0; kw < KW; ++kw) {
    for (int c = 0; c < B; ++c) a[kw][c] = acc[kw * C + c];
  }
  rows.for_each(g, [&](std::int64_t r, std::int64_t in_row) {
    const T* x_row = x + in_row * g.in_w * C;
    const T* dy_row = dy + r * g.out_w * C;
    for (std::int64_t ow = 0; ow < p.lo; ++ow) {
      edge_column<T, KW, B>(a, x_row, dy_row + ow * C, ow * S - g.pad_left, g.in_w, C);
    }
    for (std::int64_t ow = p.lo; ow < p.hi; ++ow) {
      const T* xp = x_row + (ow * S - g.pad_left) * C;
      const T* dp = dy_row + ow * C;
#pragma omp simd
      for (int c = 0; c < B; ++c) {
        const float d = simd::load(dp + c);
#pragma GCC unroll 8
        for (int kw = 0; kw < KW; ++kw) a[kw][c] += simd::load(xp + kw * C + c) * d;
      }
    }
    for (std::int64_t ow = p.hi; ow < g.out_w; ++ow) {
      edge_column<T, KW, B>(a, x_row, dy_row + ow * C, ow * S - g.pad_left, g.in_w, C);
    }
  });
  for (int kw = 0; kw < KW; ++kw) {
    for (int c = 0; c < B; ++c) acc[kw * C + c] = a[kw][c];
  }
}

// blocked_taps over the channel blocks of width B from c_begin; returns the first channel left.
template <typename T, int KW, int S, int B>
MIXPREC_CPU_ALWAYS_INLINE std::int64_t blocked_range(const T* x, const T* dy, const ConvGeometry& g,
                                                     const RowPlan& p, const RowSpan& rows,
                                                     std::int64_t c_begin, float* acc) {
  std::int64_t c0 = c_begin;
  for (; c0 + B <= g.in_channels; c0 += B) {
    blocked_taps<T, KW, S, B>(x + c0, dy + c0, g, p, rows, acc + c0);
  }
  return c0;
}

// The channel blocks: 64 channels (12 sums in registers) at width 3, 32 (10 sums) at width 5,
// then one of 32 and one of 16 for what is left; returns the first channel left.
template <typename T, int KW, int S>
MIXPREC_CPU_ALWAYS_INLINE std::int64_t blocked_channels(const T* x, const T* dy,
                                                        const ConvGeometry& g, const RowPlan& p,
                                                        const RowSpan& rows, float* acc) {
  constexpr int kWide = KW == 3 ? 2 * kWideBlock : kWideBlock;
  std::int64_t c0 = blocked_range<T, KW, S, kWide>(x, dy, g, p, rows, 0, acc);
  if constexpr (kWide > kWideBlock) {
    c0 = blocked_range<T, KW, S, kWideBlock>(x, dy, g, p, rows, c0, acc);
  }
  return blocked_range<T, KW, S, kNarrowBlock>(x, dy, g, p, rows, c0, acc);
}

// The register-blocked loop of the plan's kind on the leading channels; returns the first channel
// it left (0 when the plan has none).
template <typename T>
MIXPREC_CPU_ALWAYS_INLINE std::int64_t blocked_kinds(const T* x, const T* dy, const ConvGeometry& g,
                                                     const RowPlan& p, const RowSpan& rows,
                                                     float* acc) {
  switch (p.kind) {
    case 31: return blocked_channels<T, 3, 1>(x, dy, g, p, rows, acc);
    case 32: return blocked_channels<T, 3, 2>(x, dy, g, p, rows, acc);
    case 51: return blocked_channels<T, 5, 1>(x, dy, g, p, rows, acc);
    case 52: return blocked_channels<T, 5, 2>(x, dy, g, p, rows, acc);
    default: return 0;
  }
}

// Adds the contributions of the rows of `rows` at filter row rows.kh to acc (that kh's KW * C
// sums): the register-blocked loop where the plan has one (for bfloat16 the AVX512_BF16 one where
// the plan says so), the generic loop for the rest.
template <typename T>
MIXPREC_CPU_ALWAYS_INLINE void rows_body(const T* x, const T* dy, const ConvGeometry& g,
                                         const RowPlan& p, const RowSpan& rows, float* acc) {
  std::int64_t c0 = 0;
  if constexpr (std::is_same_v<T, bfloat16>) {
    c0 = p.bf16_dot ? depthwise::blocked_channels_bf16_dot(x, dy, g, p, rows, acc)
                    : blocked_kinds(x, dy, g, p, rows, acc);
  } else {
    c0 = blocked_kinds(x, dy, g, p, rows, acc);
  }
  if (c0 >= g.in_channels) return;
  rows.for_each(g, [&](std::int64_t r, std::int64_t in_row) {
    generic_taps(x + in_row * g.in_w * g.in_channels, dy + r * g.out_w * g.in_channels, g, c0, acc);
  });
}

// One compiled copy per storage type, each cloned for AVX-512 / AVX2 / the baseline
// (target_clones.h).
MIXPREC_CPU_CLONES void accumulate_rows(const float* x, const float* dy, const ConvGeometry& g,
                                        const RowPlan& p, const RowSpan& rows, float* acc) {
  rows_body(x, dy, g, p, rows, acc);
}
MIXPREC_CPU_CLONES void accumulate_rows(const bfloat16* x, const bfloat16* dy,
                                        const ConvGeometry& g, const RowPlan& p,
                                        const RowSpan& rows, float* acc) {
  rows_body(x, dy, g, p, rows, acc);
}
MIXPREC_CPU_CLONES void accumulate_rows(const float16* x, const float16* dy, const ConvGeometry& g,
                                        const RowPlan& p, const RowSpan& rows, float* acc) {
  rows_body(x, dy, g, p, rows, acc);
}

// out[i] = the sum over blocks b (in order) of partial[b * size + i] for i in [begin, end),
// rounded once to T.
template <typename T>
MIXPREC_CPU_ALWAYS_INLINE void sum_body(const float* partial, std::int64_t size,
                                        std::int64_t blocks, std::int64_t begin, std::int64_t end,
                                        T* out) {
  float total[kSumChunk];
  const std::int64_t n = end - begin;
  const float* p0 = partial + begin;
  for (std::int64_t i = 0; i < n; ++i) total[i] = p0[i];
  for (std::int64_t b = 1; b < blocks; ++b) {
    const float* p = partial + b * size + begin;
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) total[i] += p[i];
  }
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) simd::store(out + begin + i, total[i]);
}

MIXPREC_CPU_CLONES void sum_blocks(const float* partial, std::int64_t size, std::int64_t blocks,
                                   std::int64_t begin, std::int64_t end, float* out) {
  sum_body(partial, size, blocks, begin, end, out);
}
MIXPREC_CPU_CLONES void sum_blocks(const float* partial, std::int64_t size, std::int64_t blocks,
                                   std::int64_t begin, std::int64_t end, bfloat16* out) {
  sum_body(partial, size, blocks, begin, end, out);
}
MIXPREC_CPU_CLONES void sum_blocks(const float* partial, std::int64_t size, std::int64_t blocks,
                                   std::int64_t begin, std::int64_t end, float16* out) {
  sum_body(partial, size, blocks, begin, end, out);
}

// Block b's partial: zeroed, then the rows of block b added in order (filter row by filter row:
// every sum still adds its rows, and each row's columns, in increasing order).
template <typename T>
void accumulate_block(const T* x, const T* dy, const ConvGeometry& g, const RowPlan& p,
                      std::int64_t b, std::int64_t blocks, float* acc) {
  const std::int64_t rows = g.batch * g.out_h;
  const std::int64_t taps = g.kernel_w * g.in_channels;
  std::fill(acc, acc + g.kernel_h * taps, 0.0f);
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    const RowSpan span{kh, b * rows / blocks, (b + 1) * rows / blocks};
    accumulate_rows(x, dy, g, p, span, acc + kh * taps);
  }
}

template <typename T>
void backward_filters(const T* x, const T* dy, T* dw, const ConvGeometry& g) {
  const std::int64_t rows = g.batch * g.out_h;
  const std::int64_t size = g.kernel_h * g.kernel_w * g.in_channels;
  const std::int64_t blocks =
      std::max<std::int64_t>(1, std::min({rows * g.out_w / kMinColumnsPerBlock, rows, kMaxBlocks}));
  // The partials come from the host allocator's block cache (no page faults in the steady state);
  // each is zeroed by the thread that fills it.
  Tensor scratch = core::make_tensor(Shape{blocks * size}, DType::float32, Device::cpu());
  float* partial = static_cast<float*>(scratch.data_ptr());
  RowPlan plan = depthwise::plan_rows(g);
  plan.bf16_dot = std::is_same_v<T, bfloat16> && plan.kind != 0 && depthwise::bf16_dot_in_use();
  const std::int64_t chunks = (size + kSumChunk - 1) / kSumChunk;
  const auto fill = [&](std::int64_t b) {
    accumulate_block(x, dy, g, plan, b, blocks, partial + b * size);
  };
  const auto sum = [&](std::int64_t i) {
    sum_blocks(partial, size, blocks, i * kSumChunk, std::min(size, (i + 1) * kSumChunk), dw);
  };
  if (rows * g.out_w * size <= kParallelWork) {
    for (std::int64_t b = 0; b < blocks; ++b) fill(b);
    for (std::int64_t i = 0; i < chunks; ++i) sum(i);
  } else if (chunks < 2 || blocks * size < kParallelSum) {
    // A small sum costs less than the barrier a parallel one needs.
    parallel_for(blocks, true, fill);
    for (std::int64_t i = 0; i < chunks; ++i) sum(i);
  } else {
    // One parallel region for both loops (the implicit barrier of the first orders them).
#pragma omp parallel
    {
#pragma omp for schedule(static)
      for (std::int64_t b = 0; b < blocks; ++b) fill(b);
#pragma omp for schedule(static) nowait
      for (std::int64_t i = 0; i < chunks; ++i) sum(i);
    }
  }
}

}  // namespace

bool is_depthwise_geometry(const ConvGeometry& g) {
  return g.in_channels > 0 && g.groups == g.in_channels && g.out_channels == g.in_channels;
}

Tensor depthwise_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g) {
  const DType dtype = x.dtype();
  Tensor dw =
      core::make_tensor(Shape{g.kernel_h, g.kernel_w, 1, g.out_channels}, dtype, Device::cpu());
  core::dispatch_floating(dtype, "depthwise_backward_filters", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, float16> ||
                  std::is_same_v<T, bfloat16>) {
      backward_filters<T>(static_cast<const T*>(x.data_ptr()), static_cast<const T*>(dy.data_ptr()),
                          static_cast<T*>(dw.data_ptr()), g);
    } else {
      throw Error("cpu::depthwise_backward_filters: float32, float16 or bfloat16 only");
    }
  });
  return dw;
}

}  // namespace mixprec::cpu
