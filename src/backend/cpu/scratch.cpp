#include "backend/cpu/scratch.h"

#include "backend/cpu/dnnl_context.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

Tensor scratch(ScratchSlot, DType dtype, std::int64_t n) {
  // core::make_tensor allocates through core::cpu_allocate, which serves a request from the block
  // cache when a block of its size class is there (every step after the first).
  return core::make_tensor(Shape{n}, dtype, Device::cpu());
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

void release_cpu_scratch() {}

}  // namespace mixprec::cpu
