// bfloat16's register-blocked depthwise backward-filters loop with AVX512_BF16 dot products
// (vdpbf16ps), depthwise_filters_bf16.cpp; depthwise_filters.cpp runs it in place of its own
// register-blocked loop for bfloat16 where the CPU has AVX512_BF16.
#pragma once

#include <cstdint>

#include "backend/cpu/depthwise_filters_rows.h"
#include "mixprec/bfloat16.h"

namespace mixprec::cpu::depthwise {

// Whether bfloat16's backward filters run blocked_channels_bf16_dot: the conversion paths' CPU
// check says AVX512_BF16 (core::convert_isa() at avx512_bf16, so core::set_convert_isa_limit
// below it turns this loop off too) and set_bf16_dot_allowed has not forbidden it.
bool bf16_dot_in_use();

// For tests and benchmarks: allow (the default) or forbid the AVX512_BF16 loop, so that the
// float32-FMA loop can be run on a CPU that has it. Returns the previous setting; pass it back to
// restore. Process-wide; not meant to be changed while a backward-filters call runs.
bool set_bf16_dot_allowed(bool allowed);

// The register-blocked loop (plan kind 31, 32, 51 or 52) on the channel blocks from channel 0
// (64, then 32 and 16 at kernel width 3; 32, then 16 at width 5) for the rows of `rows` at filter
// row rows.kh: acc (that kh's KW * C sums) += the products, every sum adding its rows, and each
// row's columns, in increasing order as the float32-FMA loop does. Returns the first channel left
// for the generic loop. Call only when bf16_dot_in_use().
std::int64_t blocked_channels_bf16_dot(const bfloat16* x, const bfloat16* dy, const ConvGeometry& g,
                                       const RowPlan& p, const RowSpan& rows, float* acc);

}  // namespace mixprec::cpu::depthwise
