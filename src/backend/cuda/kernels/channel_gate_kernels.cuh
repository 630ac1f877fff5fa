// The squeeze-and-excitation gate gradient's kernels (launched by channel_gate.cu; see
// channel_gate.h), in a header of their own so that a host emulation can run them on the CPU
// (tests/unit/cuda_channel_gate_emulation_test.cpp): besides ChannelGeometry they use only the
// names that depthwise_kernels.cuh lists, defined by common.cuh for the device and by
// tests/support/cuda_host_emulation.h for the host. Include after one of those two headers and
// channel_gate.h.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/lanes.cuh"

namespace mixprec::cuda::kernels::channel_gate_kernels {

// Pass 1. Thread t = (n * parts + p) * lanes + l (of exactly groups * parts * lanes threads and
// the rest idle) sums g * x over the pixels p, p + parts, ... of group n, for the V channels
// l * V, ..., l * V + V - 1, in order of the pixels, in the compute type. With `out` (one part)
// it writes the rounded result; else partials[(n * parts + p) * C + c].
template <typename T, int V>
__global__ void gate_partials_kernel(ChannelGeometry geo, std::int64_t parts,
                                     const T* __restrict__ g, const T* __restrict__ x,
                                     compute_t<T>* __restrict__ partials, T* __restrict__ out) {
  using P = compute_t<T>;
  const std::int64_t lanes = geo.channels / V;
  const std::int64_t t = global_thread();
  if (t >= geo.groups * parts * lanes) return;
  const std::int64_t l = t % lanes, q = t / lanes;  // q = n * parts + p
  const std::int64_t p = q % parts, n = q / parts;
  const std::int64_t c = l * V;
  const std::int64_t step = parts * geo.channels;
  const std::int64_t start = (n * geo.rows + p) * geo.channels + c;
  const std::int64_t count = p < geo.rows ? (geo.rows - p + parts - 1) / parts : 0;
  P s[V];
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) s[v] = P(0);
  const T* gp = g + start;
  const T* xp = x + start;
  // Unrolled: several loads in flight; the additions stay in pixel order.
  MIXPREC_UNROLL(4)
  for (std::int64_t k = 0; k < count; ++k) {
    const Lanes<T, V> gv = load_lanes<T, V>(gp), xv = load_lanes<T, V>(xp);
    MIXPREC_UNROLL_ALL
    for (int v = 0; v < V; ++v) s[v] += to_compute(gv.v[v]) * to_compute(xv.v[v]);
    gp += step;
    xp += step;
  }
  MIXPREC_UNROLL_ALL
  for (int v = 0; v < V; ++v) {
    if (out != nullptr) {  // one part: q == n
      out[q * geo.channels + c + v] = from_compute<T>(s[v]);
    } else {
      partials[q * geo.channels + c + v] = s[v];
    }
  }
}

// Pass 2, one warp per output o = n * C + c (of exactly groups * C warps): the parts' sum in
// warp_ordered_sum's order; lane 0 writes it rounded once (double -> compute type -> T, as the
// CPU's store_as).
template <typename T>
__global__ void gate_finish_warp_kernel(const compute_t<T>* __restrict__ partials,
                                        std::int64_t parts, std::int64_t groups,
                                        std::int64_t channels, T* __restrict__ out) {
  const std::int64_t o = global_thread() / kWarp;
  if (o >= groups * channels) return;  // the whole warp
  const std::int64_t n = o / channels, c = o % channels;
  const double s = warp_ordered_sum(partials + n * parts * channels + c, parts, channels);
  if (warp_lane() == 0) out[o] = from_compute<T>(static_cast<compute_t<T>>(s));
}

// Pass 2, one thread per output o = n * C + c (consecutive threads read consecutive channels):
// parts 0, 1, 2, ... added in turn in double, rounded once as above.
template <typename T>
__global__ void gate_finish_kernel(const compute_t<T>* __restrict__ partials, std::int64_t parts,
                                   std::int64_t groups, std::int64_t channels,
                                   T* __restrict__ out) {
  for (std::int64_t o = global_thread(); o < groups * channels; o += grid_threads()) {
    const std::int64_t n = o / channels, c = o % channels;
    const compute_t<T>* base = partials + n * parts * channels + c;
    double s = 0.0;
    for (std::int64_t p = 0; p < parts; ++p) s += static_cast<double>(base[p * channels]);
    out[o] = from_compute<T>(static_cast<compute_t<T>>(s));
  }
}

}  // namespace mixprec::cuda::kernels::channel_gate_kernels
