// Byte-exact copies between strided layouts (materialising views, concat/split, writing a gradient
// into a slice) and fills, templated only on the element size. A copy whose plan is a plain 2-D
// transpose (cuda::transpose_plan: the convolution's filter layouts) takes the register-tiled
// transpose kernel (transpose_kernels.cuh), whose reads and writes both use whole memory sectors.
#include <cstdint>
#include <limits>

#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/plan.h"
// After common.cuh, whose names the kernel uses.
#include "backend/cuda/kernels/transpose_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

template <std::size_t N>
struct Bytes;
template <>
struct Bytes<1> {
  using type = std::uint8_t;
};
template <>
struct Bytes<2> {
  using type = std::uint16_t;
};
template <>
struct Bytes<4> {
  using type = std::uint32_t;
};
template <>
struct Bytes<8> {
  using type = std::uint64_t;
};

template <typename E, typename Index>
__global__ void copy_strided(Strided<2> plan, const E* __restrict__ src, E* __restrict__ dst) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[2];
    offsets_of<Index, 2>(plan, i, off);
    dst[off[1]] = src[off[0]];
  }
}

template <typename E>
__global__ void fill_dense(E value, std::int64_t n, E* __restrict__ out) {
  for (std::int64_t i = global_thread(); i < n; i += grid_threads()) out[i] = value;
}

bool aligned_to(const void* p, std::uintptr_t bytes) {
  return (reinterpret_cast<std::uintptr_t>(p) & (bytes - 1)) == 0;
}

// The transpose kernel for t with vectors (one tile row each) on each side the sizes and pointers
// allow and 32-bit indices when every offset and thread index fits.
template <typename E>
void launch_transpose(const TransposePlan& t, const E* src, E* dst, cudaStream_t s) {
  using namespace transpose_kernels;
  constexpr int kTile = kTileOf<E>;
  const std::int64_t work = transpose_work(t.rows, t.cols, kTile);
  constexpr std::uintptr_t kBytes = kTileBytesOf<E>;
  const bool vec_in = t.cols % kTile == 0 && aligned_to(src, kBytes);
  const bool vec_out = t.rows % kTile == 0 && aligned_to(dst, kBytes);
  constexpr std::int64_t kLimit = std::numeric_limits<std::int32_t>::max();
  const bool index32 = t.rows * t.cols <= kLimit && work <= kLimit;
  const auto go = [&]<typename I, bool VecIn, bool VecOut>() {
    transpose_kernel<E, I, VecIn, VecOut>
        <<<blocks_for(work), kThreads, 0, s>>>(t.rows, t.cols, src, dst);
  };
  const auto sides = [&]<typename I>() {
    if (vec_in && vec_out) return go.template operator()<I, true, true>();
    if (vec_in) return go.template operator()<I, true, false>();
    if (vec_out) return go.template operator()<I, false, true>();
    go.template operator()<I, false, false>();
  };
  index32 ? sides.template operator()<std::uint32_t>() : sides.template operator()<std::int64_t>();
}

template <std::size_t N>
void launch_copy(const Strided<2>& plan, const void* src, void* dst, cudaStream_t s) {
  using E = typename Bytes<N>::type;
  if (const auto t = transpose_plan(plan)) {
    launch_transpose<E>(*t, static_cast<const E*>(src), static_cast<E*>(dst), s);
    return;
  }
  const unsigned blocks = blocks_for(plan.numel);
  if (plan.index32) {
    copy_strided<E, std::uint32_t>
        <<<blocks, kThreads, 0, s>>>(plan, static_cast<const E*>(src), static_cast<E*>(dst));
  } else {
    copy_strided<E, std::int64_t>
        <<<blocks, kThreads, 0, s>>>(plan, static_cast<const E*>(src), static_cast<E*>(dst));
  }
}

template <std::size_t N>
void launch_fill(std::uint64_t pattern, std::int64_t n, void* out, cudaStream_t s) {
  using E = typename Bytes<N>::type;
  fill_dense<E>
      <<<blocks_for(n), kThreads, 0, s>>>(static_cast<E>(pattern), n, static_cast<E*>(out));
}

}  // namespace

void copy(std::size_t element_size, const Strided<2>& plan, const void* src, void* dst,
          cudaStream_t s) {
  switch (element_size) {
    case 1: launch_copy<1>(plan, src, dst, s); break;
    case 2: launch_copy<2>(plan, src, dst, s); break;
    case 4: launch_copy<4>(plan, src, dst, s); break;
    case 8: launch_copy<8>(plan, src, dst, s); break;
    default: unsupported_dtype("copy", DType::uint8, "elements of 1, 2, 4 or 8 bytes");
  }
  check_launch("copy");
}

void fill(std::size_t element_size, std::uint64_t pattern, std::int64_t n, void* out,
          cudaStream_t s) {
  switch (element_size) {
    case 1: launch_fill<1>(pattern, n, out, s); break;
    case 2: launch_fill<2>(pattern, n, out, s); break;
    case 4: launch_fill<4>(pattern, n, out, s); break;
    case 8: launch_fill<8>(pattern, n, out, s); break;
    default: unsupported_dtype("fill", DType::uint8, "elements of 1, 2, 4 or 8 bytes");
  }
  check_launch("fill");
}

}  // namespace mixprec::cuda::kernels
