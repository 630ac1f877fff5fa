// The batch-norm loops that store bfloat16 (forward and backward_dx of
// batch_norm_activation_kernels.h) written with AVX-512 intrinsics and the CPU's native
// float32 -> bfloat16 rounding (AVX512_BF16's vcvtne2ps2bf16), used instead of the compiled
// copies only on a CPU that has it (core::convert_isa() at least avx512_bf16). The compiled
// copies round with the integer formula of simd_convert.h (about 40 instructions per 32 values on
// AVX-512 without BF16); these loops give bit-identical results for every input: the same float32
// operations in the same order, and the integer formula for a vector holding a float32 subnormal
// (which the instruction flushes to zero) or while MXCSR.DAZ is set.
#pragma once

#include "backend/cpu/batch_norm_activation_kernels.h"

namespace mixprec::cpu::bn_kernels {

// Replaces k.forward and k.backward_dx with the native loops for act when the CPU (and the
// conversion limit, core::set_convert_isa_limit) allows it and act has one (none, relu, relu6;
// sigmoid and silu keep the compiled copies). Returns whether it replaced them.
bool use_native_bf16_stores(Act act, Kernels<bfloat16>& k);

}  // namespace mixprec::cpu::bn_kernels
