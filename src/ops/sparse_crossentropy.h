// The sparse softmax crossentropy from logits as one op (losses::SparseCategoricalCrossentropy
// with from_logits): the mean over the positions not ignored of -log softmax(logits)[label],
// computed in float32 (float64 for float64 logits) row by row by the backend
// (TensorKernels::sparse_crossentropy_forward), with one backward node that writes
// (softmax - onehot) * g / count straight into the logits' dtype. Neither pass makes a float32 copy
// of 16-bit logits; the node keeps the logits, the labels and two values per row.
#pragma once

#include <cstdint>
#include <optional>

#include "mixprec/tensor.h"

namespace mixprec::ops {

// logits (..., V), V >= 1, any floating dtype and strides; labels integer (int32, int64 or uint8)
// of shape logits.shape[:-1], on the logits' device; the caller (the loss) has checked them,
// including the range of the labels on a device that runs synchronously. Positions whose label
// equals ignore_class add neither loss nor gradient and are not counted in the mean; the loss is 0
// (gradient 0) when every position is ignored. Returns a 0-d float32 tensor (float64 for float64
// logits), differentiable with respect to the logits.
Tensor sparse_softmax_crossentropy(const Tensor& logits, const Tensor& labels,
                                   std::optional<std::int64_t> ignore_class);

}  // namespace mixprec::ops
