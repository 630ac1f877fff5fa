// What layer_norm and rms_norm (ops/layer_norm.cpp) share with the fused residual step
// (ops/add_layer_norm.cpp): the argument checks and the recording of the normalization's autograd
// node, so that the fused op's y has the very node the unfused layer_norm would give it.
#pragma once

#include "backend/nn_kernels.h"
#include "mixprec/tensor.h"

namespace mixprec::ops {

// layer_norm's (kind layer) or rms_norm's checks of x, gamma, beta (ignored for rms) and epsilon,
// throwing with `op` in the message.
void check_row_norm_arguments(const char* op, RowNorm kind, const Tensor& x, const Tensor& gamma,
                              const Tensor& beta, double epsilon);

// r.y, recorded (where autograd records) with the normalization's node on x, gamma and beta (rms:
// x and gamma), which keeps x and r's statistics for the backward. r: the backend's forward of x.
Tensor record_row_norm(RowNorm kind, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       RowNormResult r);

}  // namespace mixprec::ops
