// The batch-norm sweeps of batch_norm_activation_sweeps.h: the fixed blocks of rows of
// batch_norm_loops.h, each cut into runs of one Period (whole rows) for the loops of
// batch_norm_activation_kernels.h.
#include "backend/cpu/batch_norm_activation_sweeps.h"

#include <algorithm>
#include <vector>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"

namespace mixprec::cpu::bn_sweeps {

namespace {

using bn_kernels::Act;
using bn_kernels::Coefficients;
using bn_kernels::Period;
using bn_loops::Blocking;
using bn_loops::Rows;

// Calls f(first_row, elements) for consecutive runs of at most one period of the rows [r0, r1).
template <typename F>
void for_each_run(std::int64_t r0, std::int64_t r1, std::int64_t c, Period p, F&& f) {
  for (std::int64_t row = r0; row < r1; row += p.rows) f(row, std::min(p.rows, r1 - row) * c);
}

bool parallel(Rows r) { return r.m * r.c >= bn_loops::kParallelElements; }

// Per-block float64 sums of `width` quantities per channel: block(r0, r1, out, scratch) adds
// block [r0, r1)'s sums into out[width * C] (zeroed), using scratch (`scratch_floats` floats owned
// by the calling thread, reused from block to block: no allocation per block); returns their
// totals, added in block order.
template <typename Block>
std::vector<double> block_sums(Rows r, int width, std::int64_t scratch_floats, Block&& block) {
  const Blocking b = bn_loops::blocking(r);
  const std::int64_t stride = width * r.c;
  std::vector<double> partial(static_cast<std::size_t>(b.count * stride), 0.0);
#pragma omp parallel if (parallel(r))
  {
    std::vector<float> scratch(static_cast<std::size_t>(scratch_floats));
#pragma omp for schedule(static)
    for (std::int64_t k = 0; k < b.count; ++k) {
      const std::int64_t r0 = k * b.rows;
      block(r0, std::min(r.m, r0 + b.rows), partial.data() + k * stride, scratch.data());
    }
  }
  std::vector<double> total(static_cast<std::size_t>(stride), 0.0);
  for (std::int64_t k = 0; k < b.count; ++k) {
    for (std::int64_t i = 0; i < stride; ++i) total[i] += partial[k * stride + i];
  }
  return total;
}

// The working memory of block_moments, one per thread, reused from block to block.
struct MomentScratch {
  explicit MomentScratch(std::int64_t c, bn_kernels::Period p)
      : acc1(static_cast<std::size_t>(p.elements)),
        acc2(acc1.size()),
        s1(static_cast<std::size_t>(c)),
        s2(s1.size()),
        m(s1.size()),
        mp(acc1.size()) {}
  std::vector<float> acc1, acc2;
  std::vector<double> s1, s2;
  std::vector<float> m, mp;
};

// One block's mean and sum of squared deviations per channel (C each), two passes over its rows.
template <typename T>
void block_moments(const T* x, std::int64_t r0, std::int64_t r1, std::int64_t c,
                   const bn_kernels::Kernels<T>& k, MomentScratch& w, double* mean, double* m2) {
  const Period p = bn_kernels::period_of(c);
  const double rows = static_cast<double>(r1 - r0);
  std::fill(w.acc1.begin(), w.acc1.end(), 0.0f);
  std::fill(w.acc2.begin(), w.acc2.end(), 0.0f);
  std::fill(w.s1.begin(), w.s1.end(), 0.0);
  std::fill(w.s2.begin(), w.s2.end(), 0.0);
  for_each_run(r0, r1, c, p,
               [&](std::int64_t row, std::int64_t n) { k.sum(x + row * c, n, w.acc1.data()); });
  bn_kernels::fold(w.acc1.data(), c, p, w.s1.data());
  for (std::size_t j = 0; j < w.m.size(); ++j) w.m[j] = static_cast<float>(w.s1[j] / rows);
  bn_kernels::repeat_into(w.m.data(), c, p, w.mp.data());
  std::fill(w.acc1.begin(), w.acc1.end(), 0.0f);
  std::fill(w.s1.begin(), w.s1.end(), 0.0);
  for_each_run(r0, r1, c, p, [&](std::int64_t row, std::int64_t n) {
    k.centered(x + row * c, n, w.mp.data(), w.acc1.data(), w.acc2.data());
  });
  bn_kernels::fold(w.acc1.data(), c, p, w.s1.data());
  bn_kernels::fold(w.acc2.data(), c, p, w.s2.data());
  for (std::size_t j = 0; j < w.m.size(); ++j) {
    // s1: the deviations' sum, nonzero only by the float32 rounding of m.
    mean[j] = w.m[j] + w.s1[j] / rows;
    const double v = w.s2[j] - w.s1[j] * w.s1[j] / rows;
    m2[j] = v < 0.0 ? 0.0 : v;  // NaN stays
  }
}

}  // namespace

template <typename T>
void statistics(const T* x, Rows r, float* mean, float* variance) {
  const Blocking b = bn_loops::blocking(r);
  const std::int64_t c = r.c;
  const bn_kernels::Kernels<T> k = bn_kernels::kernels<T>(Act::none);
  std::vector<double> means(static_cast<std::size_t>(b.count * c));
  std::vector<double> m2s(means.size());
#pragma omp parallel if (parallel(r))
  {
    MomentScratch scratch(c, bn_kernels::period_of(c));
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < b.count; ++i) {
      const std::int64_t r0 = i * b.rows;
      block_moments(x, r0, std::min(r.m, r0 + b.rows), c, k, scratch, means.data() + i * c,
                    m2s.data() + i * c);
    }
  }
  // Chan et al.'s pairwise update, adding the blocks in order.
  std::vector<double> mu(static_cast<std::size_t>(c), 0.0), m2(mu.size(), 0.0);
  double n_a = 0.0;
  for (std::int64_t i = 0; i < b.count; ++i) {
    const double n_b = static_cast<double>(std::min(r.m, (i + 1) * b.rows) - i * b.rows);
    const double n = n_a + n_b;
    for (std::int64_t j = 0; j < c; ++j) {
      const double delta = means[i * c + j] - mu[j];
      mu[j] += delta * (n_b / n);
      m2[j] += m2s[i * c + j] + delta * delta * (n_a * n_b / n);
    }
    n_a = n;
  }
  for (std::int64_t j = 0; j < c; ++j) {
    mean[j] = static_cast<float>(mu[j]);
    variance[j] = static_cast<float>(m2[j] / static_cast<double>(r.m));
  }
}

