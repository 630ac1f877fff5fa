#include "backend/cpu/sparse_crossentropy.h"

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/parallel.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

// Row r of (rows, classes) logits: its max m, log(sum(exp(x - m))) and the loss
// -((x[label] - m) - log_s), with the loops of log_softmax's forward_row (cpu/softmax.cpp), so the
// float32 loss of a row has the bits of log_softmax followed by picking the label's entry.
// `v` is the row converted to C (the one-row buffer).
template <typename C>
void row_loss(const C* v, std::int64_t classes, std::int64_t label, C* loss, C* stats) {
  C m = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : m)
  for (std::int64_t i = 0; i < classes; ++i) m = v[i] > m ? v[i] : m;
  C s = 0;
#pragma omp simd reduction(+ : s)
  for (std::int64_t i = 0; i < classes; ++i) s += std::exp(v[i] - m);
  // (x - m) - log(s) as log_softmax: x - m is exact near the max (Sterbenz).
  const C log_s = std::log(s);
  *loss = -((v[label] - m) - log_s);
  stats[0] = m;
  stats[1] = log_s;
}

template <typename T>
void forward_typed(const T* x, const std::int64_t* labels, std::int64_t rows, std::int64_t classes,
                   std::int64_t ignore, core::compute_t<T>* stats, core::compute_t<T>* losses) {
  using C = core::compute_t<T>;
  const bool parallel = rows * classes >= kParallelThreshold;
  const auto body = [&](std::int64_t r, std::vector<C>& buffer) {
    C* st = stats + 2 * r;
    if (labels[r] == ignore) {
      losses[r] = 0, st[0] = 0, st[1] = 0;
      return;
    }
    gather(x + r * classes, 1, classes, buffer.data());
    row_loss(buffer.data(), classes, labels[r], losses + r, st);
  };
  if (!parallel || rows < 2) {
    std::vector<C> buffer(static_cast<std::size_t>(classes));
    for (std::int64_t r = 0; r < rows; ++r) body(r, buffer);
    return;
  }
#pragma omp parallel
  {
    std::vector<C> buffer(static_cast<std::size_t>(classes));  // one row per thread
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) body(r, buffer);
  }
}

template <typename T>
void backward_typed(const T* x, const std::int64_t* labels, std::int64_t rows, std::int64_t classes,
                    std::int64_t ignore, const core::compute_t<T>* stats, core::compute_t<T> scale,
                    T* dx) {
  using C = core::compute_t<T>;
  const bool parallel = rows * classes >= kParallelThreshold;
  const auto body = [&](std::int64_t r, std::vector<C>& buffer) {
    T* out = dx + r * classes;
    const std::int64_t label = labels[r];
    if (label == ignore) {
      std::fill(buffer.begin(), buffer.end(), C(0));
      scatter(buffer.data(), classes, out);
      return;
    }
    C* v = buffer.data();
    gather(x + r * classes, 1, classes, v);
    const C m = stats[2 * r], log_s = stats[2 * r + 1];
    // p = exp(log_softmax(x)) from the stored statistics, as log_softmax's backward reads exp(y).
#pragma omp simd
    for (std::int64_t i = 0; i < classes; ++i) v[i] = std::exp((v[i] - m) - log_s) * scale;
    // The label's entry: p * s - s (the other entries are p * s - 0).
    const C p_label = std::exp((static_cast<C>(x[r * classes + label]) - m) - log_s);
    v[label] = p_label * scale - scale;
    scatter(v, classes, out);
  };
  if (!parallel || rows < 2) {
    std::vector<C> buffer(static_cast<std::size_t>(classes));
    for (std::int64_t r = 0; r < rows; ++r) body(r, buffer);
    return;
  }
#pragma omp parallel
  {
    std::vector<C> buffer(static_cast<std::size_t>(classes));
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) body(r, buffer);
  }
}

// A 0-d tensor's value as double (float32 or float64).
double scalar_value(const Tensor& t) {
  return t.dtype() == DType::float64
             ? *static_cast<const double*>(t.data_ptr())
             : static_cast<double>(*static_cast<const float*>(t.data_ptr()));
}

}  // namespace

SparseCrossentropyForward sparse_crossentropy_forward(const Tensor& logits, const Tensor& labels,
                                                      std::int64_t ignore) {
  const std::int64_t classes = logits.shape()[logits.rank() - 1];
  const std::int64_t rows = classes == 0 ? 0 : logits.numel() / classes;
  const DType compute = logits.dtype() == DType::float64 ? DType::float64 : DType::float32;
  SparseCrossentropyForward out;
  out.loss = core::make_tensor(Shape{}, compute, logits.device());
  out.count = core::make_tensor(Shape{}, compute, logits.device());
  out.row_stats = core::make_tensor(Shape{rows, 2}, compute, logits.device());
  const auto* y = static_cast<const std::int64_t*>(labels.data_ptr());
  core::dispatch_floating(logits.dtype(), "sparse_crossentropy", [&]<typename T>() {
    using C = core::compute_t<T>;
    std::vector<C> losses(static_cast<std::size_t>(rows));  // (R) float32: 1/V of the logits
    forward_typed(static_cast<const T*>(logits.data_ptr()), y, rows, classes, ignore,
                  static_cast<C*>(out.row_stats.data_ptr()), losses.data());
    // The mean over the rows not left out, added in double in row order (reproducible) and
    // rounded once.
    double total = 0.0;
    std::int64_t count = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      if (y[r] == ignore) continue;
      total += static_cast<double>(losses[static_cast<std::size_t>(r)]);
      ++count;
    }
    *static_cast<C*>(out.loss.data_ptr()) =
        count == 0 ? C(0) : static_cast<C>(total / static_cast<double>(count));
    *static_cast<C*>(out.count.data_ptr()) = static_cast<C>(count);
  });
  return out;
}

Tensor sparse_crossentropy_backward(const Tensor& logits, const Tensor& labels, std::int64_t ignore,
                                    const Tensor& row_stats, const Tensor& count, const Tensor& g) {
  const std::int64_t classes = logits.shape()[logits.rank() - 1];
  const std::int64_t rows = classes == 0 ? 0 : logits.numel() / classes;
  Tensor dx = core::make_tensor(logits.shape(), logits.dtype(), logits.device());
  if (dx.numel() == 0) return dx;
  const double n = scalar_value(count);
  core::dispatch_floating(logits.dtype(), "sparse_crossentropy_backward", [&]<typename T>() {
    using C = core::compute_t<T>;
    // g / count as the mean's backward forms it: g times 1/count (0 when nothing counts).
    const C scale = n > 0 ? static_cast<C>(scalar_value(g)) * static_cast<C>(1.0 / n) : C(0);
    backward_typed(static_cast<const T*>(logits.data_ptr()),
                   static_cast<const std::int64_t*>(labels.data_ptr()), rows, classes, ignore,
                   static_cast<const C*>(row_stats.data_ptr()), scale,
                   static_cast<T*>(dx.data_ptr()));
  });
  return dx;
}

}  // namespace mixprec::cpu
