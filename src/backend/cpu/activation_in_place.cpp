// The in-place relu / relu6 loops (activation_in_place.h): 16-bit values widened and rounded in
// registers (exact: relu and relu6 return their input or a constant), compiled for AVX-512 /
// AVX2 / the baseline, parallel over fixed blocks.
#include "backend/cpu/activation_in_place.h"

#include <algorithm>
#include <string>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd_convert.h"
#include "backend/cpu/target_clones.h"
#include "backend/kernel_math/elementwise_math.h"
#include "core/dispatch.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

template <UnaryOp Op, typename T>
MIXPREC_CPU_CLONES void activate_block(T* y, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    simd::store(y + i, kernel_math::unary_value(Op, simd::load(y + i)));
  }
}

template <UnaryOp Op, typename T>
void activate(T* y, std::int64_t n) {
  constexpr std::int64_t kBlock = std::int64_t{1} << 14;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  parallel_for(blocks, n >= kParallelThreshold, [&](std::int64_t b) {
    const std::int64_t start = b * kBlock;
    T* p = y + start;
    const std::int64_t m = std::min(kBlock, n - start);
    if constexpr (std::is_same_v<T, double>) {
      for (std::int64_t i = 0; i < m; ++i) p[i] = kernel_math::unary_value(Op, p[i]);
    } else {
      activate_block<Op, T>(p, m);
    }
  });
}

}  // namespace

void activation_in_place(const Tensor& y, UnaryOp act) {
  if (act != UnaryOp::relu && act != UnaryOp::relu6) {
    throw Error(std::string("cpu::activation_in_place: relu or relu6 only, got ") + op_name(act));
  }
  if (!y.is_contiguous() || !y.device().is_cpu()) {
    throw Error("cpu::activation_in_place: y must be a contiguous CPU tensor");
  }
  core::dispatch_floating(y.dtype(), "activation_in_place", [&]<typename T>() {
    T* p = static_cast<T*>(const_cast<void*>(y.data_ptr()));
    if (act == UnaryOp::relu) {
      activate<UnaryOp::relu, T>(p, y.numel());
    } else {
      activate<UnaryOp::relu6, T>(p, y.numel());
    }
  });
}

}  // namespace mixprec::cpu