template <typename T>
void forward(const T* x, Rows r, const Affine& a, Act act, T* y) {
  const std::int64_t c = r.c;
  const Period p = bn_kernels::period_of(c);
  const std::vector<float> m = bn_kernels::repeat(a.mean, c, p);
  const std::vector<float> s = bn_kernels::repeat(a.scale, c, p);
  const std::vector<float> h = bn_kernels::repeat(a.shift, c, p);
  const Coefficients co{m.data(), s.data(), h.data()};
  const bn_kernels::Kernels<T> k = bn_kernels::kernels<T>(act);
  bn_loops::parallel_rows(r, [&](std::int64_t r0, std::int64_t r1) {
    for_each_run(r0, r1, c, p, [&](std::int64_t row, std::int64_t n) {
      k.forward(x + row * c, n, co, y + row * c);
    });
  });
}

template <typename T>
void backward(const T* dy, const T* x, Rows r, const Affine& a, const float* inv_std,
              BatchNormStats stats, Act act, T* dx, float* dgamma, float* dbeta) {
  const std::int64_t c = r.c;
  const Period p = bn_kernels::period_of(c);
  const std::vector<float> m = bn_kernels::repeat(a.mean, c, p);
  const std::vector<float> s = bn_kernels::repeat(a.scale, c, p);
  const std::vector<float> h = bn_kernels::repeat(a.shift, c, p);
  Coefficients co{m.data(), s.data(), h.data()};
  const bn_kernels::Kernels<T> k = bn_kernels::kernels<T>(act);
  const auto sums = block_sums(r, 2, 2 * p.elements,
                               [&](std::int64_t r0, std::int64_t r1, double* out, float* scratch) {
                                 float* acc_g = scratch;
                                 float* acc_gx = scratch + p.elements;
                                 std::fill(scratch, scratch + 2 * p.elements, 0.0f);
                                 for_each_run(r0, r1, c, p, [&](std::int64_t row, std::int64_t n) {
                                   k.backward_sums(dy + row * c, x + row * c, n, co, acc_g, acc_gx);
                                 });
                                 bn_kernels::fold(acc_g, c, p, out);
                                 bn_kernels::fold(acc_gx, c, p, out + c);
                               });
  // dx = scale * (dz - pc - (x - mean) * qc): pc = dbeta / M, qc = dgamma * inv_std / M (0 for
  // moving statistics).
  const std::size_t cs = static_cast<std::size_t>(c);
  std::vector<float> pc(cs), qc(cs);
  const bool batch = stats == BatchNormStats::batch;
  for (std::size_t j = 0; j < cs; ++j) {
    const double sum_g = sums[j], sum_gx = sums[j + cs], inv = inv_std[j];
    dbeta[j] = static_cast<float>(sum_g);
    dgamma[j] = static_cast<float>(sum_gx * inv);
    pc[j] = batch ? static_cast<float>(sum_g / double(r.m)) : 0.0f;
    qc[j] = batch ? static_cast<float>(sum_gx * inv * inv / double(r.m)) : 0.0f;
  }
  const std::vector<float> pp = bn_kernels::repeat(pc.data(), c, p);
  const std::vector<float> qp = bn_kernels::repeat(qc.data(), c, p);
  co.k = s.data();
  co.p = pp.data();
  co.q = qp.data();
  bn_loops::parallel_rows(r, [&](std::int64_t r0, std::int64_t r1) {
    for_each_run(r0, r1, c, p, [&](std::int64_t row, std::int64_t n) {
      k.backward_dx(dy + row * c, x + row * c, n, co, dx + row * c);
    });
  });
}

#define MIXPREC_BN_SWEEPS(T)                                                                       \
  template void statistics<T>(const T*, Rows, float*, float*);                                     \
  template void forward<T>(const T*, Rows, const Affine&, Act, T*);                                \
  template void backward<T>(const T*, const T*, Rows, const Affine&, const float*, BatchNormStats, \
                            Act, T*, float*, float*);
MIXPREC_BN_SWEEPS(float)
MIXPREC_BN_SWEEPS(float16)
MIXPREC_BN_SWEEPS(bfloat16)
#undef MIXPREC_BN_SWEEPS

}  // namespace mixprec::cpu::bn_sweeps
