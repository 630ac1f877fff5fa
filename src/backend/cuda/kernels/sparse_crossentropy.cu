// Launchers of the sparse softmax crossentropy (see cuda/sparse_crossentropy.h; the kernels are in
// sparse_crossentropy_kernels.cuh).
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/warp_reductions.cuh"
#include "backend/cuda/sparse_crossentropy.h"
// After common.cuh and warp_reductions.cuh, whose names the kernels use.
#include "backend/cuda/kernels/sparse_crossentropy_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using namespace sparse_crossentropy_kernels;

// Enough warps to fill current GPUs several times (H100: 132 SMs x 64 warps); more rows loop.
constexpr std::int64_t kMaxRowWarps = std::int64_t{1} << 16;

unsigned blocks_exact(std::int64_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

}  // namespace

std::int64_t sparse_crossentropy_row_warps(std::int64_t rows) {
  return rows < 1 ? 1 : (rows > kMaxRowWarps ? kMaxRowWarps : rows);
}

void sparse_crossentropy_forward(DType dtype, const void* logits, const std::int64_t* labels,
                                 std::int64_t rows, std::int64_t classes, std::int64_t ignore,
                                 void* loss, void* stats, void* mean, void* count, cudaStream_t s) {
  dispatch_floating(dtype, "sparse_crossentropy", [&]<typename T>() {
    using P = compute_t<T>;
    if (rows > 0) {
      rows_kernel<T><<<blocks_exact(sparse_crossentropy_row_warps(rows) * kWarp), kThreads, 0, s>>>(
          static_cast<const T*>(logits), labels, rows, classes, ignore, static_cast<P*>(loss),
          static_cast<P*>(stats));
      check_launch("sparse_crossentropy rows");
    }
    mean_kernel<P><<<1, kThreads, 0, s>>>(static_cast<const P*>(loss), labels, rows, ignore,
                                          static_cast<P*>(mean), static_cast<P*>(count));
  });
  check_launch("sparse_crossentropy mean");
}

void sparse_crossentropy_backward(DType dtype, const void* logits, const std::int64_t* labels,
                                  std::int64_t rows, std::int64_t classes, std::int64_t ignore,
                                  const void* stats, const void* g, const void* count, void* dx,
                                  cudaStream_t s) {
  dispatch_floating(dtype, "sparse_crossentropy_backward", [&]<typename T>() {
    using P = compute_t<T>;
    backward_kernel<T><<<blocks_for(rows * classes), kThreads, 0, s>>>(
        static_cast<const T*>(logits), labels, rows, classes, ignore, static_cast<const P*>(stats),
        static_cast<const P*>(g), static_cast<const P*>(count), static_cast<T*>(dx));
  });
  check_launch("sparse_crossentropy_backward");
}

}  // namespace mixprec::cuda::kernels
