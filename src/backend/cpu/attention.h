// The CPU's fused scaled-dot-product attention (NnKernels::attention_forward / _backward):
// flash-attention style blocks of queries x blocks of keys with an online softmax in float32
// (float64 for float64). The forward keeps only the output and the log-sum-exp of each query; the
// backward recomputes the probabilities block by block. Contract: backend/nn_kernels.h.
#pragma once

#include "backend/nn_kernels.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& mask, const AttentionGeometry& g);

AttentionGradients attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                      const Tensor& v, const Tensor& out, const Tensor& lse,
                                      const Tensor& mask, const AttentionGeometry& g);

}  // namespace mixprec::cpu
