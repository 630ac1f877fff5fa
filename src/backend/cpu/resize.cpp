// CPU zero padding (a row copy) and bilinear resize (resize.h). Resize: separable interpolation,
// one output row at a time. Forward: the two input rows an output row reads are interpolated
// horizontally (kept while consecutive output rows read the same input rows, which upsampling does
// for in/out of them), then blended vertically. Backward: each input row gathers the
// output-gradient rows that read it (vertical weights), then scatters that one row horizontally;
// gathering makes every input row the work of one thread, so no atomics and a result independent of
// the thread count.
#include "backend/cpu/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor_impl.h"
#include "mixprec/convert.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// out (N, OH, OW, C), contiguous = x (N, H, W, C), contiguous, at rows [top, top + H) and columns
// [left, left + W), zeros elsewhere. A byte copy, so every dtype works: each output row is either
// all padding or padding, one contiguous input row of W * C elements, padding.
void pad_rows(const Tensor& x, const Padding2d& p, Tensor& out) {
  const std::int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  const std::int64_t oh = out.dim(1), ow = out.dim(2);
  const std::size_t elem = dtype_size(x.dtype());
  const std::size_t in_row = static_cast<std::size_t>(w * c) * elem;
  const std::size_t out_row = static_cast<std::size_t>(ow * c) * elem;
  const std::size_t before = static_cast<std::size_t>(p.left * c) * elem;
  const std::size_t after = out_row - before - in_row;
  const auto* src = static_cast<const unsigned char*>(x.data_ptr());
  auto* dst = static_cast<unsigned char*>(out.data_ptr());
  const std::int64_t rows = n * oh;
#pragma omp parallel for schedule(static) if (out.nbytes() >= (std::size_t{1} << 18))
  for (std::int64_t r = 0; r < rows; ++r) {
    unsigned char* o = dst + static_cast<std::size_t>(r) * out_row;
    const std::int64_t y = r % oh - p.top;  // input row, when inside
    if (y < 0 || y >= h) {
      std::memset(o, 0, out_row);
      continue;
    }
    std::memset(o, 0, before);
    std::memcpy(o + before, src + static_cast<std::size_t>((r / oh) * h + y) * in_row, in_row);
    std::memset(o + before + in_row, 0, after);
  }
}

// Below this many output elements the loops run on one thread.
constexpr std::int64_t kParallelElements = std::int64_t{1} << 15;

// Output index o along one axis reads value = in[i0] + w * (in[i1] - in[i0]).
template <typename P>
struct Tap {
  std::int64_t i0 = 0, i1 = 0;
  P w = 0;
};

