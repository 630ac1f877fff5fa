// The tensor kernels of one device kind: elementwise arithmetic and activations, comparisons and
// selection, reductions, softmax, casts, copies, concatenation and indexing, dropout's mask.
//
// The ops (src/ops/) check dtypes, shapes and devices before calling an entry, so an entry may
// assume: every tensor argument is defined and on this backend's device; dtypes are the ones the
// op allows; shapes agree as the entry's comment says. Entries that return a tensor return a new
// contiguous one unless said otherwise. No entry may be null.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/op_kinds.h"
#include "mixprec/tensor.h"

namespace mixprec {

// The label value that matches no row (sparse_crossentropy_forward's `ignore` when nothing is
// ignored): labels are checked to lie in [0, V) or equal the ignored class.
inline constexpr std::int64_t kNoIgnoredClass = std::numeric_limits<std::int64_t>::min();

// What sparse_crossentropy_forward returns (see there).
struct SparseCrossentropyForward {
  Tensor loss;       // 0-d, compute type
  Tensor row_stats;  // (R, 2), compute type: max, log-sum-exp of (x - max)
  Tensor count;      // 0-d, compute type: rows not ignored
};

struct TensorKernels {
  // ---- elementwise ----
  // y = op(x), x floating, y of x's shape and dtype.
  Tensor (*unary)(UnaryOp op, const Tensor& x);
  // dx = g * op'(x) (y = op(x) where the derivative is cheaper from it), all of one shape/dtype.
  Tensor (*unary_backward)(UnaryOp op, const Tensor& g, const Tensor& x, const Tensor& y);
  // a (op) b with broadcasting; one floating dtype.
  Tensor (*binary)(BinaryOp op, const Tensor& a, const Tensor& b);
  // relu(a + b) with broadcasting, in the compute type and rounded once, which is bit for bit
  // relu(round(a + b)) (relu commutes with round-to-nearest); the Add + ReLU of residual blocks as
  // one pass (ops/add_relu.h).
  Tensor (*add_relu)(const Tensor& a, const Tensor& b);
  // a (op) b with broadcasting, bool result.
  Tensor (*compare)(CompareOp op, const Tensor& a, const Tensor& b);
  // cond ? a : b with broadcasting (cond bool).
  Tensor (*where)(const Tensor& cond, const Tensor& a, const Tensor& b);
  Tensor (*is_finite)(const Tensor& x);  // bool, x's shape
  bool (*all_finite)(const Tensor& x);   // waits for the device

  // ---- reductions ----
  // The reduction over the axes i with reduce_axis[i] (kept as extent 1), times scale; 16-bit
  // inputs accumulate in float32 and are rounded once.
  Tensor (*reduce)(ReduceOp op, const Tensor& x, const std::vector<bool>& reduce_axis,
                   double scale);
  Tensor (*softmax_forward)(SoftmaxKind kind, const Tensor& x, int axis);
  Tensor (*softmax_backward)(SoftmaxKind kind, const Tensor& g, const Tensor& y, int axis);

  // ---- sparse softmax crossentropy (ops/sparse_crossentropy.h) ----
  // logits (R, V) contiguous, floating, V >= 1; labels (R) contiguous int64; a row whose label
  // equals `ignore` is left out (pass kNoIgnoredClass for none). Computed in the compute type C
  // (float32; float64 for float64 logits) row by row, without a C copy of the logits beyond one
  // row. Returns the loss, a 0-d C tensor: the mean over the rows not left out of
  // -log softmax(row)[label] (0 when every row is left out); `row_stats` (R, 2) C: each row's max
  // and log(sum(exp(x - max))) (0, 0 for a row left out); `count`, a 0-d C tensor, the number of
  // rows not left out. A label outside [0, V) other than `ignore`: the entry may assume the op
  // checked it (CPU) or gives that row a NaN loss (a GPU; no host synchronisation).
  SparseCrossentropyForward (*sparse_crossentropy_forward)(const Tensor& logits,
                                                           const Tensor& labels,
                                                           std::int64_t ignore);
  // dlogits (R, V) in the logits' dtype, rounded once: (softmax(row) - onehot(label)) * g / count
  // for rows not left out, 0 for the others (NaN for a row whose label is out of range); g and
  // count 0-d C tensors, row_stats and count as the forward returned them.
  Tensor (*sparse_crossentropy_backward)(const Tensor& logits, const Tensor& labels,
                                         std::int64_t ignore, const Tensor& row_stats,
                                         const Tensor& count, const Tensor& g);

  // ---- dtype, copies, fills ----
  Tensor (*cast)(const Tensor& x, DType dtype);  // any dtypes, a new contiguous tensor
  // dst = src element for element: same shape and dtype, any strides on both sides.
  void (*copy)(const Tensor& src, const Tensor& dst);
  void (*fill)(const Tensor& t, double value);  // t contiguous

  // ---- concatenation and indexing ----
  // out (contiguous, the concatenated shape) = inputs joined along `axis`.
  void (*concat)(const std::vector<Tensor>& inputs, int axis, const Tensor& out);
  // g cut along `axis` into pieces of `extents`; only the pieces with wanted[i] are made.
  std::vector<Tensor> (*split)(const Tensor& g, int axis, const std::vector<std::int64_t>& extents,
                               const std::vector<bool>& wanted);
  // out (int64, x's shape without `axis`) = the first index of each maximum along `axis`.
  void (*argmax)(const Tensor& x, int axis, const Tensor& out);
  // out (indices' shape + (depth,), floating) = one-hot rows. An index outside [0, depth): the
  // CPU throws ValueError before writing; a GPU writes a row of NaN (no host synchronisation).
  void (*one_hot)(const Tensor& indices, std::int64_t depth, const Tensor& out);

  // ---- dropout ----
  // x * mask / keep, mask from the counter-based generator (core/counter_hash.h): element i is
  // kept when hash(base + i) < threshold. The same (base, threshold) gives the same mask on
  // every device.
  Tensor (*dropout)(const Tensor& x, std::uint64_t base, std::uint64_t threshold, double keep);
};

}  // namespace mixprec
