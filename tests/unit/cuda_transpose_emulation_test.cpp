// The CUDA copy's 2-D transpose path without a GPU: which copy plans are transposes
// (cuda::transpose_plan over cuda::make_strided of real permuted views, such as the convolution's
// HWIO <-> KRSC filter layouts), and the register-tiled transpose kernel
// (kernels/transpose_kernels.cuh) run by the host emulation (support/cuda_host_emulation.h) on
// grids that wrap, in every variant (vectors of one tile row on the load side, the store side, both
// or neither; 32- and 64-bit indices) and element size (1, 2, 4, 8 bytes), on shapes that fill
// whole tiles, ragged ones and tiny ones. Oracle: a plain double loop out[c * rows + r] = in[r *
// cols + c] (and the CPU library's contiguous() of the permuted view), compared bit for bit; guard
// elements after the output must stay untouched.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/kernels/launch.h"
#include "backend/cuda/plan.h"
#include "mixprec/mixprec.h"
// After every CUDA and mixprec header: the emulation defines the device keywords away.
#include "support/cuda_host_emulation.h"
// Its kernel, compiled for the host.
#include "backend/cuda/kernels/transpose_kernels.cuh"

namespace mixprec::cuda::kernels {
namespace {

using transpose_kernels::kTileOf;
using transpose_kernels::transpose_kernel;
using transpose_kernels::transpose_work;

// The plan of copying `src` (any view) into a fresh contiguous tensor of its shape.
Strided<2> copy_plan(const Tensor& src) {
  const Tensor dst = zeros(src.shape());
  return make_strided<2>(src.shape(), {src.strides(), dst.strides()});
}

// The plan of a copy over `shape` with the source's and the destination's strides.
Strided<2> strides_plan(const Shape& shape, std::vector<std::int64_t> src,
                        std::vector<std::int64_t> dst) {
  return make_strided<2>(shape, {std::move(src), std::move(dst)});
}

TEST(CudaTransposeTest, FilterLayoutCopiesAreTransposes) {
  // HWIO -> KRSC, as conv.cpp's contiguous(hwio.permute({3, 0, 1, 2})): KH * KW * Cin rows of Cout.
  const Tensor hwio = zeros({3, 3, 64, 128});
  const auto krsc = transpose_plan(copy_plan(hwio.permute({3, 0, 1, 2})));
  ASSERT_TRUE(krsc.has_value());
  EXPECT_EQ(krsc->rows, 3 * 3 * 64);
  EXPECT_EQ(krsc->cols, 128);
  // And back (the filter gradient): Cout rows of KH * KW * Cin.
  const Tensor k = zeros({128, 3, 3, 64});
  const auto back = transpose_plan(copy_plan(k.permute({1, 2, 3, 0})));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->rows, 128);
  EXPECT_EQ(back->cols, 3 * 3 * 64);
  // A 1x1 filter and the stem's 7x7x3 (rows no multiple of any tile).
  const auto one = transpose_plan(copy_plan(zeros({1, 1, 256, 64}).permute({3, 0, 1, 2})));
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->rows, 256);
  EXPECT_EQ(one->cols, 64);
  const auto stem = transpose_plan(copy_plan(zeros({7, 7, 3, 64}).permute({3, 0, 1, 2})));
  ASSERT_TRUE(stem.has_value());
  EXPECT_EQ(stem->rows, 7 * 7 * 3);
  EXPECT_EQ(stem->cols, 64);
}

TEST(CudaTransposeTest, EitherOperandMayBeTheTransposedOne) {
  // The source transposed, the destination contiguous: a 5 x 7 source read columns-first.
  const auto read = transpose_plan(copy_plan(zeros({5, 7}).transpose(0, 1)));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->rows, 5);
  EXPECT_EQ(read->cols, 7);
  // The source contiguous (5 x 7), written into a transposed view of a 7 x 5 destination.
  const Tensor src = zeros({5, 7});
  const Tensor dst = zeros({7, 5}).transpose(0, 1);
  const auto write = transpose_plan(make_strided<2>(src.shape(), {src.strides(), dst.strides()}));
  ASSERT_TRUE(write.has_value());
  EXPECT_EQ(write->rows, 5);
  EXPECT_EQ(write->cols, 7);
}

