// CPU kernels of the sparse softmax crossentropy (TensorKernels::sparse_crossentropy_forward and
// _backward; the contract is there). One pass per row for the loss (max, sum of exp(x - max), the
// label's term) over a float buffer of one row (double for float64), and a backward that writes
// (softmax - onehot) * g / count straight into the logits' dtype: no float32 copy of the logits.
#pragma once

#include <cstdint>

#include "backend/tensor_kernels.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

SparseCrossentropyForward sparse_crossentropy_forward(const Tensor& logits, const Tensor& labels,
                                                      std::int64_t ignore);

Tensor sparse_crossentropy_backward(const Tensor& logits, const Tensor& labels, std::int64_t ignore,
                                    const Tensor& row_stats, const Tensor& count, const Tensor& g);

}  // namespace mixprec::cpu
