// BatchNormalization over the global batch of a process group (src/layers/sync_batch_norm.h) and
// the SyncBatchNormalization convenience (include/mixprec/layers/sync_batch_normalization.h).
#include "layers/sync_batch_norm.h"

#include <string>
#include <utility>

#include "mixprec/distributed/distributed.h"
#include "mixprec/error.h"
#include "mixprec/layers/sync_batch_normalization.h"
#include "mixprec/ops.h"
#include "ops/collective_ops.h"

namespace mixprec::layers {

namespace detail {

SyncBatchNormOutput sync_batch_norm_training(const Tensor& x, const Tensor& gamma,
                                             const Tensor& beta, double epsilon) {
  const DType f = gamma.dtype();
  const std::int64_t channels = x.dim(-1);
  const std::int64_t rows = channels > 0 ? x.numel() / channels : 0;
  const double total = distributed::all_reduce(static_cast<double>(rows));
  if (!(total > 0)) {
    throw ValueError("SyncBatchNormalization: the global batch has no values per channel (x " +
                     x.shape().to_string() + " on every rank); feed a non-empty batch");
  }
  const Tensor xf = reshape(x.dtype() == f ? x : cast(x, f), Shape{rows, channels});
  const Tensor mean = mul(ops::all_reduce_sum(sum(xf, {0})), 1.0 / total);
  const Tensor centred = sub(xf, mean);
  const Tensor variance = mul(ops::all_reduce_sum(sum(mul(centred, centred), {0})), 1.0 / total);
  const Tensor normalised = mul(centred, rsqrt(add(variance, epsilon)));
  Tensor y = reshape(add(mul(normalised, gamma), beta), x.shape());
  if (y.dtype() != x.dtype()) y = cast(y, x.dtype());
  return {{y, mean, variance}, static_cast<std::int64_t>(total)};
}

}  // namespace detail

namespace {

BatchNormalizationOptions with_synchronized(BatchNormalizationOptions options) {
  options.synchronized = true;
  return options;
}

}  // namespace

SyncBatchNormalization::SyncBatchNormalization(BatchNormalizationOptions options)
    : BatchNormalization(with_synchronized(std::move(options))) {}

}  // namespace mixprec::layers