TEST(CudaTransposeTest, OtherCopiesAreNotTransposes) {
  // Contiguous (one axis after merging).
  EXPECT_FALSE(transpose_plan(copy_plan(zeros({4, 6}))).has_value());
  // A slice: two axes, both row-major.
  EXPECT_FALSE(transpose_plan(copy_plan(zeros({6, 8}).slice(1, 0, 5))).has_value());
  // A transposed slice: the source's rows have a gap (stride 8 for 7 columns).
  EXPECT_FALSE(transpose_plan(copy_plan(zeros({6, 8}).slice(1, 0, 7).transpose(0, 1))).has_value());
  // A strided slice transposed: the inner stride is 2.
  EXPECT_FALSE(
      transpose_plan(copy_plan(zeros({6, 8}).slice(0, 0, 6, 2).transpose(0, 1))).has_value());
  // NHWC -> NCHW: three axes after merging.
  EXPECT_FALSE(transpose_plan(copy_plan(zeros({2, 4, 4, 8}).permute({0, 3, 1, 2}))).has_value());
  // Broadcasts (stride 0) against a contiguous destination.
  const Shape shape{6, 7};
  EXPECT_FALSE(transpose_plan(strides_plan(shape, {0, 1}, {7, 1})).has_value());
  EXPECT_FALSE(transpose_plan(strides_plan(shape, {1, 0}, {7, 1})).has_value());
  // Both operands transposed the same way.
  EXPECT_FALSE(transpose_plan(strides_plan(shape, {1, 6}, {1, 6})).has_value());
  // The transposed operand's rows padded (stride 8 where 6 would be dense).
  EXPECT_FALSE(transpose_plan(strides_plan(shape, {1, 8}, {7, 1})).has_value());
  // Sanity of the helper: the dense transposed strides are a transpose.
  EXPECT_TRUE(transpose_plan(strides_plan(shape, {1, 6}, {7, 1})).has_value());
}

// 16-byte aligned storage of n elements of E (the kernel's vector loads and stores need it).
template <typename E>
struct Aligned {
  struct alignas(16) Block {
    unsigned char bytes[16];
  };
  std::vector<Block> blocks;
  explicit Aligned(std::int64_t n) : blocks(static_cast<std::size_t>((n * sizeof(E) + 15) / 16)) {}
  E* data() { return reinterpret_cast<E*>(blocks.data()); }
};

// Runs transpose_kernel<E, I, VecIn, VecOut> over a grid of `grid` threads.
template <typename E, typename I>
void run_variant(bool vec_in, bool vec_out, std::int64_t grid, std::int64_t rows, std::int64_t cols,
                 const E* in, E* out) {
  const auto go = [&]<bool VecIn, bool VecOut>() {
    run_grid(grid, [&] { transpose_kernel<E, I, VecIn, VecOut>(rows, cols, in, out); });
  };
  if (vec_in && vec_out) return go.template operator()<true, true>();
  if (vec_in) return go.template operator()<true, false>();
  if (vec_out) return go.template operator()<false, true>();
  go.template operator()<false, false>();
}

// Every variant the shape allows, on two grids (one wrapping, one covering the work at once),
// against the plain loop; kGuard elements after the output keep their sentinel.
template <typename E>
void expect_transpose(std::int64_t rows, std::int64_t cols) {
  constexpr int T = kTileOf<E>;
  constexpr std::int64_t kGuard = 2 * T;
  const std::int64_t n = rows * cols;
  std::mt19937_64 gen(static_cast<std::uint64_t>(rows * 1000 + cols));
  Aligned<E> in(n);
  for (std::int64_t i = 0; i < n; ++i) in.data()[i] = static_cast<E>(gen());
  std::vector<E> want(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) want[c * rows + r] = in.data()[r * cols + c];
  }
  const E sentinel = static_cast<E>(0xA5A5A5A5A5A5A5A5ull);
  const std::int64_t work = transpose_work(rows, cols, T);
  for (const bool vec_in : {false, true}) {
    for (const bool vec_out : {false, true}) {
      if ((vec_in && cols % T != 0) || (vec_out && rows % T != 0)) continue;
      for (const bool wide : {false, true}) {
        for (const std::int64_t grid : {std::int64_t{7} * kWarp, work + 3 * kWarp}) {
          SCOPED_TRACE(std::to_string(sizeof(E)) + "-byte " + std::to_string(rows) + " x " +
                       std::to_string(cols) + (vec_in ? ", vector loads" : "") +
                       (vec_out ? ", vector stores" : "") + (wide ? ", 64-bit" : ", 32-bit") +
                       " indices, grid " + std::to_string(grid));
          Aligned<E> out(n + kGuard);
          for (std::int64_t i = 0; i < n + kGuard; ++i) out.data()[i] = sentinel;
          if (wide) {
            run_variant<E, std::int64_t>(vec_in, vec_out, grid, rows, cols, in.data(), out.data());
          } else {
            run_variant<E, std::uint32_t>(vec_in, vec_out, grid, rows, cols, in.data(), out.data());
          }
          for (std::int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(out.data()[i], want[i]) << "element " << i;
          }
          for (std::int64_t i = n; i < n + kGuard; ++i) {
            ASSERT_EQ(out.data()[i], sentinel) << "guard element " << i - n;
          }
        }
      }
    }
  }
}

