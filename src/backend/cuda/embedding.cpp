// Host side of the embedding lookup on CUDA (see embedding.h).
#include "backend/cuda/embedding.h"

#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

Tensor embedding_gather(const Tensor& table, const Tensor& ids, DType out_dtype) {
  const std::int64_t vocab = table.dim(0), c = table.dim(1), n = ids.numel();
  std::vector<std::int64_t> dims(ids.shape().begin(), ids.shape().end());
  dims.push_back(c);
  Tensor out = core::make_tensor(Shape(dims), out_dtype, table.device());
  if (n == 0 || c == 0) return out;
  StreamScope scope(table.device());
  const Tensor tc = contiguous(table.detach()), ic = contiguous(ids.detach());
  kernels::embedding_gather(ids.dtype(), ic.data_ptr(), n, table.dtype(), tc.data_ptr(), vocab, c,
                            out_dtype, out.data_ptr(), scope.stream());
  return out;
}

Tensor embedding_scatter_add(const Tensor& g, const Tensor& ids, std::int64_t vocab,
                             DType table_dtype) {
  const std::int64_t c = g.dim(-1), n = ids.numel();
  Tensor out = core::make_tensor(Shape{vocab, c}, table_dtype, g.device());
  if (vocab == 0 || c == 0) return out;
  fill(out, 0.0);
  if (n == 0) return out;
  StreamScope scope(g.device());
  const Tensor gc = contiguous(g.detach()), ic = contiguous(ids.detach());
  Tensor keys = core::make_tensor(Shape{kernels::embedding_padded(n)}, DType::int64, g.device());
  kernels::embedding_scatter_add(ids.dtype(), ic.data_ptr(), n, g.dtype(), gc.data_ptr(), vocab, c,
                                 table_dtype, keys.data_ptr(), out.data_ptr(), scope.stream());
  return out;
}

}  // namespace mixprec::cuda
