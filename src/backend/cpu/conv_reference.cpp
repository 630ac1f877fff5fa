// Plain loops for the convolution; see conv_reference.h. Every output element is one running sum
// owned by one thread in a fixed order, so results do not depend on the thread count.
#include "backend/cpu/conv_reference.h"

#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// Parallel only when there is enough work to pay for the threads (multiply-adds).
constexpr std::int64_t kParallelWork = std::int64_t{1} << 15;

// Accumulation::float32: a float64 sum, rounded once at the end.
template <typename T>
struct WideSum {
  double sum = 0.0;
  void add(T a, T b) { sum += core::to_double(a) * core::to_double(b); }
  T finish(const T* bias) const {
    return core::store_as<T>(bias ? sum + core::to_double(*bias) : sum);
  }
};

// Accumulation::compute_dtype: every partial sum rounded to T (C is float, or double for float64).
template <typename T>
struct StorageSum {
  using C = core::compute_t<T>;
  C sum = C(0);
  void add(T a, T b) {
    sum = core::load_as<C>(core::store_as<T>(sum + core::load_as<C>(a) * core::load_as<C>(b)));
  }
  T finish(const T* bias) const {
    return core::store_as<T>(bias ? sum + core::load_as<C>(*bias) : sum);
  }
};

template <typename T, typename Sum>
void forward(const T* x, const T* w, const T* bias, T* y, const ConvGeometry& g) {
  const std::int64_t icg = g.in_per_group(), ocg = g.out_per_group(), cout = g.out_channels;
  const std::int64_t rows = g.batch * g.out_h;
  const std::int64_t work = rows * g.out_w * cout * g.kernel_h * g.kernel_w * icg;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t n = r / g.out_h, oh = r % g.out_h;
    for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
      T* out = y + ((n * g.out_h + oh) * g.out_w + ow) * cout;
      for (std::int64_t oc = 0; oc < cout; ++oc) {
        const std::int64_t c0 = (oc / ocg) * icg;  // first input channel of oc's group
        Sum s;
        for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
          if (ih < 0 || ih >= g.in_h) continue;  // zero padding
          for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
            if (iw < 0 || iw >= g.in_w) continue;
            const T* xp = x + ((n * g.in_h + ih) * g.in_w + iw) * g.in_channels + c0;
            const T* wp = w + (kh * g.kernel_w + kw) * icg * cout + oc;
            for (std::int64_t i = 0; i < icg; ++i) s.add(xp[i], wp[i * cout]);
          }
        }
        out[oc] = s.finish(bias ? bias + oc : nullptr);
      }
    }
  }
}

template <typename T, typename Sum>
void backward_data(const T* dy, const T* w, T* dx, const ConvGeometry& g) {
  const std::int64_t icg = g.in_per_group(), ocg = g.out_per_group(), cout = g.out_channels;
  const std::int64_t rows = g.batch * g.in_h;
  const std::int64_t work = rows * g.in_w * g.in_channels * g.kernel_h * g.kernel_w * ocg;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t n = r / g.in_h, ih = r % g.in_h;
    for (std::int64_t iw = 0; iw < g.in_w; ++iw) {
      T* out = dx + ((n * g.in_h + ih) * g.in_w + iw) * g.in_channels;
      for (std::int64_t c = 0; c < g.in_channels; ++c) {
        const std::int64_t group = c / icg, i = c - group * icg;
        Sum s;
        for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
          // The output row whose tap kh reads row ih, if there is one.
          const std::int64_t th = ih + g.pad_top - kh * g.dilation_h;
          if (th < 0 || th % g.stride_h != 0 || th / g.stride_h >= g.out_h) continue;
          const std::int64_t oh = th / g.stride_h;
          for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const std::int64_t tw = iw + g.pad_left - kw * g.dilation_w;
            if (tw < 0 || tw % g.stride_w != 0 || tw / g.stride_w >= g.out_w) continue;
            const std::int64_t ow = tw / g.stride_w;
            const T* dyp = dy + ((n * g.out_h + oh) * g.out_w + ow) * cout + group * ocg;
            const T* wp = w + ((kh * g.kernel_w + kw) * icg + i) * cout + group * ocg;
            for (std::int64_t o = 0; o < ocg; ++o) s.add(dyp[o], wp[o]);
          }
        }
        out[c] = s.finish(nullptr);
      }
    }
  }
}

