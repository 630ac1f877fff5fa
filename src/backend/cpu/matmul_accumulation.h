// The CPU matmul with 16-bit accumulation (Accumulation::compute_dtype): plain loops in which
// every partial sum is rounded to the operands' 16-bit dtype, in a fixed order (batch entry, then
// k), so results do not depend on the thread count.
#pragma once

#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// l (Bl..., *, *) and r (Br..., *, *): float16 or bfloat16 of one dtype, CPU, any strides, batch
// axes broadcasting (right-aligned, extent 1 broadcasts). Returns a new contiguous tensor of
// `out_shape` and their dtype holding, for each of its matrices, op_o^-1 of the sum of
// op(l) op(r) over the batch entries that map onto it: for a forward out_shape is the broadcast
// batch + (M, N) and each matrix gets one product; for a gradient out_shape is an operand's shape
// and the products of the batch axes it was broadcast along are summed in the same running 16-bit
// sum. `to` = yes writes each (M, N) result transposed into an (N, M) matrix of out.
Tensor matmul_accumulate16(const Tensor& l, Transpose tl, const Tensor& r, Transpose tr,
                           const Shape& out_shape, Transpose to);

}  // namespace mixprec::cpu
