// Moving tensors between the host and GPUs (Tensor::to(Device)). Host <-> device copies go through
// pinned staging buffers on the GPU's copy stream, ordered after the work already queued on its
// compute stream (which may still be writing the source or reading the recycled destination
// block) and before the work queued on it afterwards.
#pragma once

#include <cstddef>

#include "mixprec/tensor.h"

namespace mixprec::cuda {

// A new contiguous tensor on `target` with the values of `src` (same dtype and shape; any strides).
// One end is a CUDA device (or both, on different GPUs). No autograd. A device->host copy returns
// once the values are on the host; a host->device copy returns once `src` may be reused (the tail
// of the copy may still be in flight, ordered before later GPU work).
Tensor to_device(const Tensor& src, Device target);

// Raw copies of `bytes` between host memory (pageable is fine) and a CUDA device pointer.
void copy_host_to_device(Device device, void* dst, const void* src, std::size_t bytes);
void copy_device_to_host(Device device, void* dst, const void* src, std::size_t bytes);

}  // namespace mixprec::cuda