// Shapes for tile side T: whole tiles (several warp blocks of 8 x 4 tiles), ragged rows, ragged
// columns, both ragged, smaller than one tile, and tiny 1 x N / N x 1.
template <typename E>
void expect_all_shapes() {
  constexpr std::int64_t T = kTileOf<E>;
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{T, T},
                                                                     {9 * 8 * T, 5 * 4 * T},
                                                                     {8 * T, 4 * T},
                                                                     {3 * T, 2 * T},
                                                                     {3 * T + 1, 2 * T},
                                                                     {3 * T, 2 * T + 3},
                                                                     {5 * T - 1, T + 1},
                                                                     {T - 1, T - 1},
                                                                     {1, 37},
                                                                     {37, 1},
                                                                     {1, 2 * T},
                                                                     {2 * T, 1},
                                                                     {2, 3},
                                                                     {147, 64},
                                                                     {64, 147}};
  for (const auto& [rows, cols] : shapes) expect_transpose<E>(rows, cols);
}

TEST(CudaTransposeTest, KernelMatchesPlainTranspose1Byte) { expect_all_shapes<std::uint8_t>(); }
TEST(CudaTransposeTest, KernelMatchesPlainTranspose2Byte) { expect_all_shapes<std::uint16_t>(); }
TEST(CudaTransposeTest, KernelMatchesPlainTranspose4Byte) { expect_all_shapes<std::uint32_t>(); }
TEST(CudaTransposeTest, KernelMatchesPlainTranspose8Byte) { expect_all_shapes<std::uint64_t>(); }

// The whole path on real filters: transpose_plan of the permuted view's copy plan, then the kernel
// with the variant copy.cu would pick, against the CPU library's contiguous() of the view.
void expect_filter_copy(const Shape& hwio_shape) {
  SCOPED_TRACE(hwio_shape.to_string());
  const Tensor hwio = random_uniform(hwio_shape, -1.0, 1.0, {.dtype = DType::float16});
  const Tensor view = hwio.permute({3, 0, 1, 2});
  const auto t = transpose_plan(copy_plan(view));
  ASSERT_TRUE(t.has_value());
  const Tensor want = view.contiguous();
  constexpr int T = kTileOf<std::uint16_t>;
  const auto* in = static_cast<const std::uint16_t*>(view.data_ptr());
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(in) % 16, 0u);
  Aligned<std::uint16_t> out(view.numel());
  run_variant<std::uint16_t, std::uint32_t>(t->cols % T == 0, t->rows % T == 0, 7 * kWarp, t->rows,
                                            t->cols, in, out.data());
  EXPECT_EQ(std::memcmp(out.data(), want.data_ptr(), want.nbytes()), 0);
}

TEST(CudaTransposeTest, FilterCopiesMatchTheCpuLibrary) {
  expect_filter_copy({3, 3, 16, 24});  // whole tiles both ways
  expect_filter_copy({7, 7, 3, 16});   // the stem: 147 rows, element stores
  expect_filter_copy({1, 1, 8, 20});   // 20 columns: element loads
}

}  // namespace
}  // namespace mixprec::cuda::kernels
