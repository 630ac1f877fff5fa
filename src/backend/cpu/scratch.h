// Per-thread scratch blocks that the oneDNN ops (matmul, convolution, pooling, batch norm) keep
// between calls: oneDNN's scratchpads, convolution filters in the primitive's blocked layout, and
// the matmul's float32 copies of 16-bit operands and its float32 result before rounding.
//
// A training step asks for the same sizes every time. A fresh multi-megabyte block from free()d
// memory page-faults on first touch (a 4 MiB float32 copy of a 1024x1024 operand: 1024 faults,
// about 1 ms on the loaded VM, against 6-7 ms for the whole quiet 1024^3 matmul); the allocator's
// block cache (core/allocator.cpp) now avoids most of that too, so for the convolution the gain is
// fewer allocations rather than time: a (32, 28, 28, 64) x (3, 3, 64, 64) forward + backward step
// makes 3 allocations instead of 8 (float32; 9 in bfloat16), its time unchanged within the noise
// of the shared 2-core VM. The blocks come from core::make_tensor, so
// memory_stats().current_bytes counts them for as long as they are kept (there: 0.3 MiB in
// float32, 1.7 MiB in bfloat16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

#include "mixprec/tensor.h"

namespace mixprec::cpu {

// One kept block per slot and thread. The slots of one call must differ from each other (a call
// holds its blocks at the same time); different ops share slots, because one thread runs one op
// at a time, and the largest request of a slot is what it keeps.
enum class ScratchSlot {
  operand_a,   // matmul: float32 copy of a 16-bit first operand
  operand_b,   // matmul: float32 copy of a 16-bit second operand
  result,      // matmul: float32 result before rounding to 16 bits
  scratchpad,  // oneDNN's scratchpad of any primitive (bytes)
  filters,     // convolution: filters (or their gradient) in the primitive's blocked layout
};

// Blocks larger than this are used once and freed, not kept (a slot never pins more than this).
constexpr std::size_t kScratchKeepBytes = std::size_t{64} << 20;

// A contiguous (n) tensor of `dtype` with undefined contents, valid until this thread's next
// request of the same slot (the returned tensor keeps its memory alive, but the next request may
// hand the same memory out again): a view of the slot's kept block when that block has `dtype` and
// at least n elements; otherwise a fresh block, which the slot keeps in place of the old one when
// it is at most kScratchKeepBytes.
Tensor scratch(ScratchSlot slot, DType dtype, std::int64_t n);

// oneDNN's scratchpad of `bytes` (user scratchpad mode) in the `scratchpad` slot: the block that
// holds the memory and the dnnl::memory over it, for DNNL_ARG_SCRATCHPAD.
struct Scratchpad {
  Tensor block;
  dnnl::memory memory;
};
Scratchpad dnnl_scratchpad(std::size_t bytes);

// Frees the calling thread's kept blocks (every slot). Blocks handed out and still held by a
// caller live on until it drops them.
void release_cpu_scratch();

}  // namespace mixprec::cpu
