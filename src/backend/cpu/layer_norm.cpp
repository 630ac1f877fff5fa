// CPU layer / RMS normalization (see layer_norm.h): the reference loops, which are also the fast
// path (a row of a Transformer activation, C = 64..4096 values, fits in L1; the loops are plain
// vectorisable passes over it).
#include "backend/cpu/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/batch_norm_loops.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

using bn_loops::Rows;

DType stat_dtype(DType x_dtype) {
  return x_dtype == DType::float64 ? DType::float64 : DType::float32;
}

Rows rows_of(const Tensor& x) {
  Rows r;
  r.c = x.dim(-1);
  r.m = r.c > 0 ? x.numel() / r.c : 0;
  return r;
}

// Rows per parallel block: about 16k elements, at least one row (the blocks, not the threads,
// fix the order of the column sums).
std::int64_t block_rows(std::int64_t c) {
  return std::max<std::int64_t>(1, (std::int64_t{1} << 14) / std::max<std::int64_t>(c, 1));
}

// Below this many elements the loops run on one thread.
constexpr std::int64_t kParallelElements = std::int64_t{1} << 15;

template <typename P>
std::vector<P> values_or_empty(const Tensor& t) {
  return t.defined() ? t.to_vector<P>() : std::vector<P>();
}

template <typename P>
const P* pointer_or_null(const std::vector<P>& v) {
  return v.empty() ? nullptr : v.data();
}

// Row statistics of one row xs (c values in P): mean (0 for rms) and rstd.
template <typename P>
void row_statistics(RowNorm kind, const P* xs, std::int64_t c, P epsilon, P& mean, P& rstd) {
  if (kind == RowNorm::layer) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t j = 0; j < c; ++j) s += static_cast<double>(xs[j]);
    const P mu = static_cast<P>(s / static_cast<double>(c));
    double q = 0.0;
#pragma omp simd reduction(+ : q)
    for (std::int64_t j = 0; j < c; ++j) {
      const double d = static_cast<double>(xs[j] - mu);
      q += d * d;
    }
    const P variance = static_cast<P>(q / static_cast<double>(c));
    mean = mu;
    rstd = P(1) / std::sqrt(variance + epsilon);
  } else {
    double q = 0.0;
#pragma omp simd reduction(+ : q)
    for (std::int64_t j = 0; j < c; ++j) {
      const double v = static_cast<double>(xs[j]);
      q += v * v;
    }
    const P ms = static_cast<P>(q / static_cast<double>(c));
    mean = P(0);
    rstd = P(1) / std::sqrt(ms + epsilon);
  }
}

// The row's input in P: x's row (residual null), or the residual sum x + residual rounded to T as
// add rounds it (cpu/binary.cpp: both in P, added, converted), stored into sum's row and read
// back as rounded, so the statistics see exactly the tensor add would have returned.
template <typename T, typename P = core::compute_t<T>>
const P* row_input(const T* x, const T* residual, T* sum, std::int64_t c, P* in, P* other) {
  if (residual == nullptr) return bn_loops::view_or_convert(x, c, in);
  const P* xs = bn_loops::view_or_convert(x, c, in);
  const P* rs = bn_loops::view_or_convert(residual, c, other);
  P* ss = bn_loops::output<P>(sum, in);  // in place over `in` when T is not P: same index only
#pragma omp simd
  for (std::int64_t j = 0; j < c; ++j) ss[j] = xs[j] + rs[j];
  if constexpr (std::is_same_v<T, P>) {
    return ss;
  } else {
    bn_loops::store(ss, c, sum);
    convert(sum, in, static_cast<std::size_t>(c));  // the rounded sum, as the stats must see it
    return in;
  }
}

