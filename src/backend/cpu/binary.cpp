#include "backend/cpu/binary.h"

#include <cmath>

#include "backend/cpu/elementwise.h"
#include "core/dispatch.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

template <typename C, typename F>
auto lanes(F f) {
  return [f](C* out, const C* a, const C* b, std::int64_t n) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  };
}

template <typename T>
void run(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  using C = core::compute_t<T>;
  const auto in = {&a, &b};
  switch (op) {
    case BinaryOp::add: return map_elementwise<C, T, T, T>(in, out, lanes<C>([](C x, C y) { return x + y; }));
    case BinaryOp::sub: return map_elementwise<C, T, T, T>(in, out, lanes<C>([](C x, C y) { return x - y; }));
    case BinaryOp::mul: return map_elementwise<C, T, T, T>(in, out, lanes<C>([](C x, C y) { return x * y; }));
    case BinaryOp::div: return map_elementwise<C, T, T, T>(in, out, lanes<C>([](C x, C y) { return x / y; }));
    case BinaryOp::pow:
      return map_elementwise<C, T, T, T>(in, out, lanes<C>([](C x, C y) { return std::pow(x, y); }));
    case BinaryOp::maximum:
      // NaN propagates: a comparison with NaN is false, so pick the NaN explicitly.
      return map_elementwise<C, T, T, T>(in, out, lanes<C>([](C x, C y) {
        return (x >= y || std::isnan(x)) ? x : y;
      }));
    case BinaryOp::minimum:
      return map_elementwise<C, T, T, T>(in, out, lanes<C>([](C x, C y) {
        return (x <= y || std::isnan(x)) ? x : y;
      }));
  }
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out = core::make_tensor(broadcast_shapes(a.shape(), b.shape(), "binary"), a.dtype(), a.device());
  core::dispatch_floating(a.dtype(), "binary op", [&]<typename T>() { run<T>(op, a, b, out); });
  return out;
}

}  // namespace mixprec::cpu
