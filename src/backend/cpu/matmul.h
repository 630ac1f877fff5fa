// CPU matmul: oneDNN for float32 and the 16-bit types, a blocked OpenMP loop for float64.
#pragma once

#include "mixprec/ops.h"
#include "mixprec/tensor.h"

namespace mixprec::cpu {

// a: (B..., M, K), or (B..., K, M) with ta = yes; b: (B..., K, N), or (B..., N, K) with tb = yes.
// Preconditions (checked by the op layer; violations throw mixprec::Error here too): the same
// floating dtype, CPU, the same rank >= 2, inner extents equal, and each batch extent of a and b
// equal or 1 (1 broadcasts; the op layer pads the lower-rank operand with leading 1s). Any
// strides: transposed and leading-dimension-padded views go to oneDNN as strides, other layouts
// are copied first. Returns a new contiguous (max(Ba, Bb)..., M, N) tensor of the operands' dtype.
//
// float16 (and bfloat16 on CPUs without native bf16) is converted to float32, multiplied in
// float32 and the result rounded once; native bfloat16 multiplies bf16 with float32 accumulation
// and rounds once on store. Either way the 16-bit result is the float32 product of the stored
// 16-bit values, rounded once (up to float32 summation order).
Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb);

// The same with the result in `out_dtype`: the operands' dtype, or float32 for 16-bit operands,
// which returns the float32 accumulator unrounded. For callers that add several products before
// rounding once (the backward of a batch-broadcast matmul sums over the batch in float32).
Tensor matmul(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb, DType out_dtype);

// a (M, K) x b (K, N) + bias32 (N, float32, contiguous), rank 2, returned in the operands' dtype
// (float32, float16 or bfloat16): the bias is added to the float32 accumulator and the sum rounded
// once (oneDNN's bias argument; float16, and bfloat16 without native support, multiply exactly
// widened float32 copies). float64 is not taken.
Tensor matmul_bias(const Tensor& a, const Tensor& b, Transpose ta, Transpose tb,
                   const Tensor& bias32);

// The matmul's scratch blocks (float32 copies of 16-bit operands, the float32 result before
// rounding, oneDNN's scratchpad) come from the host allocator's block cache for one call and go
// back to it (backend/cpu/scratch.h): nothing stays live between calls, so this does nothing; it
// stays for callers that release scratch explicitly.
void release_matmul_scratch();

}  // namespace mixprec::cpu