// x (M, C) and, for the fused residual step, residual (M, C) and sum (M, C) (else both null).
template <typename T>
void forward_rows(RowNorm kind, const T* x, const T* residual, T* sum, Rows r,
                  const core::compute_t<T>* gamma, const core::compute_t<T>* beta,
                  core::compute_t<T> epsilon, T* y, core::compute_t<T>* mean,
                  core::compute_t<T>* rstd) {
  using P = core::compute_t<T>;
  const std::int64_t c = r.c, step = block_rows(c);
  const std::int64_t blocks = (r.m + step - 1) / step;
#pragma omp parallel for schedule(static) if (r.m * c >= kParallelElements)
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::vector<P> in(static_cast<std::size_t>(c)), out(static_cast<std::size_t>(c));
    std::vector<P> other(residual != nullptr ? static_cast<std::size_t>(c) : 0);
    for (std::int64_t i = b * step; i < std::min(r.m, (b + 1) * step); ++i) {
      const P* xs = row_input(x + i * c, residual != nullptr ? residual + i * c : nullptr,
                              sum != nullptr ? sum + i * c : nullptr, c, in.data(), other.data());
      P mu, inv;
      row_statistics(kind, xs, c, epsilon, mu, inv);
      mean[i] = mu;
      rstd[i] = inv;
      P* ys = bn_loops::output<P>(y + i * c, out.data());
      if (kind == RowNorm::layer) {
#pragma omp simd
        for (std::int64_t j = 0; j < c; ++j) {
          P v = (xs[j] - mu) * inv;
          if (gamma != nullptr) v = v * gamma[j];
          if (beta != nullptr) v = v + beta[j];
          ys[j] = v;
        }
      } else {
#pragma omp simd
        for (std::int64_t j = 0; j < c; ++j) {
          P v = xs[j] * inv;
          if (gamma != nullptr) v = v * gamma[j];
          ys[j] = v;
        }
      }
      bn_loops::store(ys, c, y + i * c);
    }
  }
}

template <typename T>
void backward_rows(RowNorm kind, const T* dy, const T* x, Rows r, const core::compute_t<T>* gamma,
                   const core::compute_t<T>* mean, const core::compute_t<T>* rstd, T* dx,
                   core::compute_t<T>* dgamma, core::compute_t<T>* dbeta) {
  using P = core::compute_t<T>;
  const std::int64_t c = r.c, step = block_rows(c);
  const std::int64_t blocks = (r.m + step - 1) / step;
  // Per block: the column sums of dy * xhat (first c) and dy (next c) in P.
  std::vector<P> partial(static_cast<std::size_t>(std::max<std::int64_t>(blocks, 1) * 2 * c), P(0));
#pragma omp parallel for schedule(static) if (r.m * c >= kParallelElements)
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::vector<P> in_x(static_cast<std::size_t>(c)), in_g(in_x.size()), xhat(in_x.size()),
        g(in_x.size()), out(in_x.size());
    P* acc_gx = partial.data() + b * 2 * c;
    P* acc_g = acc_gx + c;
    for (std::int64_t i = b * step; i < std::min(r.m, (b + 1) * step); ++i) {
      const P* xs = bn_loops::view_or_convert(x + i * c, c, in_x.data());
      const P* gs = bn_loops::view_or_convert(dy + i * c, c, in_g.data());
      const P mu = mean[i], inv = rstd[i];
      double sum_g = 0.0, sum_gx = 0.0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (std::int64_t j = 0; j < c; ++j) {
        const P h = kind == RowNorm::layer ? (xs[j] - mu) * inv : xs[j] * inv;
        const P gj = gamma != nullptr ? gs[j] * gamma[j] : gs[j];
        xhat[j] = h;
        g[j] = gj;
        sum_g += static_cast<double>(gj);
        sum_gx += static_cast<double>(gj * h);
        acc_gx[j] += gs[j] * h;
        acc_g[j] += gs[j];
      }
      const P a = kind == RowNorm::layer ? static_cast<P>(sum_g / static_cast<double>(c)) : P(0);
      const P bm = static_cast<P>(sum_gx / static_cast<double>(c));
      P* ds = bn_loops::output<P>(dx + i * c, out.data());
#pragma omp simd
      for (std::int64_t j = 0; j < c; ++j) ds[j] = inv * (g[j] - a - xhat[j] * bm);
      bn_loops::store(ds, c, dx + i * c);
    }
  }
  for (std::int64_t j = 0; j < c; ++j) {
    double sgx = 0.0, sg = 0.0;
    for (std::int64_t b = 0; b < blocks; ++b) {
      sgx += static_cast<double>(partial[static_cast<std::size_t>(b * 2 * c + j)]);
      sg += static_cast<double>(partial[static_cast<std::size_t>(b * 2 * c + c + j)]);
    }
    dgamma[j] = static_cast<P>(sgx);
    dbeta[j] = kind == RowNorm::layer ? static_cast<P>(sg) : P(0);
  }
}

}  // namespace

