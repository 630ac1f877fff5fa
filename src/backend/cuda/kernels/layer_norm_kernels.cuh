// The layer / RMS normalization kernels (launched by layer_norm.cu; see cuda/layer_norm.h), in a
// header of their own so that a host emulation can run them on the CPU
// (tests/unit/cuda_layer_norm_emulation_test.cpp). They use only to_compute, from_compute,
// compute_t, sqrt, global_thread, grid_threads, block_ordered_sum, block_index, thread_in_block
// and kThreads, defined by common.cuh for the device and by tests/support/cuda_host_emulation.h
// for the host. Include after one of those two headers.
//
// x (rows, C) row-major, P = compute_t<T> (float; double for float64). The expressions are the
// CPU's (cpu/layer_norm.h), the sums taken in double in block_ordered_sum's fixed order:
//   layer: mean = P(sum(x) / C), variance = P(sum(double(x - mean)^2) / C),
//          rstd = P(1) / sqrt(variance + epsilon), y = ((x - mean) * rstd) * gamma + beta;
//   rms:   rstd = P(1) / sqrt(P(sum(double(x)^2) / C) + epsilon), y = (x * rstd) * gamma.
#pragma once

#include <cstdint>

namespace mixprec::cuda::kernels::layer_norm_kernels {

// Which normalization (backend/nn_kernels.h's RowNorm, spelled here for the kernels).
enum class Kind { layer, rms };

// The normalization of one row by one block: load(k) gives the row's k-th value in storage type
// T, keep(k, v) sees each loaded value once more after the statistics (the fused residual step
// stores its sum there). gamma, beta: C values of P or null (1 and 0).
template <typename T, typename Load, typename Keep>
__device__ __forceinline__ void normalize_row(Kind kind, std::int64_t row, std::int64_t c,
                                              Load&& load, Keep&& keep,
                                              const compute_t<T>* __restrict__ gamma,
                                              const compute_t<T>* __restrict__ beta,
                                              compute_t<T> epsilon, T* __restrict__ yr,
                                              compute_t<T>* __restrict__ mean,
                                              compute_t<T>* __restrict__ rstd) {
  using P = compute_t<T>;
  P mu = P(0), inv;
  if (kind == Kind::layer) {
    const double s = block_ordered_sum(
        c, [&](std::int64_t k) { return static_cast<double>(to_compute(load(k))); });
    mu = static_cast<P>(s / static_cast<double>(c));
    const double q = block_ordered_sum(c, [&](std::int64_t k) {
      const double d = static_cast<double>(to_compute(load(k)) - mu);
      return d * d;
    });
    inv = P(1) / sqrt(static_cast<P>(q / static_cast<double>(c)) + epsilon);
  } else {
    const double q = block_ordered_sum(c, [&](std::int64_t k) {
      const double v = static_cast<double>(to_compute(load(k)));
      return v * v;
    });
    inv = P(1) / sqrt(static_cast<P>(q / static_cast<double>(c)) + epsilon);
  }
  if (thread_in_block() == 0) {
    mean[row] = mu;
    rstd[row] = inv;
  }
  for (std::int64_t k = thread_in_block(); k < c; k += kThreads) {
    const T xk = load(k);
    keep(k, xk);
    P v = kind == Kind::layer ? (to_compute(xk) - mu) * inv : to_compute(xk) * inv;
    if (gamma != nullptr) v = v * gamma[k];
    if (kind == Kind::layer && beta != nullptr) v = v + beta[k];
    yr[k] = from_compute<T>(v);
  }
}

// One block (kThreads threads) per row: row = block_index() < rows (the launcher starts exactly
// `rows` blocks). mean, rstd: one P per row.
template <typename T>
__global__ void forward_kernel(Kind kind, const T* __restrict__ x, std::int64_t rows,
                               std::int64_t c, const compute_t<T>* __restrict__ gamma,
                               const compute_t<T>* __restrict__ beta, compute_t<T> epsilon,
                               T* __restrict__ y, compute_t<T>* __restrict__ mean,
                               compute_t<T>* __restrict__ rstd) {
  const std::int64_t row = block_index();
  if (row >= rows) return;
  const T* xr = x + row * c;
  normalize_row<T>(
      kind, row, c, [&](std::int64_t k) { return xr[k]; }, [](std::int64_t, T) {}, gamma, beta,
      epsilon, y + row * c, mean, rstd);
}

// The pre-norm residual step, one block per row as forward_kernel: sum = a + b added in P and
// rounded to T once (as the elementwise add kernel rounds it), normalized as forward_kernel
// normalizes x. Each thread recomputes the rounded sum where it reads it (the rows of a and b are
// read three times, as forward_kernel reads x's, without a barrier between writing sum and reading
// it back) and stores it once.
template <typename T>
__global__ void add_forward_kernel(Kind kind, const T* __restrict__ a, const T* __restrict__ b,
                                   std::int64_t rows, std::int64_t c,
                                   const compute_t<T>* __restrict__ gamma,
                                   const compute_t<T>* __restrict__ beta, compute_t<T> epsilon,
                                   T* __restrict__ sum, T* __restrict__ y,
                                   compute_t<T>* __restrict__ mean,
                                   compute_t<T>* __restrict__ rstd) {
  const std::int64_t row = block_index();
  if (row >= rows) return;
  const T* ar = a + row * c;
  const T* br = b + row * c;
  T* sr = sum + row * c;
  normalize_row<T>(
      kind, row, c,
      [&](std::int64_t k) { return from_compute<T>(to_compute(ar[k]) + to_compute(br[k])); },
      [&](std::int64_t k, T v) { sr[k] = v; }, gamma, beta, epsilon, y + row * c, mean, rstd);
}

// dx of one row per block: with xhat = (x - mean) * rstd (rms: x * rstd) and g = dy * gamma,
// a = mean(g) (layer; 0 for rms), b = mean(g * xhat), dx = rstd * (g - a - xhat * b).
template <typename T>
__global__ void backward_dx_kernel(Kind kind, const T* __restrict__ dy, const T* __restrict__ x,
                                   std::int64_t rows, std::int64_t c,
                                   const compute_t<T>* __restrict__ gamma,
                                   const compute_t<T>* __restrict__ mean,
                                   const compute_t<T>* __restrict__ rstd, T* __restrict__ dx) {
  using P = compute_t<T>;
  const std::int64_t row = block_index();
  if (row >= rows) return;
  const T* xr = x + row * c;
  const T* gr = dy + row * c;
  const P mu = mean[row], inv = rstd[row];
  auto xhat = [&](std::int64_t k) {
    return kind == Kind::layer ? (to_compute(xr[k]) - mu) * inv : to_compute(xr[k]) * inv;
  };
  auto g = [&](std::int64_t k) {
    return gamma != nullptr ? to_compute(gr[k]) * gamma[k] : to_compute(gr[k]);
  };
  P a = P(0);
  if (kind == Kind::layer) {
    const double sum_g =
        block_ordered_sum(c, [&](std::int64_t k) { return static_cast<double>(g(k)); });
    a = static_cast<P>(sum_g / static_cast<double>(c));
  }
  const double sum_gx =
      block_ordered_sum(c, [&](std::int64_t k) { return static_cast<double>(g(k) * xhat(k)); });
  const P b = static_cast<P>(sum_gx / static_cast<double>(c));
  T* dr = dx + row * c;
  for (std::int64_t k = thread_in_block(); k < c; k += kThreads) {
    dr[k] = from_compute<T>(inv * (g(k) - a - xhat(k) * b));
  }
}

// The parameter gradients' partial column sums: thread t of parts * C (grid-stride) owns column
// j = t % C of part p = t / C and sums rows p, p + parts, p + 2 parts, ... in P (consecutive
// threads read consecutive columns: coalesced) into partials[p * 2C + j] (dy * xhat) and
// partials[p * 2C + C + j] (dy).
template <typename T>
__global__ void column_partials_kernel(Kind kind, const T* __restrict__ dy, const T* __restrict__ x,
                                       std::int64_t rows, std::int64_t c, std::int64_t parts,
                                       const compute_t<T>* __restrict__ mean,
                                       const compute_t<T>* __restrict__ rstd,
                                       compute_t<T>* __restrict__ partials) {
  using P = compute_t<T>;
  for (std::int64_t t = global_thread(); t < parts * c; t += grid_threads()) {
    const std::int64_t p = t / c, j = t - p * c;
    P sgx = P(0), sg = P(0);
    for (std::int64_t i = p; i < rows; i += parts) {
      const P h = kind == Kind::layer ? (to_compute(x[i * c + j]) - mean[i]) * rstd[i]
                                      : to_compute(x[i * c + j]) * rstd[i];
      const P g = to_compute(dy[i * c + j]);
      sgx += g * h;
      sg += g;
    }
    partials[p * 2 * c + j] = sgx;
    partials[p * 2 * c + c + j] = sg;
  }
}

// dgamma[j], dbeta[j] (0 for rms): thread j (grid-stride over C) adds the parts in part order in
// double and rounds once to P.
template <typename P>
__global__ void column_finish_kernel(Kind kind, const P* __restrict__ partials, std::int64_t parts,
                                     std::int64_t c, P* __restrict__ dgamma,
                                     P* __restrict__ dbeta) {
  for (std::int64_t j = global_thread(); j < c; j += grid_threads()) {
    double sgx = 0.0, sg = 0.0;
    for (std::int64_t p = 0; p < parts; ++p) {
      sgx += static_cast<double>(partials[p * 2 * c + j]);
      sg += static_cast<double>(partials[p * 2 * c + c + j]);
    }
    dgamma[j] = static_cast<P>(sgx);
    dbeta[j] = kind == Kind::layer ? static_cast<P>(sg) : P(0);
  }
}

}  // namespace mixprec::cuda::kernels::layer_norm_kernels
