// Host side of the sparse softmax crossentropy on CUDA: scratch, results and the launches (see
// sparse_crossentropy.h). The op (ops/sparse_crossentropy.cpp) passes contiguous operands.
#include "backend/cuda/sparse_crossentropy.h"

#include <cstdint>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

namespace {

DType compute_dtype(DType d) { return d == DType::float64 ? DType::float64 : DType::float32; }

}  // namespace

SparseCrossentropyForward sparse_crossentropy_forward(const Tensor& logits, const Tensor& labels,
                                                      std::int64_t ignore) {
  const Device device = logits.device();
  const std::int64_t classes = logits.shape()[logits.rank() - 1];
  const std::int64_t rows = classes == 0 ? 0 : logits.numel() / classes;
  const DType compute = compute_dtype(logits.dtype());
  SparseCrossentropyForward out;
  out.loss = core::make_tensor(Shape{}, compute, device);
  out.count = core::make_tensor(Shape{}, compute, device);
  out.row_stats = core::make_tensor(Shape{rows, 2}, compute, device);
  // The rows' losses (R values of the compute type, 1/V of the logits) for the mean pass.
  Tensor losses = core::make_tensor(Shape{rows}, compute, device);
  StreamScope scope(device);
  const Tensor x = contiguous(logits.detach()), y = contiguous(labels.detach());
  kernels::sparse_crossentropy_forward(logits.dtype(), x.data_ptr(),
                                       static_cast<const std::int64_t*>(y.data_ptr()), rows,
                                       classes, ignore, losses.data_ptr(), out.row_stats.data_ptr(),
                                       out.loss.data_ptr(), out.count.data_ptr(), scope.stream());
  return out;
}

Tensor sparse_crossentropy_backward(const Tensor& logits, const Tensor& labels, std::int64_t ignore,
                                    const Tensor& row_stats, const Tensor& count, const Tensor& g) {
  const Device device = logits.device();
  Tensor dx = core::make_tensor(logits.shape(), logits.dtype(), device);
  if (dx.numel() == 0) return dx;
  const std::int64_t classes = logits.shape()[logits.rank() - 1];
  const std::int64_t rows = logits.numel() / classes;
  StreamScope scope(device);
  const Tensor x = contiguous(logits.detach()), y = contiguous(labels.detach());
  const Tensor gc = contiguous(g.detach()), nc = contiguous(count.detach());
  kernels::sparse_crossentropy_backward(
      logits.dtype(), x.data_ptr(), static_cast<const std::int64_t*>(y.data_ptr()), rows, classes,
      ignore, row_stats.data_ptr(), gc.data_ptr(), nc.data_ptr(), dx.data_ptr(), scope.stream());
  return dx;
}

}  // namespace mixprec::cuda