RowNormResult row_norm_forward(RowNorm kind, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, double epsilon) {
  const Rows r = rows_of(x);
  const DType stat = stat_dtype(x.dtype());
  RowNormResult out{core::make_tensor(x.shape(), x.dtype(), Device::cpu()),
                    core::make_tensor(Shape{r.m}, stat, Device::cpu()),
                    core::make_tensor(Shape{r.m}, stat, Device::cpu())};
  if (r.m == 0) return out;
  const Tensor xc = x.contiguous();
  core::dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>() {
    using P = core::compute_t<T>;
    const std::vector<P> g = values_or_empty<P>(gamma);
    const std::vector<P> b = kind == RowNorm::layer ? values_or_empty<P>(beta) : std::vector<P>();
    forward_rows<T>(kind, xc.data<T>(), nullptr, nullptr, r, pointer_or_null(g), pointer_or_null(b),
                    static_cast<P>(epsilon), out.y.data<T>(), out.mean.data<P>(),
                    out.rstd.data<P>());
  });
  return out;
}

AddRowNormResult add_row_norm_forward(RowNorm kind, const Tensor& a, const Tensor& b,
                                      const Tensor& gamma, const Tensor& beta, double epsilon) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) {
    throw Error("cpu::add_row_norm_forward: a and b must have one shape and dtype");
  }
  const Rows r = rows_of(a);
  const DType stat = stat_dtype(a.dtype());
  AddRowNormResult out{core::make_tensor(a.shape(), a.dtype(), Device::cpu()),
                       core::make_tensor(a.shape(), a.dtype(), Device::cpu()),
                       core::make_tensor(Shape{r.m}, stat, Device::cpu()),
                       core::make_tensor(Shape{r.m}, stat, Device::cpu())};
  if (r.m == 0) return out;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  core::dispatch_floating(a.dtype(), "layer_norm", [&]<typename T>() {
    using P = core::compute_t<T>;
    const std::vector<P> g = values_or_empty<P>(gamma);
    const std::vector<P> bt = kind == RowNorm::layer ? values_or_empty<P>(beta) : std::vector<P>();
    forward_rows<T>(kind, ac.data<T>(), bc.data<T>(), out.sum.data<T>(), r, pointer_or_null(g),
                    pointer_or_null(bt), static_cast<P>(epsilon), out.y.data<T>(),
                    out.mean.data<P>(), out.rstd.data<P>());
  });
  return out;
}

RowNormGradients row_norm_backward(RowNorm kind, const Tensor& dy, const Tensor& x,
                                   const Tensor& gamma, const Tensor& mean, const Tensor& rstd) {
  if (dy.dtype() != x.dtype() || dy.shape() != x.shape()) {
    throw Error("cpu::row_norm_backward: the gradient must have x's shape and dtype");
  }
  const Rows r = rows_of(x);
  const DType stat = stat_dtype(x.dtype());
  RowNormGradients out{core::make_tensor(x.shape(), x.dtype(), Device::cpu()),
                       core::make_tensor(Shape{r.c}, stat, Device::cpu()),
                       core::make_tensor(Shape{r.c}, stat, Device::cpu())};
  if (r.m == 0) {
    for (Tensor* t : {&out.dgamma, &out.dbeta}) {
      std::memset(t->data_ptr(), 0, t->nbytes());
    }
    return out;
  }
  const Tensor xc = x.contiguous(), gc = dy.contiguous();
  core::dispatch_floating(x.dtype(), "layer_norm", [&]<typename T>() {
    using P = core::compute_t<T>;
    const std::vector<P> g = values_or_empty<P>(gamma);
    const Tensor mc = mean.contiguous(), rc = rstd.contiguous();
    backward_rows(kind, gc.data<T>(), xc.data<T>(), r, pointer_or_null(g), mc.data<P>(),
                  rc.data<P>(), out.dx.data<T>(), out.dgamma.data<P>(), out.dbeta.data<P>());
  });
  return out;
}

}  // namespace mixprec::cpu
