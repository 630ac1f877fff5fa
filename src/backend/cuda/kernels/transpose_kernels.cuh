// The 2-D transpose kernel of the strided copy (launched by copy.cu when the copy's plan is a
// transpose, see cuda::transpose_plan): out (cols x rows) = in (rows x cols) transposed, both
// contiguous. The generic strided copy reads or writes with a stride of a whole row, so every
// 2-byte element costs a 32-byte memory sector (about 20 GB/s on an H100 for the convolution's
// filter layouts). Here a thread moves a T x T tile (kTileOf: 8x8 halves, 4x4 floats, 2x2 doubles,
// 16 bytes per tile row; 8x8 bytes): it loads the tile's T input rows as vectors, transposes the
// tile in registers and stores the T output rows as vectors. The 32 lanes of a warp take a block
// of 8 x 4 tiles (8 along the rows, 4 along the columns), so with 16-byte rows each load
// instruction reads 64 consecutive bytes of 8 input rows and each store writes 128 consecutive
// bytes of 4 output rows: every 32-byte sector touched is used whole, without shared memory.
//
// Vectors need every tile row to start aligned to its size (kTileBytesOf): VecIn when cols is a
// multiple of T (and `in` is aligned), VecOut when rows is (and `out` is); otherwise that side
// moves element by element, with bounds checks that handle the ragged last tiles. Only bytes move
// (E is an unsigned integer of the element's size), so the result is the source's exact bits.
//
// Like depthwise_kernels.cuh it uses only names that common.cuh defines for the device and
// tests/support/cuda_host_emulation.h for the host (global_thread, grid_threads, kWarp,
// MIXPREC_UNROLL_ALL; Lanes from lanes.cuh), so the emulation runs it
// (tests/unit/cuda_transpose_emulation_test.cpp). Include after one of those two headers.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/lanes.cuh"
#include "backend/kernel_math/host_device.h"

namespace mixprec::cuda::kernels::transpose_kernels {

// The tiles of one warp: kLaneRows along the input's rows times kLaneCols along its columns.
inline constexpr int kLaneCols = 4;
inline constexpr int kLaneRows = 8;
static_assert(kLaneRows * kLaneCols == kWarp, "one tile per lane");

// Elements per tile side for elements of type E: one 16-byte vector per tile row, but 8x8 for
// bytes (a 16x16 byte tile takes a register per byte and spills).
template <typename E>
inline constexpr int kTileOf = sizeof(E) == 1 ? 8 : static_cast<int>(16 / sizeof(E));
// The bytes of one tile row: its vector's size and alignment.
template <typename E>
inline constexpr int kTileBytesOf = kTileOf<E>* static_cast<int>(sizeof(E));

// Threads the kernel's grid-stride loop covers: whole warps of kLaneRows x kLaneCols tiles (lanes
// past the matrix's last tiles skip). Shared by the launcher and the kernel.
MIXPREC_HOST_DEVICE inline std::int64_t transpose_work(std::int64_t rows, std::int64_t cols,
                                                       int tile) {
  const std::int64_t tile_rows = (rows + tile - 1) / tile, tile_cols = (cols + tile - 1) / tile;
  const std::int64_t warp_rows = (tile_rows + kLaneRows - 1) / kLaneRows;
  const std::int64_t warp_cols = (tile_cols + kLaneCols - 1) / kLaneCols;
  return warp_rows * warp_cols * kWarp;
}

// v[i][j] = in[(r0 + i) * cols + c0 + j] inside the matrix (zero outside, never stored).
template <typename E, typename I, bool VecIn>
__device__ __forceinline__ void load_tile(const E* in, I rows, I cols, I r0, I c0,
                                          E (&v)[kTileOf<E>][kTileOf<E>]) {
  constexpr int T = kTileOf<E>;
  MIXPREC_UNROLL_ALL
  for (int i = 0; i < T; ++i) {
    const I r = r0 + static_cast<I>(i);
    if (r >= rows) {
      MIXPREC_UNROLL_ALL
      for (int j = 0; j < T; ++j) v[i][j] = E{};
      continue;
    }
    const E* row = in + r * cols + c0;
    if (VecIn) {
      // cols is a multiple of T: the whole tile row is inside.
      const Lanes<E, T> lanes = load_lanes<E, T>(row);
      MIXPREC_UNROLL_ALL
      for (int j = 0; j < T; ++j) v[i][j] = lanes.v[j];
    } else {
      MIXPREC_UNROLL_ALL
      for (int j = 0; j < T; ++j) v[i][j] = c0 + static_cast<I>(j) < cols ? row[j] : E{};
    }
  }
}

// out[(c0 + j) * rows + r0 + i] = v[i][j] inside the matrix.
template <typename E, typename I, bool VecOut>
__device__ __forceinline__ void store_tile(E* out, I rows, I cols, I r0, I c0,
                                           const E (&v)[kTileOf<E>][kTileOf<E>]) {
  constexpr int T = kTileOf<E>;
  MIXPREC_UNROLL_ALL
  for (int j = 0; j < T; ++j) {
    const I c = c0 + static_cast<I>(j);
    if (c >= cols) continue;
    E* row = out + c * rows + r0;
    if (VecOut) {
      // rows is a multiple of T: the whole tile column is inside.
      Lanes<E, T> lanes;
      MIXPREC_UNROLL_ALL
      for (int i = 0; i < T; ++i) lanes.v[i] = v[i][j];
      store_lanes<E, T>(row, lanes);
    } else {
      MIXPREC_UNROLL_ALL
      for (int i = 0; i < T; ++i) {
        if (r0 + static_cast<I>(i) < rows) row[i] = v[i][j];
      }
    }
  }
}

// out[c * rows + r] = in[r * cols + c] for r < rows, c < cols. Thread q of the
// transpose_work(rows, cols, T) threads: lane q % kWarp of warp block q / kWarp (row-major over the
// blocks) takes tile (lane / kLaneCols, lane % kLaneCols) of its block. Index arithmetic in I:
// std::uint32_t when the launcher has checked that every offset and thread index fits.
template <typename E, typename I, bool VecIn, bool VecOut>
__global__ void transpose_kernel(std::int64_t rows64, std::int64_t cols64, const E* __restrict__ in,
                                 E* __restrict__ out) {
  constexpr int T = kTileOf<E>;
  const I rows = static_cast<I>(rows64), cols = static_cast<I>(cols64);
  const I tile_rows = (rows + T - 1) / T, tile_cols = (cols + T - 1) / T;
  const I warp_cols = (tile_cols + kLaneCols - 1) / kLaneCols;
  const I work = static_cast<I>(transpose_work(rows64, cols64, T));
  for (I q = static_cast<I>(global_thread()); q < work; q += static_cast<I>(grid_threads())) {
    const I lane = q % kWarp, block = q / kWarp;
    const I tile_row = (block / warp_cols) * kLaneRows + lane / kLaneCols;
    const I tile_col = (block % warp_cols) * kLaneCols + lane % kLaneCols;
    if (tile_row >= tile_rows || tile_col >= tile_cols) continue;
    const I r0 = tile_row * T, c0 = tile_col * T;
    E v[T][T];
    load_tile<E, I, VecIn>(in, rows, cols, r0, c0, v);
    store_tile<E, I, VecOut>(out, rows, cols, r0, c0, v);
  }
}

}  // namespace mixprec::cuda::kernels::transpose_kernels