template <typename P>
std::vector<Tap<P>> taps(std::int64_t in, std::int64_t out) {
  std::vector<Tap<P>> result(static_cast<std::size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    // Half-pixel centers; a source left of the first center clamps to it (PyTorch's rule, the same
    // values as TensorFlow's, which clamps the indices instead). s < in - 0.5 always.
    const double s = std::max((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0);
    Tap<P>& t = result[static_cast<std::size_t>(o)];
    t.i0 = std::min(static_cast<std::int64_t>(s), in - 1);
    t.i1 = std::min(t.i0 + 1, in - 1);
    t.w = t.i1 == t.i0 ? P(0) : static_cast<P>(s - static_cast<double>(t.i0));
  }
  return result;
}

template <typename P, typename T>
void load_row(const T* src, std::int64_t n, P* dst) {
  if constexpr (std::is_same_v<T, P>) {
    std::copy(src, src + n, dst);
  } else {
    convert(src, dst, static_cast<std::size_t>(n));
  }
}

template <typename P, typename T>
void store_row(const P* src, std::int64_t n, T* dst) {
  if constexpr (std::is_same_v<T, P>) {
    std::copy(src, src + n, dst);
  } else {
    convert(src, dst, static_cast<std::size_t>(n));
  }
}

// out (OW * C) = the input row `row` (W * C) interpolated along the width.
template <typename P>
void interpolate_row(const P* row, const std::vector<Tap<P>>& tx, std::int64_t c, P* out) {
  const std::int64_t ow = static_cast<std::int64_t>(tx.size());
  for (std::int64_t ox = 0; ox < ow; ++ox) {
    const Tap<P>& t = tx[static_cast<std::size_t>(ox)];
    const P* a = row + t.i0 * c;
    const P* b = row + t.i1 * c;
    P* o = out + ox * c;
    if (t.w == P(0)) {  // exact (an identity resize copies; Inf stays Inf instead of NaN)
      std::copy(a, a + c, o);
      continue;
    }
#pragma omp simd
    for (std::int64_t j = 0; j < c; ++j) o[j] = a[j] + t.w * (b[j] - a[j]);
  }
}

template <typename T>
void forward(const T* x, std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c,
             std::int64_t oh, std::int64_t ow, T* y) {
  using P = core::compute_t<T>;
  const auto ty = taps<P>(h, oh);
  const auto tx = taps<P>(w, ow);
  const std::int64_t in_row = w * c, out_row = ow * c;
  const std::int64_t units = n * oh;
#pragma omp parallel if (units * out_row >= kParallelElements)
  {
    std::vector<P> in(static_cast<std::size_t>(in_row));
    std::vector<P> top(static_cast<std::size_t>(out_row)), bottom(top.size()), out(top.size());
    // The input rows whose horizontal interpolations `top` and `bottom` hold (-1: none).
    std::int64_t top_row = -1, bottom_row = -1;
    auto fill = [&](std::int64_t row, std::vector<P>& dst) {
      load_row(x + row * in_row, in_row, in.data());
      interpolate_row(in.data(), tx, c, dst.data());
    };
#pragma omp for schedule(static)
    for (std::int64_t u = 0; u < units; ++u) {
      const std::int64_t image = u / oh;
      const Tap<P>& t = ty[static_cast<std::size_t>(u % oh)];
      const std::int64_t r0 = image * h + t.i0, r1 = image * h + t.i1;
      if (top_row != r0) {
        if (bottom_row == r0) {
          std::swap(top, bottom);
          std::swap(top_row, bottom_row);
        } else {
          fill(r0, top);
          top_row = r0;
        }
      }
      T* dst = y + u * out_row;
      if (t.w == P(0)) {
        store_row(top.data(), out_row, dst);
        continue;
      }
      if (bottom_row != r1) {
        fill(r1, bottom);
        bottom_row = r1;
      }
      const P wy = t.w;
#pragma omp simd
      for (std::int64_t j = 0; j < out_row; ++j) out[j] = top[j] + wy * (bottom[j] - top[j]);
      store_row(out.data(), out_row, dst);
    }
  }
}

// For every input row y, the output rows that read it and with which weight, as CSR.
template <typename P>
struct RowSources {
  std::vector<std::int64_t> first;  // entries of input row y: [first[y], first[y + 1])
  std::vector<std::int64_t> out_row;
  std::vector<P> weight;
};

template <typename P>
RowSources<P> row_sources(const std::vector<Tap<P>>& ty, std::int64_t h) {
  RowSources<P> s;
  std::vector<std::int64_t> count(static_cast<std::size_t>(h) + 1, 0);
  for (const auto& t : ty) {
    ++count[static_cast<std::size_t>(t.i0)];
    if (t.w != P(0)) ++count[static_cast<std::size_t>(t.i1)];
  }
  s.first.assign(static_cast<std::size_t>(h) + 1, 0);
  for (std::int64_t y = 0; y < h; ++y) {
    s.first[static_cast<std::size_t>(y) + 1] =
        s.first[static_cast<std::size_t>(y)] + count[static_cast<std::size_t>(y)];
  }
  s.out_row.resize(static_cast<std::size_t>(s.first.back()));
  s.weight.resize(s.out_row.size());
  std::vector<std::int64_t> next(s.first.begin(), s.first.end() - 1);
  for (std::size_t o = 0; o < ty.size(); ++o) {
    const auto& t = ty[o];
    auto put = [&](std::int64_t y, P weight) {
      const auto k = static_cast<std::size_t>(next[static_cast<std::size_t>(y)]++);
      s.out_row[k] = static_cast<std::int64_t>(o);
      s.weight[k] = weight;
    };
    put(t.i0, P(1) - t.w);
    if (t.w != P(0)) put(t.i1, t.w);
  }
  return s;
}

template <typename T>
void backward(const T* dy, std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c,
              std::int64_t oh, std::int64_t ow, T* dx) {
  using P = core::compute_t<T>;
  const auto ty = taps<P>(h, oh);
  const auto tx = taps<P>(w, ow);
  const RowSources<P> sources = row_sources(ty, h);
  const std::int64_t in_row = w * c, out_row = ow * c;
  const std::int64_t units = n * h;
#pragma omp parallel if (n * oh * out_row >= kParallelElements)
  {
    std::vector<P> g(static_cast<std::size_t>(out_row)), column(g.size());
    std::vector<P> acc(static_cast<std::size_t>(in_row));
#pragma omp for schedule(static)
    for (std::int64_t u = 0; u < units; ++u) {
      const std::int64_t image = u / h, y = u % h;
      // Vertical: column = sum of the weighted gradient rows that read input row y.
      std::fill(column.begin(), column.end(), P(0));
      for (std::int64_t k = sources.first[static_cast<std::size_t>(y)];
           k < sources.first[static_cast<std::size_t>(y) + 1]; ++k) {
        const auto ku = static_cast<std::size_t>(k);
        load_row(dy + (image * oh + sources.out_row[ku]) * out_row, out_row, g.data());
        const P wy = sources.weight[ku];
#pragma omp simd
        for (std::int64_t j = 0; j < out_row; ++j) column[j] += wy * g[j];
      }
      // Horizontal: scatter each output column to its two input columns.
      std::fill(acc.begin(), acc.end(), P(0));
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        const Tap<P>& t = tx[static_cast<std::size_t>(ox)];
        const P* gv = column.data() + ox * c;
        P* a = acc.data() + t.i0 * c;
        P* b = acc.data() + t.i1 * c;
        const P wa = P(1) - t.w, wb = t.w;
        for (std::int64_t j = 0; j < c; ++j) {
          a[j] += wa * gv[j];
          b[j] += wb * gv[j];
        }
      }
      store_row(acc.data(), in_row, dx + u * in_row);
    }
  }
}

