#include "backend/cuda/transfer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/host_waits.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace detail {

StagingStep next_staging_chunk(std::size_t size, std::size_t next, bool oldest_done,
                               std::size_t max_chunks) {
  StagingStep st;
  if (size == 0) {
    st.action = StagingAction::grow;
    st.slot = 0;
    st.size = 1;
    st.next = 0;  // the only chunk is also the oldest
    return st;
  }
  if (oldest_done || size >= max_chunks) {
    st.action = oldest_done ? StagingAction::reuse : StagingAction::wait;
    st.slot = next;
    st.size = size;
    st.next = (next + 1) % size;
    return st;
  }
  st.action = StagingAction::grow;  // inserted at `next`: the old oldest moves to next + 1
  st.slot = next;
  st.size = size + 1;
  st.next = (next + 1) % st.size;
  return st;
}

}  // namespace detail

namespace {

using detail::kStagingChunkBytes;

// Pinned staging per GPU. Host to device: the ring of detail::next_staging_chunk (8 MiB chunks,
// each with the event of its last DMA). Device to host: two chunks, ping-pong (the host needs the
// values anyway, so it waits for the compute stream there by definition).
struct Chunk {
  void* buffer = nullptr;
  cudaEvent_t done = nullptr;
};

struct Staging {
  std::mutex mutex;         // one transfer at a time per GPU
  std::vector<Chunk> ring;  // host to device, in ring order from `next`
  std::size_t next = 0;
  Chunk readback[2];                    // device to host
  cudaEvent_t compute_ready = nullptr;  // orders the copy stream after the compute stream
  cudaEvent_t copy_done = nullptr;      // orders the compute stream after the copy stream
};

Chunk make_chunk() {
  Chunk c;
  check(cudaHostAlloc(&c.buffer, kStagingChunkBytes, cudaHostAllocPortable),
        "cudaHostAlloc (pinned staging buffer)");
  check(cudaEventCreateWithFlags(&c.done, cudaEventDisableTiming), "cudaEventCreate");
  return c;
}

Staging& staging(int index) {
  static std::mutex mutex;
  static auto* all = new std::vector<std::unique_ptr<Staging>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  if (all->size() <= static_cast<std::size_t>(index))
    all->resize(static_cast<std::size_t>(index) + 1);
  auto& slot = (*all)[static_cast<std::size_t>(index)];
  if (!slot) {
    DeviceGuard guard(index);
    auto s = std::make_unique<Staging>();
    for (Chunk& c : s->readback) c = make_chunk();
    check(cudaEventCreateWithFlags(&s->compute_ready, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&s->copy_done, cudaEventDisableTiming), "cudaEventCreate");
    slot = std::move(s);
  }
  return *slot;
}

// The copy stream waits for everything queued on the compute stream so far.
void copy_after_compute(const DeviceContext& ctx, Staging& st) {
  check(cudaEventRecord(st.compute_ready, ctx.compute), "cudaEventRecord");
  check(cudaStreamWaitEvent(ctx.copy, st.compute_ready, 0), "cudaStreamWaitEvent");
}

// The compute stream waits for everything queued on the copy stream so far.
void compute_after_copy(const DeviceContext& ctx, Staging& st) {
  check(cudaEventRecord(st.copy_done, ctx.copy), "cudaEventRecord");
  check(cudaStreamWaitEvent(ctx.compute, st.copy_done, 0), "cudaStreamWaitEvent");
}

// Whether a chunk's last DMA has finished, without waiting (an event never recorded is done).
bool chunk_done(const Chunk& c) {
  const cudaError_t e = cudaEventQuery(c.done);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  check(e, "cudaEventQuery (staging buffer)");
  return false;
}

// The ring chunk to fill next: a finished one, a new one, or (ring full) the oldest once done.
Chunk& take_chunk(Staging& st) {
  const bool oldest_done = !st.ring.empty() && chunk_done(st.ring[st.next]);
  const detail::StagingStep step =
      detail::next_staging_chunk(st.ring.size(), st.next, oldest_done, detail::kMaxStagingChunks);
  if (step.action == detail::StagingAction::grow) {
    st.ring.insert(st.ring.begin() + static_cast<std::ptrdiff_t>(step.slot), make_chunk());
  } else if (step.action == detail::StagingAction::wait) {
    count_host_wait();
    check(cudaEventSynchronize(st.ring[step.slot].done), "waiting for a staging buffer");
  }
  st.next = step.next;
  return st.ring[step.slot];
}

}  // namespace

