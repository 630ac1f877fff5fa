// The depthwise backward-filters kernel; see depthwise_filters.h. Vectorised over the contiguous
// channels, float32 accumulation, 16-bit values widened in registers, parallel over
// fixed blocks of (n, oh) rows with one accumulator of KH * KW * C floats per block.
#include "backend/cpu/depthwise_filters.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "backend/cpu/parallel.h"
#include "backend/cpu/simd_convert.h"
#include "backend/cpu/target_clones.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"
#include "mixprec/convert.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// At most this many blocks of (n, oh) rows: a fixed partition (it depends on the geometry only),
// so the block sums, added in block order, do not depend on the thread count.
constexpr std::int64_t kMaxBlocks = 16;
// Parallel only when there is enough work to pay for the threads (multiply-adds).
constexpr std::int64_t kParallelWork = std::int64_t{1} << 15;
// Channels per register block of the inner loop.
constexpr std::int64_t kChannelBlock = 64;

// The output columns [lo, hi) whose tap kw reads a column inside the input.
struct ColumnRange {
  std::int64_t lo = 0, hi = 0;
};

ColumnRange valid_columns(const ConvGeometry& g, std::int64_t kw) {
  const std::int64_t offset = kw * g.dilation_w - g.pad_left;  // iw = ow * stride_w + offset
  const std::int64_t s = g.stride_w;
  const std::int64_t lo = offset >= 0 ? 0 : (-offset + s - 1) / s;
  const std::int64_t limit = g.in_w - offset;  // ow * s < limit
  const std::int64_t hi = limit <= 0 ? 0 : std::min(g.out_w, (limit + s - 1) / s);
  return {lo, std::max(lo, hi)};
}

// acc[c] += sum over j in [0, columns) of x[j * x_step + c] * dy[j * C + c] for c in [0, count);
// count == kChannelBlock keeps the block's sums in registers over the columns. 16-bit values are
// widened in registers (simd_convert.h), so every input row is read as stored, once per tap.
template <typename T>
inline void accumulate_body(const T* x, std::int64_t x_step, const T* dy, std::int64_t channels,
                            std::int64_t columns, std::int64_t count, float* acc) {
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

// One compiled copy per storage type, each cloned for AVX-512 / AVX2 / the baseline
// (target_clones.h).
MIXPREC_CPU_CLONES void accumulate_columns(const float* x, std::int64_t x_step, const float* dy,
                                           std::int64_t channels, std::int64_t columns,
                                           std::int64_t count, float* acc) {
  accumulate_body(x, x_step, dy, channels, columns, count, acc);
}
MIXPREC_CPU_CLONES void accumulate_columns(const bfloat16* x, std::int64_t x_step,
                                           const bfloat16* dy, std::int64_t channels,
                                           std::int64_t columns, std::int64_t count, float* acc) {
  accumulate_body(x, x_step, dy, channels, columns, count, acc);
}
MIXPREC_CPU_CLONES void accumulate_columns(const float16* x, std::int64_t x_step, const float16* dy,
                                           std::int64_t channels, std::int64_t columns,
                                           std::int64_t count, float* acc) {
  accumulate_body(x, x_step, dy, channels, columns, count, acc);
}

// Adds output row (n, oh)'s contributions to acc (KH * KW * C floats).
template <typename T>
void accumulate_row(const T* x, const T* dy, std::int64_t n, std::int64_t oh, const ConvGeometry& g,
                    float* acc) {
  const std::int64_t C = g.in_channels;
  const T* dy_row = dy + (n * g.out_h + oh) * g.out_w * C;
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
    if (ih < 0 || ih >= g.in_h) continue;  // zero padding
    const T* x_row = x + (n * g.in_h + ih) * g.in_w * C;
    for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const ColumnRange cols = valid_columns(g, kw);
      if (cols.lo >= cols.hi) continue;
      // Column ow reads input column ow * stride_w + kw * dilation_w - pad_left.
      const T* x0 = x_row + (cols.lo * g.stride_w + kw * g.dilation_w - g.pad_left) * C;
      const T* dy0 = dy_row + cols.lo * C;
      float* a = acc + (kh * g.kernel_w + kw) * C;
      for (std::int64_t c0 = 0; c0 < C; c0 += kChannelBlock) {
        accumulate_columns(x0 + c0, g.stride_w * C, dy0 + c0, C, cols.hi - cols.lo,
                           std::min(kChannelBlock, C - c0), a + c0);
      }
    }
  }
}

template <typename T>
void backward_filters(const T* x, const T* dy, T* dw, const ConvGeometry& g) {
  const std::int64_t rows = g.batch * g.out_h;
  const std::int64_t size = g.kernel_h * g.kernel_w * g.in_channels;
  const std::int64_t blocks = std::min(rows, kMaxBlocks);
  std::vector<float> partial(static_cast<std::size_t>(std::max<std::int64_t>(blocks, 1) * size),
                             0.0f);
  const std::int64_t work = rows * g.out_w * size;
  parallel_for(blocks, work > kParallelWork, [&](std::int64_t b) {
    float* acc = partial.data() + b * size;
    for (std::int64_t r = b * rows / blocks; r < (b + 1) * rows / blocks; ++r) {
      accumulate_row(x, dy, r / g.out_h, r % g.out_h, g, acc);
    }
  });
  // The block sums in block order (block 0 holds the running total).
  float* total = partial.data();
  for (std::int64_t b = 1; b < blocks; ++b) {
    const float* p = partial.data() + b * size;
#pragma omp simd
    for (std::int64_t i = 0; i < size; ++i) total[i] += p[i];
  }
  if constexpr (std::is_same_v<T, float>) {
    std::copy(total, total + size, dw);
  } else {
    convert(total, dw, static_cast<std::size_t>(size));
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