template <typename T, typename Sum>
void backward_filters(const T* x, const T* dy, T* dw, const ConvGeometry& g) {
  const std::int64_t icg = g.in_per_group(), ocg = g.out_per_group(), cout = g.out_channels;
  const std::int64_t units = g.kernel_h * g.kernel_w * icg;  // one (kh, kw, i) filter row each
  const std::int64_t work = units * cout * g.batch * g.out_h * g.out_w;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (std::int64_t u = 0; u < units; ++u) {
    const std::int64_t i = u % icg, kw = (u / icg) % g.kernel_w, kh = u / (icg * g.kernel_w);
    std::vector<Sum> sums(static_cast<std::size_t>(cout));
    for (std::int64_t n = 0; n < g.batch; ++n) {
      for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
        const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
        if (ih < 0 || ih >= g.in_h) continue;
        for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
          const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
          if (iw < 0 || iw >= g.in_w) continue;
          const T* xp = x + ((n * g.in_h + ih) * g.in_w + iw) * g.in_channels + i;
          const T* dyp = dy + ((n * g.out_h + oh) * g.out_w + ow) * cout;
          for (std::int64_t oc = 0; oc < cout; ++oc) {
            sums[static_cast<std::size_t>(oc)].add(xp[(oc / ocg) * icg], dyp[oc]);
          }
        }
      }
    }
    T* out = dw + u * cout;
    for (std::int64_t oc = 0; oc < cout; ++oc) {
      out[oc] = sums[static_cast<std::size_t>(oc)].finish(nullptr);
    }
  }
}

void check(const char* what, const Tensor& t, const Shape& expected, DType dtype) {
  if (!t.defined() || t.shape() != expected || t.dtype() != dtype || !t.device().is_cpu() ||
      !is_floating(dtype)) {
    throw Error(std::string("cpu::conv2d_reference: ") + what + " must be a CPU " +
                std::string(dtype_name(dtype)) + " tensor of shape " + expected.to_string() +
                " (a floating dtype), got " +
                (t.defined() ? std::string(dtype_name(t.dtype())) + " " + t.shape().to_string()
                             : std::string("an undefined tensor")));
  }
}

Shape x_shape(const ConvGeometry& g) { return Shape{g.batch, g.in_h, g.in_w, g.in_channels}; }
Shape y_shape(const ConvGeometry& g) { return Shape{g.batch, g.out_h, g.out_w, g.out_channels}; }
Shape filters_shape(const ConvGeometry& g) {
  return Shape{g.kernel_h, g.kernel_w, g.in_per_group(), g.out_channels};
}

template <typename T>
const T* data_of(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

// Runs `kernel.template operator()<T, Sum>()` for the dtype and accumulation.
template <typename F>
void dispatch(DType dtype, Accumulation accumulation, F&& kernel) {
  core::dispatch_floating(dtype, "conv2d_reference", [&]<typename T>() {
    if (accumulation == Accumulation::float32) {
      kernel.template operator()<T, WideSum<T>>();
    } else {
      kernel.template operator()<T, StorageSum<T>>();
    }
  });
}

}  // namespace

Tensor conv2d_reference_forward(const Tensor& x, const Tensor& filters, const Tensor& bias,
                                const ConvGeometry& g, Accumulation accumulation) {
  const DType dtype = x.dtype();
  check("x", x, x_shape(g), dtype);
  check("filters", filters, filters_shape(g), dtype);
  if (bias.defined()) check("bias", bias, Shape{g.out_channels}, dtype);
  const Tensor xc = x.detach().contiguous(), wc = filters.detach().contiguous();
  const Tensor bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = core::make_tensor(y_shape(g), dtype, Device::cpu());
  dispatch(dtype, accumulation, [&]<typename T, typename Sum>() {
    forward<T, Sum>(data_of<T>(xc), data_of<T>(wc), data_of<T>(bc), static_cast<T*>(y.data_ptr()),
                    g);
  });
  return y;
}

Tensor conv2d_reference_backward_data(const Tensor& dy, const Tensor& filters,
                                      const ConvGeometry& g, Accumulation accumulation) {
  const DType dtype = dy.dtype();
  check("dy", dy, y_shape(g), dtype);
  check("filters", filters, filters_shape(g), dtype);
  const Tensor dyc = dy.detach().contiguous(), wc = filters.detach().contiguous();
  Tensor dx = core::make_tensor(x_shape(g), dtype, Device::cpu());
  dispatch(dtype, accumulation, [&]<typename T, typename Sum>() {
    backward_data<T, Sum>(data_of<T>(dyc), data_of<T>(wc), static_cast<T*>(dx.data_ptr()), g);
  });
  return dx;
}

Tensor conv2d_reference_backward_filters(const Tensor& x, const Tensor& dy, const ConvGeometry& g,
                                         Accumulation accumulation) {
  const DType dtype = x.dtype();
  check("x", x, x_shape(g), dtype);
  check("dy", dy, y_shape(g), dtype);
  const Tensor xc = x.detach().contiguous(), dyc = dy.detach().contiguous();
  Tensor dw = core::make_tensor(filters_shape(g), dtype, Device::cpu());
  dispatch(dtype, accumulation, [&]<typename T, typename Sum>() {
    backward_filters<T, Sum>(data_of<T>(xc), data_of<T>(dyc), static_cast<T*>(dw.data_ptr()), g);
  });
  return dw;
}

}  // namespace mixprec::cpu
