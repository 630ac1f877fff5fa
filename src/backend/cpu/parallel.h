// Parallel loops of the CPU kernels that enter an OpenMP region only when the work is large
// enough. An `if (false)` clause on `#pragma omp parallel` still calls libgomp's GOMP_parallel
// (a team of one: the call, its team bookkeeping and an indirect call of the outlined body), and a
// CNN step runs hundreds of small ops, so small loops branch before the pragma and run inline.
#pragma once

#include <cstdint>

namespace mixprec::cpu {

// body(i) for every i in [0, n): split over the OpenMP team with a static schedule when
// `parallel` holds and there are at least two iterations, inline on the calling thread otherwise.
template <typename Body>
inline void parallel_for(std::int64_t n, bool parallel, Body&& body) {
  if (!parallel || n < 2) {
    for (std::int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) body(i);
}

// parallel_for with the iterations handed out in turn as threads become free: for iterations of
// uneven cost (the blocks of many tensors of different sizes), where a static split in halves
// leaves one thread idle while the other finishes.
template <typename Body>
inline void parallel_for_balanced(std::int64_t n, bool parallel, Body&& body) {
  if (!parallel || n < 2) {
    for (std::int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t i = 0; i < n; ++i) body(i);
}

// Whether body(i) returned true for some i in [0, n); every body(i) runs (they may write
// results). Parallel as parallel_for.
template <typename Body>
inline bool parallel_any(std::int64_t n, bool parallel, Body&& body) {
  bool any = false;
  if (!parallel || n < 2) {
    for (std::int64_t i = 0; i < n; ++i) any = body(i) || any;
    return any;
  }
#pragma omp parallel for schedule(static) reduction(|| : any)
  for (std::int64_t i = 0; i < n; ++i) any = body(i) || any;
  return any;
}

}  // namespace mixprec::cpu
