// The interface between the CUDA backend's host code (src/backend/cuda/*.cpp, compiled by the C++
// compiler) and its kernels (kernels/*.cu, compiled by nvcc): plain data and pointers only, so that
// the .cu files stay small and quick to compile. Every launcher enqueues on the given stream,
// checks the launch (DeviceError on failure) and returns without waiting. Pointers are device
// pointers at the first element of each operand; strides are in elements. Launchers are called
// with at least one element of work.
//
// Storage types: float32, float16, bfloat16 and float64 kernels compute in float (double for
// float64) and round once on store (DESIGN §7.4). A dtype a launcher does not support is a
// DTypeError naming the op.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/op_kinds.h"
#include "mixprec/dtype.h"

namespace mixprec::cuda::kernels {

// Axes an elementwise geometry may have after merging (contiguous runs of axes merge into one).
inline constexpr int kMaxDims = 10;

// The geometry of an elementwise op with K operands: a row-major walk over `sizes` (outermost
// first; their product is numel) with each operand's element strides (0 along broadcast axes).
// Ops whose output is a fresh contiguous tensor use the walk's linear index as the output offset.
template <int K>
struct Strided {
  int ndim = 1;
  std::int64_t numel = 0;
  // Every offset (numel included) fits in 31 bits: the kernels index with 32-bit arithmetic.
  bool index32 = true;
  // One axis with unit strides everywhere (no broadcasting, no gaps): the vectorised kernels apply
  // when the pointers are also 16-byte aligned.
  bool dense = false;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[K][kMaxDims] = {};
};

// ---- elementwise.cu: floating dtypes ----
// out (contiguous) = op(x); plan operand 0 = x.
void unary(UnaryOp op, DType dtype, const Strided<1>& plan, const void* x, void* out,
           cudaStream_t s);
// out = g * op'(x) (y = op(x) from the forward; 16-bit y is recomputed in float from x, as on the
// CPU); operands 0, 1, 2 = g, x, y.
void unary_backward(UnaryOp op, DType dtype, const Strided<3>& plan, const void* g, const void* x,
                    const void* y, void* out, cudaStream_t s);
// A per-channel broadcast plan of a binary op: operand `full` walks the plan contiguously, the
// other has strides (channels, 0, 1) over sizes (groups, rows, channels), or (0, 1) over (rows,
// channels) for a single group; 32-bit offsets. binary() takes a vectorised kernel for it.
struct ChannelPlan {
  int full = 0;  // the operand walking contiguously (0: a, 1: b)
  std::int64_t group_size = 0, channels = 0;
};
std::optional<ChannelPlan> channel_plan(const Strided<2>& plan);

// out = a (op) b; operands 0, 1 = a, b.
void binary(BinaryOp op, DType dtype, const Strided<2>& plan, const void* a, const void* b,
            void* out, cudaStream_t s);

// relu(a + b) over n contiguous elements of one floating dtype, in the compute type, rounded once
// (16-byte vectors where the pointers allow).
void add_relu_dense(DType dtype, const void* a, const void* b, void* out, std::int64_t n,
                    cudaStream_t s);

// ---- select.cu ----
// out (bool) = a (op) b for any dtype (compared in double, like the CPU's integer comparisons).
void compare(CompareOp op, DType dtype, const Strided<2>& plan, const void* a, const void* b,
             bool* out, cudaStream_t s);
// out = cond ? a : b for floating dtypes; operands 0, 1, 2 = cond (bool), a, b.
void where(DType dtype, const Strided<3>& plan, const bool* cond, const void* a, const void* b,
           void* out, cudaStream_t s);
// out (bool) = isfinite(x) (true for every integer and bool element).
void is_finite(DType dtype, const Strided<1>& plan, const void* x, bool* out, cudaStream_t s);
// *flag (an int the caller set to 1) becomes 0 when some element of x is Inf or NaN.
void all_finite(DType dtype, const Strided<1>& plan, const void* x, int* flag, cudaStream_t s);

// ---- cast.cu ----
// out (contiguous, dtype `to`) = x (dtype `from`) converted with the CPU's rules: round to nearest
// even; float -> integer truncates toward zero, saturates, NaN -> 0; integer -> integer exact
// (two's complement wrap, as static_cast); anything -> bool is != 0.
void cast(DType from, DType to, const Strided<1>& plan, const void* x, void* out, cudaStream_t s);

// ---- copy.cu ----
// dst[offset_1(i)] = src[offset_0(i)] for elements of `element_size` bytes (1, 2, 4 or 8):
// operand 0 = src, operand 1 = dst (both strided).
void copy(std::size_t element_size, const Strided<2>& plan, const void* src, void* dst,
          cudaStream_t s);
// n contiguous elements of `element_size` bytes set to the low bytes of `pattern`.
void fill(std::size_t element_size, std::uint64_t pattern, std::int64_t n, void* out,
          cudaStream_t s);

// ---- reduce.cu: floating dtypes, accumulated in float (double for float64) ----
// x contiguous (rows, length) -> out[rows] (x's dtype): sum (times `scale`) or max of each row.
// `partials` is scratch of at least reduce_rows_partials(rows, length) doubles (may be null when
// that is 0).
std::int64_t reduce_rows_partials(std::int64_t rows, std::int64_t length);
void reduce_rows(ReduceOp op, DType dtype, const void* x, std::int64_t rows, std::int64_t length,
                 double scale, double* partials, void* out, cudaStream_t s);
// x contiguous (length, cols) -> out[cols]: sum (times `scale`) or max of each column.
std::int64_t reduce_columns_partials(std::int64_t length, std::int64_t cols);
void reduce_columns(ReduceOp op, DType dtype, const void* x, std::int64_t length, std::int64_t cols,
                    double scale, double* partials, void* out, cudaStream_t s);
// x contiguous (outer, length, cols) -> out (outer, cols): the middle axis reduced, coalesced along
// cols (kernels/reduce_index.h); outer <= kMaxMiddleOuter (a grid's z extent).
inline constexpr std::int64_t kMaxMiddleOuter = 65535;
std::int64_t reduce_middle_partials(std::int64_t outer, std::int64_t length, std::int64_t cols);
void reduce_middle(ReduceOp op, DType dtype, const void* x, std::int64_t outer, std::int64_t length,
                   std::int64_t cols, double scale, double* partials, void* out, cudaStream_t s);
// The sum over the middle axis of x contiguous (outer, length, cols) -> out (outer, cols), times
// `scale`, in two deterministic passes (kernels/column_sums_kernels.cuh): 16-byte vectors of
// columns per thread, float runs folded into double, then one warp per output. `partials`: scratch
// of column_sum_partials(...) doubles (the parts of column_sum_parts).
std::int64_t column_sum_parts(DType dtype, std::int64_t outer, std::int64_t length,
                              std::int64_t cols);
std::int64_t column_sum_partials(DType dtype, std::int64_t outer, std::int64_t length,
                                 std::int64_t cols);
void reduce_middle_sum(DType dtype, const void* x, std::int64_t outer, std::int64_t length,
                       std::int64_t cols, double scale, double* partials, void* out,
                       cudaStream_t s);
// x contiguous (outer, length, inner) -> out (outer, inner) int64: the index of the first maximum
// along `length` (the first NaN wins), for any dtype but bool.
void argmax(DType dtype, const void* x, std::int64_t outer, std::int64_t length, std::int64_t inner,
            std::int64_t* out, cudaStream_t s);

// ---- softmax.cu: floating dtypes; x, y, g, dx contiguous (outer, length, inner) ----
void softmax_forward(SoftmaxKind kind, DType dtype, const void* x, std::int64_t outer,
                     std::int64_t length, std::int64_t inner, void* y, cudaStream_t s);
void softmax_backward(SoftmaxKind kind, DType dtype, const void* g, const void* y,
                      std::int64_t outer, std::int64_t length, std::int64_t inner, void* dx,
                      cudaStream_t s);

// ---- defined in the host code (context.cpp) for the .cu files ----
// Throws DeviceError if the last launch failed ("<kernel> launch failed on the GPU: ...").
void check_launch(const char* kernel);
// Throws DTypeError: "<op> on CUDA does not support dtype <dtype>; supported: <supported>".
[[noreturn]] void unsupported_dtype(const char* op, DType dtype, const char* supported);

}  // namespace mixprec::cuda::kernels
