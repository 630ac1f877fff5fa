#include "backend/cpu/select.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/parallel.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

template <typename C, typename F>
auto predicate(F f) {
  return [f](C* out, const C* a, const C* b, std::int64_t n) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]) ? C(1) : C(0);
  };
}

// Integers compare exactly in double (int64 beyond 2^53 loses exactness: documented limit).
template <typename T>
using compare_t =
    std::conditional_t<std::is_integral_v<T> && sizeof(T) >= 4, double, core::compute_t<T>>;

}  // namespace

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  Tensor out = core::make_tensor(broadcast_shapes(a.shape(), b.shape(), "compare"), DType::bool_,
                                 a.device());
  core::dispatch_dtype(a.dtype(), [&]<typename T>() {
    using C = compare_t<T>;
    const auto in = {&a, &b};
    switch (op) {
      case CompareOp::equal:
        return map_elementwise<C, bool, T, T>(in, out,
                                              predicate<C>([](C x, C y) { return x == y; }));
      case CompareOp::not_equal:
        return map_elementwise<C, bool, T, T>(in, out,
                                              predicate<C>([](C x, C y) { return x != y; }));
      case CompareOp::less:
        return map_elementwise<C, bool, T, T>(in, out,
                                              predicate<C>([](C x, C y) { return x < y; }));
      case CompareOp::less_equal:
        return map_elementwise<C, bool, T, T>(in, out,
                                              predicate<C>([](C x, C y) { return x <= y; }));
      case CompareOp::greater:
        return map_elementwise<C, bool, T, T>(in, out,
                                              predicate<C>([](C x, C y) { return x > y; }));
      case CompareOp::greater_equal:
        return map_elementwise<C, bool, T, T>(in, out,
                                              predicate<C>([](C x, C y) { return x >= y; }));
    }
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = core::make_tensor(shape, a.dtype(), a.device());
  core::dispatch_floating(a.dtype(), "where", [&]<typename T>() {
    using C = core::compute_t<T>;
    map_elementwise<C, T, bool, T, T>({&cond, &a, &b}, out,
                                      [](C* o, const C* c, const C* x, const C* y, std::int64_t n) {
#pragma omp simd
                                        for (std::int64_t i = 0; i < n; ++i)
                                          o[i] = c[i] != C(0) ? x[i] : y[i];
                                      });
  });
  return out;
}

Tensor is_finite(const Tensor& x) {
  Tensor out = core::make_tensor(x.shape(), DType::bool_, x.device());
  core::dispatch_dtype(x.dtype(), [&]<typename T>() {
    using C = compare_t<T>;
    map_elementwise<C, bool, T>({&x}, out, [](C* o, const C* v, std::int64_t n) {
#pragma omp simd
      for (std::int64_t i = 0; i < n; ++i) o[i] = std::isfinite(v[i]) ? C(1) : C(0);
    });
  });
  return out;
}

bool all_finite(const Tensor& x) {
  if (!is_floating(x.dtype())) return true;
  const Tensor flags = is_finite(x);
  const bool* f = static_cast<const bool*>(flags.data_ptr());
  const std::int64_t n = flags.numel();
  if (n < kParallelThreshold) return std::all_of(f, f + n, [](bool b) { return b; });
  bool all = true;
#pragma omp parallel for reduction(&& : all)
  for (std::int64_t i = 0; i < n; ++i) all = all && f[i];
  return all;
}

}  // namespace mixprec::cpu
