// Embedding launchers (see embedding.h; the kernels are in embedding_kernels.cuh).
#include <limits>

#include "backend/cuda/embedding.h"
#include "backend/cuda/kernels/common.cuh"
#include "mixprec/error.h"
// After common.cuh, whose names the kernels use.
#include "backend/cuda/kernels/embedding_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using namespace embedding_kernels;

template <typename F>
void dispatch_ids(DType dtype, F&& f) {
  switch (dtype) {
    case DType::int32: f.template operator()<std::int32_t>(); return;
    case DType::int64: f.template operator()<std::int64_t>(); return;
    default: unsupported_dtype("embedding_lookup", dtype, "int32, int64");
  }
}

}  // namespace

std::int64_t embedding_padded(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

void embedding_gather(DType id_dtype, const void* ids, std::int64_t n, DType table_dtype,
                      const void* table, std::int64_t vocab, std::int64_t c, DType out_dtype,
                      void* out, cudaStream_t s) {
  dispatch_ids(id_dtype, [&]<typename I>() {
    dispatch_floating(table_dtype, "embedding_lookup", [&]<typename S>() {
      dispatch_floating(out_dtype, "embedding_lookup", [&]<typename D>() {
        using P = compute_t<D>;
        gather_kernel<I, S, D><<<blocks_for(n * c), kThreads, 0, s>>>(
            static_cast<const I*>(ids), n, static_cast<const S*>(table), vocab, c,
            std::numeric_limits<P>::quiet_NaN(), static_cast<D*>(out));
      });
    });
  });
  check_launch("embedding gather");
}

void embedding_scatter_add(DType id_dtype, const void* ids, std::int64_t n, DType g_dtype,
                           const void* g, std::int64_t vocab, std::int64_t c, DType table_dtype,
                           void* keys, void* out, cudaStream_t s) {
  if (n >= (std::int64_t{1} << 32)) {
    throw ValueError("embedding_lookup: the CUDA gradient takes fewer than 2^32 ids per call");
  }
  const std::int64_t padded = embedding_padded(n);
  auto* k = static_cast<std::uint64_t*>(keys);
  dispatch_ids(id_dtype, [&]<typename I>() {
    keys_kernel<I>
        <<<blocks_for(padded), kThreads, 0, s>>>(static_cast<const I*>(ids), n, vocab, padded, k);
  });
  check_launch("embedding keys");
  for (std::int64_t size = 2; size <= padded; size *= 2) {
    for (std::int64_t j = size / 2; j > 0; j /= 2) {
      bitonic_step_kernel<std::uint64_t>
          <<<blocks_for(padded), kThreads, 0, s>>>(k, padded, j, size);
    }
  }
  check_launch("embedding sort");
  dispatch_floating(g_dtype, "embedding_lookup", [&]<typename G>() {
    dispatch_floating(table_dtype, "embedding_lookup", [&]<typename T>() {
      accumulate_kernel<G, T><<<blocks_for(n * c), kThreads, 0, s>>>(
          k, n, static_cast<const G*>(g), c, vocab, static_cast<T*>(out));
    });
  });
  check_launch("embedding gradient accumulate");
}

}  // namespace mixprec::cuda::kernels
