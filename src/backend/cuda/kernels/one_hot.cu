// one_hot (see indexing.h): one thread per output element, (row, column) = divmod(e, depth), so
// consecutive threads write consecutive bytes (coalesced); a row's index is read by its depth
// threads (one cached load). The kernel moves bit patterns of the output's element size, so four
// element sizes serve all eight output dtypes; 32-bit index arithmetic when every offset fits.
#include "backend/cuda/indexing.h"
#include "backend/cuda/kernels/common.cuh"

namespace mixprec::cuda::kernels {

namespace {

__device__ __forceinline__ std::int64_t load_index(DType dtype, const void* p, std::int64_t i) {
  switch (dtype) {
    case DType::int32: return static_cast<const std::int32_t*>(p)[i];
    case DType::int64: return static_cast<const std::int64_t*>(p)[i];
    default: return static_cast<const std::uint8_t*>(p)[i];  // uint8 (checked by the launcher)
  }
}

template <typename Bits, typename Index>
__global__ void one_hot_kernel(DType index_dtype, const void* indices, Index total, Index depth,
                               Bits one, Bits zero, Bits bad, Bits* __restrict__ out) {
  for (Index e = static_cast<Index>(global_thread()); e < total;
       e += static_cast<Index>(grid_threads())) {
    const Index row = e / depth;
    const Index column = e - row * depth;
    const std::int64_t v = load_index(index_dtype, indices, static_cast<std::int64_t>(row));
    Bits r = bad;
    if (v >= 0 && v < static_cast<std::int64_t>(depth)) {
      r = v == static_cast<std::int64_t>(column) ? one : zero;
    }
    out[e] = r;
  }
}

template <typename Bits>
void launch(DType index_dtype, const void* indices, std::int64_t total, std::int64_t depth,
            const OneHotPatterns& p, void* out, cudaStream_t s) {
  const Bits one = static_cast<Bits>(p.one), zero = static_cast<Bits>(p.zero),
             bad = static_cast<Bits>(p.bad);
  Bits* o = static_cast<Bits*>(out);
  const unsigned blocks = blocks_for(total);
  if (total <= 0x7fffffff) {
    one_hot_kernel<Bits, std::uint32_t>
        <<<blocks, kThreads, 0, s>>>(index_dtype, indices, static_cast<std::uint32_t>(total),
                                     static_cast<std::uint32_t>(depth), one, zero, bad, o);
  } else {
    one_hot_kernel<Bits, std::int64_t>
        <<<blocks, kThreads, 0, s>>>(index_dtype, indices, total, depth, one, zero, bad, o);
  }
}

}  // namespace

void one_hot(DType index_dtype, const void* indices, std::int64_t count, std::int64_t depth,
             std::size_t element_size, const OneHotPatterns& patterns, void* out, cudaStream_t s) {
  if (index_dtype != DType::int32 && index_dtype != DType::int64 && index_dtype != DType::uint8) {
    unsupported_dtype("one_hot indices", index_dtype, "int32, int64, uint8");
  }
  const std::int64_t total = count * depth;  // the caller checked that it does not overflow
  switch (element_size) {
    case 1: launch<std::uint8_t>(index_dtype, indices, total, depth, patterns, out, s); break;
    case 2: launch<std::uint16_t>(index_dtype, indices, total, depth, patterns, out, s); break;
    case 4: launch<std::uint32_t>(index_dtype, indices, total, depth, patterns, out, s); break;
    default: launch<std::uint64_t>(index_dtype, indices, total, depth, patterns, out, s); break;
  }
  check_launch("one_hot");
}

}  // namespace mixprec::cuda::kernels
