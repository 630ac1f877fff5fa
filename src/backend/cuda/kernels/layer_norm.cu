// Layer / RMS normalization launchers (see layer_norm.h; the kernels are in
// layer_norm_kernels.cuh).
#include <algorithm>

#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/layer_norm.h"
#include "mixprec/error.h"
// After common.cuh, whose names the kernels use.
#include "backend/cuda/kernels/layer_norm_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using namespace layer_norm_kernels;

// About this many threads take the column partial sums, at most kMaxParts parts per column.
constexpr std::int64_t kPartialThreads = std::int64_t{1} << 17;
constexpr std::int64_t kMaxParts = 4096;

// One block per row (the grid's x extent allows 2^31 - 1 blocks).
unsigned row_blocks(std::int64_t rows) {
  if (rows > 0x7fffffff) {
    throw ValueError("layer_norm: more than 2^31 - 1 rows on CUDA; split the batch");
  }
  return static_cast<unsigned>(rows);
}

Kind kind_of(bool rms) { return rms ? Kind::rms : Kind::layer; }

}  // namespace

std::int64_t layer_norm_parts(std::int64_t rows, std::int64_t channels) {
  const std::int64_t c = channels > 0 ? channels : 1;
  const std::int64_t parts = std::min({kPartialThreads / c, kMaxParts, rows});
  return parts < 1 ? 1 : parts;
}

void layer_norm_forward(bool rms, DType dtype, const void* x, std::int64_t rows, std::int64_t c,
                        const void* gamma, const void* beta, double epsilon, void* y, void* mean,
                        void* rstd, cudaStream_t s) {
  dispatch_floating(dtype, "layer_norm", [&]<typename T>() {
    using P = compute_t<T>;
    forward_kernel<T><<<row_blocks(rows), kThreads, 0, s>>>(
        kind_of(rms), static_cast<const T*>(x), rows, c, static_cast<const P*>(gamma),
        static_cast<const P*>(beta), static_cast<P>(epsilon), static_cast<T*>(y),
        static_cast<P*>(mean), static_cast<P*>(rstd));
  });
  check_launch("layer_norm forward");
}

void layer_norm_add_forward(bool rms, DType dtype, const void* a, const void* b, std::int64_t rows,
                            std::int64_t c, const void* gamma, const void* beta, double epsilon,
                            void* sum, void* y, void* mean, void* rstd, cudaStream_t s) {
  dispatch_floating(dtype, "layer_norm", [&]<typename T>() {
    using P = compute_t<T>;
    add_forward_kernel<T><<<row_blocks(rows), kThreads, 0, s>>>(
        kind_of(rms), static_cast<const T*>(a), static_cast<const T*>(b), rows, c,
        static_cast<const P*>(gamma), static_cast<const P*>(beta), static_cast<P>(epsilon),
        static_cast<T*>(sum), static_cast<T*>(y), static_cast<P*>(mean), static_cast<P*>(rstd));
  });
  check_launch("layer_norm add forward");
}

void layer_norm_backward(bool rms, DType dtype, const void* dy, const void* x, std::int64_t rows,
                         std::int64_t c, const void* gamma, const void* mean, const void* rstd,
                         void* partials, void* dx, void* dgamma, void* dbeta, cudaStream_t s) {
  const std::int64_t parts = layer_norm_parts(rows, c);
  dispatch_floating(dtype, "layer_norm", [&]<typename T>() {
    using P = compute_t<T>;
    backward_dx_kernel<T><<<row_blocks(rows), kThreads, 0, s>>>(
        kind_of(rms), static_cast<const T*>(dy), static_cast<const T*>(x), rows, c,
        static_cast<const P*>(gamma), static_cast<const P*>(mean), static_cast<const P*>(rstd),
        static_cast<T*>(dx));
    check_launch("layer_norm backward dx");
    column_partials_kernel<T><<<blocks_for(parts * c), kThreads, 0, s>>>(
        kind_of(rms), static_cast<const T*>(dy), static_cast<const T*>(x), rows, c, parts,
        static_cast<const P*>(mean), static_cast<const P*>(rstd), static_cast<P*>(partials));
    check_launch("layer_norm parameter partial sums");
    column_finish_kernel<P>
        <<<blocks_for(c), kThreads, 0, s>>>(kind_of(rms), static_cast<const P*>(partials), parts, c,
                                            static_cast<P*>(dgamma), static_cast<P*>(dbeta));
  });
  check_launch("layer_norm parameter sums");
}

}  // namespace mixprec::cuda::kernels