void copy_host_to_device(Device device, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  const int index = require_device(device);
  DeviceContext& ctx = context(index);
  Staging& st = staging(index);
  std::lock_guard<std::mutex> lock(st.mutex);
  DeviceGuard guard(index);
  copy_after_compute(ctx, st);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  for (std::size_t offset = 0; offset < bytes; offset += kStagingChunkBytes) {
    const std::size_t n = std::min(kStagingChunkBytes, bytes - offset);
    Chunk& c = take_chunk(st);  // never waits for the compute stream unless the ring is full
    std::memcpy(c.buffer, from + offset, n);
    check(cudaMemcpyAsync(to + offset, c.buffer, n, cudaMemcpyHostToDevice, ctx.copy),
          "cudaMemcpyAsync (host to device)");
    check(cudaEventRecord(c.done, ctx.copy), "cudaEventRecord");
  }
  compute_after_copy(ctx, st);
}

void copy_device_to_host(Device device, void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  const int index = require_device(device);
  DeviceContext& ctx = context(index);
  Staging& st = staging(index);
  std::lock_guard<std::mutex> lock(st.mutex);
  DeviceGuard guard(index);
  copy_after_compute(ctx, st);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  const std::size_t chunks = (bytes + kStagingChunkBytes - 1) / kStagingChunkBytes;
  // Chunk c is copied into buffer c % 2; while it is in flight the host drains chunk c - 1.
  const auto drain = [&](std::size_t c) {
    const int b = static_cast<int>(c % 2);
    const std::size_t offset = c * kStagingChunkBytes;
    count_host_wait();
    check(cudaEventSynchronize(st.readback[b].done), "waiting for a device to host copy");
    std::memcpy(to + offset, st.readback[b].buffer, std::min(kStagingChunkBytes, bytes - offset));
  };
  for (std::size_t c = 0; c < chunks; ++c) {
    const int b = static_cast<int>(c % 2);
    const std::size_t offset = c * kStagingChunkBytes;
    // Buffer b last held chunk c - 2, drained in the previous iteration.
    check(cudaMemcpyAsync(st.readback[b].buffer, from + offset,
                          std::min(kStagingChunkBytes, bytes - offset), cudaMemcpyDeviceToHost,
                          ctx.copy),
          "cudaMemcpyAsync (device to host)");
    check(cudaEventRecord(st.readback[b].done, ctx.copy), "cudaEventRecord");
    if (c > 0) drain(c - 1);
  }
  drain(chunks - 1);
  compute_after_copy(ctx, st);
}

Tensor to_device(const Tensor& src, Device target) {
  const Device from = src.device();
  if (from == target) return src;
  if (target.is_cuda()) require_device(target);
  if (from.is_cuda()) require_device(from);
  Tensor out = core::make_tensor(src.shape(), src.dtype(), target);
  if (src.numel() == 0) return out;
  if (from.is_cpu()) {
    const Tensor host = src.detach().contiguous();
    copy_host_to_device(target, out.data_ptr(), host.data_ptr(), out.nbytes());
  } else if (target.is_cpu()) {
    const Tensor dev = contiguous(src.detach());
    copy_device_to_host(from, out.data_ptr(), dev.data_ptr(), out.nbytes());
  } else {
    // GPU to GPU: rare (mixprec uses one GPU per process); a synchronous peer copy after both
    // devices' queued work. Not cudaMemcpyPeer: it runs on the legacy default stream, which does
    // not order against the non-blocking compute and copy streams, and returns before the copy
    // is done; work queued next on the target could read `out` too early, and `dev`'s block could
    // be reused on the source while the copy still reads it. The copy runs on the target's compute
    // stream and is waited for.
    const Tensor dev = contiguous(src.detach());
    synchronize(from);
    synchronize(target);
    const DeviceContext& ctx = context(target.index);
    DeviceGuard guard(target.index);
    check(cudaMemcpyPeerAsync(out.data_ptr(), target.index, dev.data_ptr(), from.index,
                              out.nbytes(), ctx.compute),
          "cudaMemcpyPeerAsync");
    count_host_wait();
    check(cudaStreamSynchronize(ctx.compute), "waiting for a GPU to GPU copy");
  }
  return out;
}

}  // namespace mixprec::cuda
