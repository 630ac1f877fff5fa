// Differentiable operations. All take and return Tensors; every floating op supports float32,
// float16, bfloat16 (stored 16-bit, computed in float32 inside, rounded once on store) and float64.
// Binary ops broadcast NumPy-style and require both operands to have the same dtype and device;
// a mismatch throws naming the op and both shapes/dtypes. Reductions accumulate in float32
// (float64 for float64). Axes may be negative.
#pragma once

#include <cstdint>
#include <vector>

#include "mixprec/tensor.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {

// ---- elementwise binary (broadcasting) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);  // a > 0 where b is not an integer
Tensor pow(const Tensor& a, double exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // gradient goes to a on ties
Tensor minimum(const Tensor& a, const Tensor& b);  // gradient goes to a on ties
// A scalar operand takes the dtype of the tensor operand.
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);

// ---- elementwise unary ----
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);  // gradient 0 at 0
Tensor relu(const Tensor& x);
Tensor relu6(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
enum class GeluApproximation { none, tanh };  // none = exact erf form (the Keras default)
Tensor gelu(const Tensor& x, GeluApproximation approximation = GeluApproximation::none);
Tensor silu(const Tensor& x);  // x * sigmoid(x)
inline Tensor swish(const Tensor& x) { return silu(x); }

// ---- comparisons and selection (not differentiable; return bool) ----
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
// cond ? a : b, broadcasting all three; cond is bool. Differentiable in a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor is_finite(const Tensor& x);  // bool, elementwise
bool all_finite(const Tensor& x);   // true when no element is Inf or NaN

// ---- reductions ----
enum class KeepDims { no, yes };
// Empty `axes` reduces over all axes.
Tensor sum(const Tensor& x, const std::vector<int>& axes = {}, KeepDims keep = KeepDims::no);
Tensor mean(const Tensor& x, const std::vector<int>& axes = {}, KeepDims keep = KeepDims::no);
Tensor max(const Tensor& x, const std::vector<int>& axes = {}, KeepDims keep = KeepDims::no);
Tensor argmax(const Tensor& x, int axis, KeepDims keep = KeepDims::no);  // int64
// Numerically stable (max subtracted), accumulated in float32; output in the input dtype.
Tensor softmax(const Tensor& x, int axis = -1);
Tensor log_softmax(const Tensor& x, int axis = -1);

// ---- linear algebra ----
enum class Transpose { no, yes };
// (..., M, K) x (..., K, N) -> (..., M, N), transposes applied to the last two axes first. Batch
// axes broadcast. float16/bfloat16 accumulate in float32 (compute in float32, rounded once on
// store).
Tensor matmul(const Tensor& a, const Tensor& b, Transpose transpose_a = Transpose::no,
              Transpose transpose_b = Transpose::no);

// Accumulation dtype of a 16-bit matmul: float32 (the default; DESIGN §2.4 switch = 1) or the
// compute dtype itself (switch = 0: every partial sum is rounded to float16/bfloat16, as 16-bit
// tensor-core accumulation does; on the CPU this is a slow reference path).
enum class Accumulation { float32, compute_dtype };
Tensor matmul(const Tensor& a, const Tensor& b, Transpose transpose_a, Transpose transpose_b,
              Accumulation accumulation);

// matmul(x, cast(kernel, x.dtype())) as one op, for a layer whose kernel variable is kept in a
// wider dtype than it computes in (the float32 master of a mixed-precision layer): x (..., K),
// kernel (K, N) -> (..., N) in x's dtype. Values and gradients are bit for bit those of the
// composition (the kernel gradient is rounded to x's dtype and arrives in the kernel's dtype),
// but the 16-bit kernel is made once per call in the form the backend multiplies (on a CPU
// without a float16 matmul: float32 values rounded to float16) and reused by the backward pass,
// and the kernel gradient is rounded in place rather than converted there and back.
Tensor autocast_matmul(const Tensor& x, const Tensor& kernel);

// ---- dtype and shape ----
Tensor cast(const Tensor& x, DType dtype);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int axis0, int axis1);
Tensor permute(const Tensor& x, const std::vector<int>& axes);
Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t stop,
             std::int64_t step = 1);
Tensor concat(const std::vector<Tensor>& tensors, int axis);
// Sums `x` down to `shape` (the inverse of broadcasting `shape` up to x.shape()).
Tensor sum_to(const Tensor& x, const Shape& shape);
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// indices (int32, int64 or uint8, values in [0, depth)) -> one-hot of shape
// indices.shape() + (depth,) in `dtype`. An index outside [0, depth) is a ValueError for CPU
// indices; for CUDA indices it is not checked (that would read them back to the host, a sync per
// training step): its row is all NaN for a floating dtype (so a bad label shows as a NaN loss, not
// a silently wrong one) and all zeros for an integer or bool dtype.
Tensor one_hot(const Tensor& indices, std::int64_t depth, DType dtype = DType::float32);

}  // namespace mixprec

#pragma GCC visibility pop
