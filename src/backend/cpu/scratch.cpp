#include "backend/cpu/scratch.h"

#include <array>

#include "backend/cpu/dnnl_context.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

constexpr std::size_t kSlots = static_cast<std::size_t>(ScratchSlot::filters) + 1;

std::array<Tensor, kSlots>& kept_blocks() {
  thread_local std::array<Tensor, kSlots> kept;
  return kept;
}

}  // namespace

Tensor scratch(ScratchSlot slot, DType dtype, std::int64_t n) {
  Tensor& block = kept_blocks()[static_cast<std::size_t>(slot)];
  if (block.defined() && block.dtype() == dtype && block.numel() >= n) {
    return core::make_view(block, Shape{n}, {1}, 0);
  }
  // Dropping the old block before allocating the new one keeps the peak at one block per slot.
  block = Tensor();
  Tensor fresh = core::make_tensor(Shape{n}, dtype, Device::cpu());
  if (static_cast<std::size_t>(n) * dtype_size(dtype) <= kScratchKeepBytes) block = fresh;
  return fresh;
}

Scratchpad dnnl_scratchpad(std::size_t bytes) {
  Scratchpad pad;
  pad.block = scratch(ScratchSlot::scratchpad, DType::uint8, static_cast<std::int64_t>(bytes));
  // oneDNN takes a non-const handle; the block is ours to write.
  pad.memory =
      dnnl::memory(dnnl::memory::desc({static_cast<dnnl::memory::dim>(bytes)},
                                      dnnl::memory::data_type::u8, dnnl::memory::format_tag::a),
                   dnnl_engine(), const_cast<void*>(pad.block.data_ptr()));
  return pad;
}

void release_cpu_scratch() {
  for (Tensor& block : kept_blocks()) block = Tensor();
}

}  // namespace mixprec::cpu
