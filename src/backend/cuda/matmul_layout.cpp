// The "describe" step of the CUDA matmul: operand layouts, product shapes and the plan key's hash,
// from shapes and strides alone (see matmul_layout.h). No CUDA call and no CUDA header.
#include "backend/cuda/matmul_layout.h"

#include <algorithm>
#include <functional>
#include <string>

#include "mixprec/error.h"

namespace mixprec::cuda::detail {

MatrixLayout classify_matrix(std::int64_t rows, std::int64_t cols, std::int64_t sr,
                             std::int64_t sc) {
  MatrixLayout m;
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= cols)) {
    m.kind = MatrixKind::row_major;
    m.rows = rows, m.cols = cols, m.ld = rows == 1 ? cols : sr;
  } else if ((rows == 1 || sr == 1) && (cols == 1 || sc >= rows)) {
    m.kind = MatrixKind::transposed;  // x = S^T with S (cols, rows) row-major, row stride sc
    m.rows = cols, m.cols = rows, m.ld = cols == 1 ? rows : sc;
  } else {
    m.kind = MatrixKind::copy;
    m.rows = rows, m.cols = cols, m.ld = cols;
  }
  m.ld = std::max<std::int64_t>(m.ld, 1);
  return m;
}

std::int64_t single_batch_stride(const std::vector<std::int64_t>& extents,
                                 const std::vector<std::int64_t>& strides, const Shape& batch) {
  std::int64_t stride = -1, span = 1;  // span: the batch positions the inner axes cover
  for (int i = batch.rank() - 1; i >= 0; --i) {
    const std::int64_t extent = batch[i];
    if (extent == 1) continue;
    const auto u = static_cast<std::size_t>(i);
    const std::int64_t s = extents[u] == 1 ? 0 : strides[u];
    if (stride == -1) {
      stride = s;
    } else if (s != stride * span) {
      return -1;
    }
    span *= extent;
  }
  return stride == -1 ? 0 : stride;
}

OperandLayout describe_operand(const Shape& shape, const std::vector<std::int64_t>& strides,
                               Transpose t, const Shape& batch, BatchBroadcast broadcast) {
  const int r = shape.rank();
  const auto rr = static_cast<std::size_t>(r);
  const std::int64_t rows = shape[r - 2], cols = shape[r - 1];
  const std::vector<std::int64_t> batch_extents(shape.begin(), shape.end() - 2);
  const std::vector<std::int64_t> batch_strides(strides.begin(), strides.end() - 2);
  const std::int64_t batch_stride = single_batch_stride(batch_extents, batch_strides, batch);
  const bool copy_broadcast =
      broadcast == BatchBroadcast::copy_out && batch_stride == 0 && batch.numel() > 1;
  if (batch_stride < 0 || copy_broadcast) {
    // One contiguous (rows, cols) matrix per batch entry.
    return {OperandCopy::expand_batch, rows, cols, std::max<std::int64_t>(cols, 1), rows * cols, t};
  }
  const MatrixLayout m = classify_matrix(rows, cols, strides[rr - 2], strides[rr - 1]);
  if (m.kind == MatrixKind::copy) {
    // The contiguous copy of x's own shape, described again (its matrices are row-major); where
    // that copy still has no single batch stride, the one copy expands the batch instead.
    OperandLayout copied = describe_operand(shape, contiguous_strides(shape), t, batch, broadcast);
    if (copied.copy == OperandCopy::none) copied.copy = OperandCopy::contiguous;
    return copied;
  }
  const Transpose op = m.kind == MatrixKind::row_major ? t
                       : t == Transpose::yes           ? Transpose::no
                                                       : Transpose::yes;
  return {OperandCopy::none, m.rows, m.cols, m.ld, batch_stride, op};
}

ProductShape product_shape(const Shape& a, const Shape& b, Transpose ta, Transpose tb,
                           const char* who) {
  const int r = a.rank();
  if (r < 2 || b.rank() != r) {
    throw ShapeError(std::string(who) + ": operands need the same rank >= 2, got " + a.to_string() +
                     " x " + b.to_string());
  }
  ProductShape p;
  p.m = ta == Transpose::no ? a[r - 2] : a[r - 1];
  p.k = ta == Transpose::no ? a[r - 1] : a[r - 2];
  const std::int64_t kb = tb == Transpose::no ? b[r - 2] : b[r - 1];
  p.n = tb == Transpose::no ? b[r - 1] : b[r - 2];
  if (p.k != kb) {
    throw ShapeError(std::string(who) + ": inner dimensions do not match: " + a.to_string() +
                     " x " + b.to_string());
  }
  std::vector<std::int64_t> dims;
  for (int i = 0; i < r - 2; ++i) {
    const std::int64_t da = a[i], db = b[i];
    if (da != db && da != 1 && db != 1) {
      throw ShapeError(std::string(who) + ": batch dimensions do not broadcast: " + a.to_string() +
                       " x " + b.to_string());
    }
    dims.push_back(da == 1 ? db : da);
  }
  p.batch = Shape(dims);
  return p;
}

std::size_t PlanKeyHash::operator()(const PlanKey& k) const {
  std::size_t h = 0;
  const auto mix = [&h](std::int64_t v) {
    h ^= std::hash<std::int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  for (std::int64_t v : {std::int64_t{k.device},
                         k.m,
                         k.n,
                         k.k,
                         k.batch,
                         std::int64_t{k.op_a},
                         std::int64_t{k.op_b},
                         k.lda,
                         k.ldb,
                         k.ldd,
                         k.stride_a,
                         k.stride_b,
                         k.stride_d,
                         std::int64_t{k.type_ab},
                         std::int64_t{k.type_d},
                         std::int64_t{k.compute},
                         std::int64_t{k.scale},
                         std::int64_t{k.align_a},
                         std::int64_t{k.align_b},
                         std::int64_t{k.align_d},
                         std::int64_t{k.epilogue},
                         std::int64_t{k.align_bias},
                         std::int64_t{k.align_aux},
                         k.ld_aux})
    mix(v);
  return h;
}

std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

}  // namespace mixprec::cuda::detail
