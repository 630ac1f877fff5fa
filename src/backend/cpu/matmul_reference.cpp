#include "backend/cpu/matmul_reference.h"

#include <algorithm>
#include <vector>

#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cpu {

namespace {

// Reads element `offset` (in elements from t.data_ptr()) of `t` as double.
double load(const Tensor& t, std::int64_t offset) {
  return core::dispatch_dtype(t.dtype(), [&]<typename T>() {
    return core::load_as<double>(static_cast<const T*>(t.data_ptr())[offset]);
  });
}

}  // namespace

Tensor matmul_reference(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb) {
  if (a.rank() < 2 || b.rank() < 2) {
    throw ShapeError("matmul_reference: operands need rank >= 2, got " + a.shape().to_string() +
                     " and " + b.shape().to_string());
  }
  const int ra = a.rank(), rb = b.rank();
  // Logical matrices op(a) (M, K) and op(b) (K, N): (row stride, column stride) of each.
  const bool a_t = ta == Transpose::yes, b_t = tb == Transpose::yes;
  const std::int64_t m = a.dim(a_t ? -1 : -2), k_a = a.dim(a_t ? -2 : -1);
  const std::int64_t k_b = b.dim(b_t ? -1 : -2), n = b.dim(b_t ? -2 : -1);
  if (k_a != k_b) {
    throw ShapeError("matmul_reference: inner extents differ: " + a.shape().to_string() + " x " +
                     b.shape().to_string());
  }
  const std::vector<std::int64_t>& sa = a.strides();
  const std::vector<std::int64_t>& sb = b.strides();
  const std::int64_t a_row = sa[static_cast<std::size_t>(a_t ? ra - 1 : ra - 2)];
  const std::int64_t a_col = sa[static_cast<std::size_t>(a_t ? ra - 2 : ra - 1)];
  const std::int64_t b_row = sb[static_cast<std::size_t>(b_t ? rb - 1 : rb - 2)];
  const std::int64_t b_col = sb[static_cast<std::size_t>(b_t ? rb - 2 : rb - 1)];

  // Batch axes, right-aligned; a missing axis or an extent of 1 broadcasts (stride 0).
  struct BatchAxis {
    std::int64_t extent, a_stride, b_stride;
  };
  const int batch_rank = std::max(ra, rb) - 2;
  std::vector<BatchAxis> batch_axes;
  std::vector<std::int64_t> out_dims;
  std::int64_t batches = 1;
  for (int i = 0; i < batch_rank; ++i) {
    const int ia = i - (batch_rank - (ra - 2)), ib = i - (batch_rank - (rb - 2));
    const std::int64_t da = ia >= 0 ? a.shape()[ia] : 1, db = ib >= 0 ? b.shape()[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      throw ShapeError("matmul_reference: batch axes do not broadcast: " + a.shape().to_string() +
                       " x " + b.shape().to_string());
    }
    batch_axes.push_back({std::max(da, db), da != 1 ? sa[static_cast<std::size_t>(ia)] : 0,
                          db != 1 ? sb[static_cast<std::size_t>(ib)] : 0});
    out_dims.push_back(std::max(da, db));
    batches *= std::max(da, db);
  }
  out_dims.push_back(m);
  out_dims.push_back(n);

  Tensor out = core::make_tensor(Shape(out_dims), a.dtype(), a.device());
  core::dispatch_dtype(out.dtype(), [&]<typename T>() {
    T* c = static_cast<T*>(out.data_ptr());
    for (std::int64_t batch = 0; batch < batches; ++batch) {
      std::int64_t rem = batch, offset_a = 0, offset_b = 0;
      for (auto axis = batch_axes.rbegin(); axis != batch_axes.rend(); ++axis) {
        const std::int64_t idx = rem % axis->extent;
        rem /= axis->extent;
        offset_a += idx * axis->a_stride;
        offset_b += idx * axis->b_stride;
      }
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          double acc = 0.0;
          for (std::int64_t k = 0; k < k_a; ++k) {
            acc += load(a, offset_a + i * a_row + k * a_col) *
                   load(b, offset_b + k * b_row + j * b_col);
          }
          c[(batch * m + i) * n + j] = core::store_as<T>(acc);
        }
      }
    }
  });
  return out;
}

}  // namespace mixprec::cpu
