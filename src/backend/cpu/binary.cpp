// CPU binary arithmetic with broadcasting: the shared per-element body, one instantiation per op;
// same-shape dense operands without buffer copies (contiguous_map.h), per-channel broadcasts in
// binary_channel.cpp, the rest through map_elementwise; and the in-place gradient accumulation.
#include "backend/cpu/binary.h"

#include <cmath>

#include "backend/cpu/binary_channel.h"
#include "backend/cpu/contiguous_map.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/unary.h"
#include "backend/kernel_math/elementwise_math.h"
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

// One instantiation per op, so that the op is a constant inside the loop and the shared body
// (backend/kernel_math/elementwise_math.h) inlines to one vectorisable expression.
template <BinaryOp Op, typename T>
void run_op(const Tensor& a, const Tensor& b, Tensor& out) {
  using C = core::compute_t<T>;
  const auto body = lanes<C>([](C x, C y) { return kernel_math::binary_value(Op, x, y); });
  if (a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous()) {
    // Same shape, both dense (the residual add, gradient sums): no gather or scatter copies.
    map_contiguous<T, 2>({a.data<T>(), b.data<T>()}, out.data<T>(), out.numel(), body);
    return;
  }
  map_elementwise<C, T, T, T>({&a, &b}, out, body);
}

template <typename T>
void run(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  switch (op) {
#define MIXPREC_BINARY_CASE(name, text) \
  case BinaryOp::name: return run_op<BinaryOp::name, T>(a, b, out);
    MIXPREC_FOR_EACH_BINARY_OP(MIXPREC_BINARY_CASE)
#undef MIXPREC_BINARY_CASE
  }
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor out =
      core::make_tensor(broadcast_shapes(a.shape(), b.shape(), "binary"), a.dtype(), a.device());
  // A per-channel broadcast (the squeeze-and-excitation gate, a bias) without gather copies.
  if (binary_channel(op, a, b, out)) return out;
  core::dispatch_floating(a.dtype(), "binary op", [&]<typename T>() { run<T>(op, a, b, out); });
  return out;
}

void accumulate_into(const Tensor& acc, const Tensor& g) {
  Tensor target = acc;  // a handle: written through
  if (!g.is_contiguous()) {
    // A broadcast view: as the small tensor it repeats (extent 1 where the stride is 0), through
    // the per-channel kernel when it is a per-channel broadcast, else the strided loop below;
    // both write each element of acc from the same element only.
    std::vector<std::int64_t> dims = g.shape().dims();
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (g.strides()[i] == 0) dims[i] = 1;
    }
    const Tensor small = core::make_view(g, Shape(dims), g.strides(), g.offset());
    if (binary_channel(BinaryOp::add, acc, small, target)) return;
  }
  core::dispatch_floating(acc.dtype(), "gradient accumulation", [&]<typename T>() {
    using C = core::compute_t<T>;
    const auto body = lanes<C>([](C x, C y) { return x + y; });
    if (!g.is_contiguous()) {
      map_elementwise<C, T, T, T>({&acc, &g}, target, body);
      return;
    }
    T* out = target.data<T>();  // read and written at the same index only
    map_contiguous<T, 2>({out, g.data<T>()}, out, acc.numel(), body);
  });
}

Tensor add_relu(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || !a.is_contiguous() || !b.is_contiguous()) {
    return unary(UnaryOp::relu, binary(BinaryOp::add, a, b));
  }
  Tensor out = core::make_tensor(a.shape(), a.dtype(), a.device());
  core::dispatch_floating(a.dtype(), "add_relu", [&]<typename T>() {
    using C = core::compute_t<T>;
    const auto body = [](C* o, const C* x, const C* y, std::int64_t n) {
      for (std::int64_t i = 0; i < n; ++i) {
        o[i] = kernel_math::unary_value(UnaryOp::relu, x[i] + y[i]);
      }
    };
    map_contiguous<T, 2>({a.data<T>(), b.data<T>()}, out.data<T>(), a.numel(), body);
  });
  return out;
}

}  // namespace mixprec::cpu
