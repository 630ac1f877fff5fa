// Scratch blocks of the oneDNN ops (matmul, convolution, pooling, batch norm): oneDNN's
// scratchpads, convolution filters in the primitive's blocked layout, and the matmul's float32
// copies of 16-bit operands and its float32 result before rounding.
//
// A training step asks for the same sizes every time. A fresh multi-megabyte block from free()d
// memory page-faults on first touch (a 4 MiB float32 copy of a 1024x1024 operand: 1024 faults,
// about 1 ms on the loaded VM, against 6-7 ms for the whole quiet 1024^3 matmul). The host
// allocator's block cache (core/allocator.cpp, core/host_block_cache.h) keeps every freed block by
// size class and hands it out again, so a scratch block is taken from that cache for one call and
// given back when the caller drops it: no page faults in the steady state, and between calls the
// block is cached memory (memory_stats().cached_bytes), not live tensor bytes. (These blocks were
// once kept per thread and slot between calls, and then counted in memory_stats().current_bytes
// and in the peak for as long as the thread lived: 4.3 MiB of the EfficientNet-B0 64x64 batch 64
// bfloat16 peak.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

#include "mixprec/tensor.h"

namespace mixprec::cpu {

// What a scratch block is for. The slots of one call must differ from each other (a call holds
// its blocks at the same time); they name the block in the code that asks for it.
enum class ScratchSlot {
  operand_a,   // matmul: float32 copy of a 16-bit first operand
  operand_b,   // matmul: float32 copy of a 16-bit second operand
  result,      // matmul: float32 result before rounding to 16 bits
  scratchpad,  // oneDNN's scratchpad of any primitive (bytes)
  filters,     // convolution: filters (or their gradient) in the primitive's blocked layout
};

// A contiguous (n) tensor of `dtype` with undefined contents, from the host allocator's block
// cache; it lives as long as the caller holds it.
Tensor scratch(ScratchSlot slot, DType dtype, std::int64_t n);

// oneDNN's scratchpad of `bytes` (user scratchpad mode) in the `scratchpad` slot: the block that
// holds the memory and the dnnl::memory over it, for DNNL_ARG_SCRATCHPAD.
struct Scratchpad {
  Tensor block;
  dnnl::memory memory;
};
Scratchpad dnnl_scratchpad(std::size_t bytes);

// Nothing is kept between calls any more; kept for the callers that release scratch explicitly
// (cpu::release_matmul_scratch). Does nothing.
void release_cpu_scratch();

}  // namespace mixprec::cpu
