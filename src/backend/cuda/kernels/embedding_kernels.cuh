// The embedding kernels (launched by embedding.cu; see cuda/embedding.h), in a header of their
// own so that a host emulation can run them on the CPU
// (tests/unit/cuda_embedding_emulation_test.cpp). They use only to_compute, from_compute,
// compute_t, global_thread and grid_threads (common.cuh on the device,
// tests/support/cuda_host_emulation.h on the host); their threads never communicate within a
// launch. Include after one of those two headers.
//
// The scatter-add is deterministic without atomics: the positions are sorted by (id, position) as
// 64-bit keys (id << 32 | position: a strict total order, so any correct sort gives the same
// array) with a bitonic network, one launch per compare-exchange step (each pair handled by its
// lower thread); then the thread of (run start, column) adds its id's positions in position
// order, in P, and rounds once: the CPU's order (cpu/embedding.h), hence the same bits.
#pragma once

#include <cstdint>
#include <type_traits>

namespace mixprec::cuda::kernels::embedding_kernels {

// A key's id: the high 32 bits. Out-of-range ids get kBadId (sorted last, skipped), the padding
// past the positions the key ~0.
inline constexpr std::uint64_t kBadId = 0xffffffffull;
__device__ __forceinline__ std::uint64_t id_of(std::uint64_t key) { return key >> 32; }

// S -> D, rounded once: a plain copy for one type, else through D's compute type (float32 ->
// 16-bit rounds once; float32 -> float64 is exact).
template <typename S, typename D>
__device__ __forceinline__ D convert_value(S v) {
  if constexpr (std::is_same_v<S, D>) {
    return v;
  } else {
    return from_compute<D>(static_cast<compute_t<D>>(to_compute(v)));
  }
}

// out[i, j] = table[ids[i], j] in D for the n * c elements (grid-stride); a row whose id is outside
// [0, vocab) is `nan` (never read out of bounds).
template <typename I, typename S, typename D>
__global__ void gather_kernel(const I* __restrict__ ids, std::int64_t n,
                              const S* __restrict__ table, std::int64_t vocab, std::int64_t c,
                              compute_t<D> nan, D* __restrict__ out) {
  for (std::int64_t e = global_thread(); e < n * c; e += grid_threads()) {
    const std::int64_t i = e / c, j = e - i * c;
    const std::int64_t id = static_cast<std::int64_t>(ids[i]);
    out[e] = id >= 0 && id < vocab ? convert_value<S, D>(table[id * c + j]) : from_compute<D>(nan);
  }
}

// keys[t] for t < padded (a power of two >= n): (id << 32 | t) for a position t < n with a valid
// id, (kBadId << 32 | t) for an invalid one, ~0 past n.
template <typename I>
__global__ void keys_kernel(const I* __restrict__ ids, std::int64_t n, std::int64_t vocab,
                            std::int64_t padded, std::uint64_t* __restrict__ keys) {
  for (std::int64_t t = global_thread(); t < padded; t += grid_threads()) {
    std::uint64_t key = ~std::uint64_t{0};
    if (t < n) {
      const std::int64_t id = static_cast<std::int64_t>(ids[t]);
      const std::uint64_t hi = id >= 0 && id < vocab ? static_cast<std::uint64_t>(id) : kBadId;
      key = hi << 32 | static_cast<std::uint64_t>(t);
    }
    keys[t] = key;
  }
}

// One compare-exchange step of the bitonic sort of keys[0, padded) ascending: stage size k
// (2, 4, ..., padded), distance j (k / 2, ..., 1). Thread t < padded with partner t ^ j > t orders
// the pair ascending where (t & k) == 0, descending otherwise.
// K = std::uint64_t (a template only so that the header can be included by several files).
template <typename K>
__global__ void bitonic_step_kernel(K* __restrict__ keys, std::int64_t padded, std::int64_t j,
                                    std::int64_t k) {
  for (std::int64_t t = global_thread(); t < padded; t += grid_threads()) {
    const std::int64_t partner = t ^ j;
    if (partner <= t) continue;
    const K a = keys[t], b = keys[partner];
    const bool ascending = (t & k) == 0;
    if ((a > b) == ascending) {
      keys[t] = b;
      keys[partner] = a;
    }
  }
}

// The table gradient (zeroed by the launcher): thread (i, j) over n * c (grid-stride), for a
// sorted position i that starts a run of one valid id v, adds g[position, j] over the run's
// positions in increasing order in P = compute_t<T> and writes out[v, j] once.
template <typename G, typename T>
__global__ void accumulate_kernel(const std::uint64_t* __restrict__ keys, std::int64_t n,
                                  const G* __restrict__ g, std::int64_t c, std::int64_t vocab,
                                  T* __restrict__ out) {
  using P = compute_t<T>;
  for (std::int64_t e = global_thread(); e < n * c; e += grid_threads()) {
    const std::int64_t i = e / c, j = e - i * c;
    const std::uint64_t id = id_of(keys[i]);
    if (id >= static_cast<std::uint64_t>(vocab)) continue;
    if (i > 0 && id_of(keys[i - 1]) == id) continue;  // not the start of its run
    P acc = P(0);
    for (std::int64_t k = i; k < n && id_of(keys[k]) == id; ++k) {
      const std::int64_t position = static_cast<std::int64_t>(keys[k] & 0xffffffffull);
      acc += static_cast<P>(to_compute(g[position * c + j]));
    }
    out[static_cast<std::int64_t>(id) * c + j] = from_compute<T>(acc);
  }
}

}  // namespace mixprec::cuda::kernels::embedding_kernels
