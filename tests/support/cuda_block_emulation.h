// A host emulation of CUDA blocks for kernels whose threads communicate (shared memory,
// __syncthreads, __syncwarp, warp-wide wmma products): src/backend/cuda/kernels/
// attention_kernels.cuh lists the names it needs. tests/support/cuda_host_emulation.h runs a
// kernel thread after thread and cannot wait at a barrier; here every emulated thread of a block
// is a std::thread:
//  - run_blocks starts the block's threads once per launch; they run the blocks one after the
//    other (block_index() is the same in every thread of a block) and meet at a barrier between
//    blocks;
//  - block_sync (__syncthreads) is a std::barrier of the block's threads, warp_sync (__syncwarp)
//    one of the 32 threads of a warp;
//  - shared_memory() is one buffer per launch, filled with 0xff bytes (NaN as floats) before each
//    block, so a kernel that reads shared memory it did not write sees garbage, as on the device,
//    and allocated to the launch's size, so that AddressSanitizer reports an overflow;
//  - wmma: a fragment holds the whole 16 x 16 tile (num_elements = 256). The collective
//    operations (load, fill, mma, store) are carried out by lane 0 of the warp alone: the other
//    lanes' fragments stay zero and their stores are dropped. A kernel that uses fragments only
//    through the collectives and through element-wise updates that treat every element alike (the
//    rule of attention_kernels.cuh) stores exactly what lane 0 computed, which is the warp's
//    result; and lane 0 reads shared memory that other lanes wrote only after a warp_sync or
//    block_sync, as the device requires.
// mma_sync multiplies the 16-bit operands exactly and adds in float, k in order (the device's
// tensor cores add in an unspecified order: results within float roundings).
// Storage types: float, double, and mixprec's float16 / bfloat16 for __half / __nv_bfloat16.
// Include before the kernels' header and after every CUDA and mixprec header; never with
// common.cuh or cuda_host_emulation.h.
#pragma once

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"
#include "support/cuda_emulation_storage.h"

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace mixprec::cuda::kernels {

// The CUDA math library's expf / logf are within 2 ulp of the host's (not bit for bit).
using std::exp;
using std::log;

namespace block_emulation {

inline constexpr int kWarpSize = 32;

// The state of one launch, shared by its threads.
struct Launch {
  struct Poison {
    Launch* launch;
    void operator()() noexcept { launch->poison(); }
  };
  std::size_t shared_bytes;
  unsigned char* shared;
  std::barrier<> block;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::barrier<Poison> between_blocks;

  Launch(int threads, std::size_t bytes)
      : shared_bytes(bytes),
        // Rounded up to the alignment, as aligned_alloc wants (the tensor-core kernels' layouts
        // are whole 128-byte lines already, so AddressSanitizer sees their exact end).
        shared(static_cast<unsigned char*>(std::aligned_alloc(128, (bytes + 255) / 128 * 128))),
        block(threads),
        between_blocks(threads, Poison{this}) {
    for (int w = 0; w < threads / kWarpSize; ++w) {
      warps.push_back(std::make_unique<std::barrier<>>(kWarpSize));
    }
    poison();
  }
  ~Launch() { std::free(shared); }
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  void poison() { std::memset(shared, 0xff, shared_bytes); }
};

inline Launch* current = nullptr;
inline thread_local std::int64_t block = 0;
inline thread_local int thread = 0;

}  // namespace block_emulation

// In an unnamed namespace: cuda_host_emulation.h defines the same two names for its thread-after-
// thread model, and both headers' tests link into one program (one definition each per test file,
// not two different inline functions the linker would pick one of).
namespace {
inline std::int64_t block_index() { return block_emulation::block; }
inline int thread_in_block() { return block_emulation::thread; }
}  // namespace
inline void block_sync() { block_emulation::current->block.arrive_and_wait(); }
inline void warp_sync() {
  block_emulation::current
      ->warps[static_cast<std::size_t>(block_emulation::thread / block_emulation::kWarpSize)]
      ->arrive_and_wait();
}
inline unsigned char* shared_memory() { return block_emulation::current->shared; }

// Runs body() as a launch of `blocks` blocks of `threads` threads (a multiple of 32) with
// `shared_bytes` of dynamic shared memory.
template <typename Body>
void run_blocks(std::int64_t blocks, int threads, std::size_t shared_bytes, Body&& body) {
  if (blocks <= 0) return;
  block_emulation::Launch launch(threads, shared_bytes);
  block_emulation::current = &launch;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&launch, &body, blocks, t] {
      block_emulation::thread = t;
      for (std::int64_t b = 0; b < blocks; ++b) {
        block_emulation::block = b;
        body();
        launch.between_blocks.arrive_and_wait();
      }
    });
  }
  for (std::thread& t : pool) t.join();
  block_emulation::current = nullptr;
}

namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K>
struct tile_shape {  // rows x cols of the operand
  static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
};

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int rows = tile_shape<Use, M, N, K>::rows;
  static constexpr int cols = tile_shape<Use, M, N, K>::cols;
  static constexpr int num_elements = rows * cols;
  T x[num_elements] = {};  // row-major: x[r * cols + c]
};

inline bool lane_zero() { return block_emulation::thread % block_emulation::kWarpSize == 0; }

template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ld) {
  if (!lane_zero()) return;
  using F = fragment<Use, M, N, K, T, Layout>;
  for (int r = 0; r < F::rows; ++r) {
    for (int c = 0; c < F::cols; ++c) {
      f.x[r * F::cols + c] = std::is_same_v<Layout, col_major> ? p[r + c * ld] : p[r * ld + c];
    }
  }
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ld,
                      layout_t layout) {
  if (!lane_zero()) return;
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) {
      f.x[r * N + c] = layout == mem_col_major ? p[r + c * ld] : p[r * ld + c];
    }
  }
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ld,
                       layout_t layout) {
  if (!lane_zero()) return;
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) {
      (layout == mem_col_major ? p[r + c * ld] : p[r * ld + c]) = f.x[r * N + c];
    }
  }
}

template <typename Use, int M, int N, int K, typename T, typename Layout, typename V>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, V value) {
  if (!lane_zero()) return;
  for (T& e : f.x) e = static_cast<T>(value);
}

template <int M, int N, int K, typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b,
              const fragment<accumulator, M, N, K, float>& c) {
  if (!lane_zero()) return;
  float result[M * N];
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      float s = c.x[m * N + n];
      for (int k = 0; k < K; ++k) s += to_compute(a.x[m * K + k]) * to_compute(b.x[k * N + n]);
      result[m * N + n] = s;
    }
  }
  std::memcpy(d.x, result, sizeof result);
}

}  // namespace wmma

}  // namespace mixprec::cuda::kernels