void check_nhwc(const char* op, const Tensor& t) {
  if (t.rank() != 4 || !is_floating(t.dtype()) || !t.device().is_cpu()) {
    throw Error(std::string(op) + ": expected a floating CPU tensor (N, H, W, C), got " +
                std::string(dtype_name(t.dtype())) + " " + t.shape().to_string());
  }
}

}  // namespace

Tensor resize_bilinear(const Tensor& x, std::int64_t height, std::int64_t width) {
  check_nhwc("cpu::resize_bilinear", x);
  const std::int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  if (height < 1 || width < 1 || h < 1 || w < 1) {
    throw ValueError("cpu::resize_bilinear: sizes must be >= 1 (input " + x.shape().to_string() +
                     ", output " + std::to_string(height) + "x" + std::to_string(width) + ")");
  }
  Tensor y = core::make_tensor(Shape{n, height, width, c}, x.dtype(), Device::cpu());
  if (y.numel() == 0) return y;
  const Tensor xc = x.contiguous();
  core::dispatch_floating(x.dtype(), "resize_bilinear", [&]<typename T>() {
    forward(xc.data<T>(), n, h, w, c, height, width, y.data<T>());
  });
  return y;
}

Tensor resize_bilinear_backward(const Tensor& dy, std::int64_t in_height, std::int64_t in_width) {
  check_nhwc("cpu::resize_bilinear_backward", dy);
  const std::int64_t n = dy.dim(0), oh = dy.dim(1), ow = dy.dim(2), c = dy.dim(3);
  if (oh < 1 || ow < 1 || in_height < 1 || in_width < 1) {
    throw ValueError("cpu::resize_bilinear_backward: sizes must be >= 1 (gradient " +
                     dy.shape().to_string() + ", input " + std::to_string(in_height) + "x" +
                     std::to_string(in_width) + ")");
  }
  Tensor dx = core::make_tensor(Shape{n, in_height, in_width, c}, dy.dtype(), Device::cpu());
  if (dx.numel() == 0) return dx;
  const Tensor gc = dy.contiguous();
  core::dispatch_floating(dy.dtype(), "resize_bilinear", [&]<typename T>() {
    backward(gc.data<T>(), n, in_height, in_width, c, oh, ow, dx.data<T>());
  });
  return dx;
}

Tensor zero_pad2d(const Tensor& x, const Padding2d& padding) {
  Tensor out = core::make_tensor(Shape{x.dim(0), padding.top + x.dim(1) + padding.bottom,
                                       padding.left + x.dim(2) + padding.right, x.dim(3)},
                                 x.dtype(), x.device());
  if (out.numel() > 0) pad_rows(x.contiguous(), padding, out);
  return out;
}

}  // namespace mixprec::cpu
