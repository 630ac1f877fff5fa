// The per-channel broadcast of a binary op (launched by elementwise.cu's binary where the plan has
// that shape): out = full (op) small or small (op) full, full contiguous (groups, rows, channels)
// and small (groups, channels), e.g. the squeeze-and-excitation gate multiplied into an
// activation. The generic strided kernel finds both operands' offsets with a division per axis and
// moves one value per load; here a thread moves V values of full and out per load and store (V
// divides the channel count, so they are channels c0, ..., c0 + V - 1 of one row) and reads the
// small operand's V values from cache. The same per-element arithmetic (kernel_math's
// binary_value in the compute type, rounded once) as the other binary kernels: the same bits.
//
// Like depthwise_kernels.cuh it uses only the names that header lists, so the host emulation
// (tests/unit/cuda_binary_channel_emulation_test.cpp) runs it too. Include after one of common.cuh
// or the emulation header.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/lanes.cuh"
#include "backend/kernel_math/elementwise_math.h"
#include "core/op_kinds.h"

namespace mixprec::cuda::kernels::binary_channel_kernels {

// total = groups * rows * channels elements (under 2^31), group_size = rows * channels.
template <typename T, int V>
__global__ void binary_channel_kernel(BinaryOp op, std::uint32_t total, std::uint32_t group_size,
                                      std::uint32_t channels, const T* __restrict__ full,
                                      const T* __restrict__ small, bool small_first,
                                      T* __restrict__ out) {
  using C = compute_t<T>;
  const std::uint32_t vectors = total / V;
  for (std::uint32_t q = static_cast<std::uint32_t>(global_thread()); q < vectors;
       q += static_cast<std::uint32_t>(grid_threads())) {
    const std::uint32_t i = q * V;
    const std::uint32_t c0 = i % channels, n = i / group_size;
    const Lanes<T, V> fv = load_lanes<T, V>(full + i);
    const T* sp = small + n * channels + c0;
    Lanes<T, V> o;
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) {
      const C f = to_compute(fv.v[v]), s = to_compute(sp[v]);
      o.v[v] = from_compute<T>(small_first ? kernel_math::binary_value(op, s, f)
                                           : kernel_math::binary_value(op, f, s));
    }
    store_lanes<T, V>(out + i, o);
  }
}

}  // namespace mixprec::cuda::kernels::binary_channel_kernels
