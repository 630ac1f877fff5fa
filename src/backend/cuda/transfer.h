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

namespace detail {

// Host-to-device staging is a ring of pinned chunks per GPU, used oldest first. A host-to-device
// copy must be ordered after the compute stream's queued work (its destination block may be a
// recycled one that queued kernels still read), so a chunk's DMA may not finish before the GPU
// catches up; the host must then not wait for it (a custom training loop would stall every step
// on a batch above two chunks). The ring grows instead, up to max_chunks; only a ring at its
// limit waits for its oldest chunk. next_staging_chunk decides, for a ring of `size` chunks whose
// oldest (the next in ring order) is `next`: reuse it (its DMA is done), grow (a new chunk is
// inserted at `next`, before the oldest, which moves to next + 1), or wait for it, then reuse.
enum class StagingAction { reuse, grow, wait };
struct StagingStep {
  StagingAction action = StagingAction::grow;
  std::size_t slot = 0;  // the chunk to fill
  std::size_t next = 0;  // the oldest chunk after this step
  std::size_t size = 0;  // the ring's size after this step
};
StagingStep next_staging_chunk(std::size_t size, std::size_t next, bool oldest_done,
                               std::size_t max_chunks);

inline constexpr std::size_t kStagingChunkBytes = std::size_t{8} << 20;
inline constexpr std::size_t kMaxStagingChunks = 32;  // 256 MiB of pinned memory per GPU at most

}  // namespace detail

}  // namespace mixprec::cuda
