#include "backend/cuda/transfer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/tensor_impl.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

// Two pinned buffers per GPU: while the DMA engine copies one chunk, the host fills (or drains)
// the other. 8 MiB chunks keep the per-chunk overhead (~10 us) small against the copy time
// (~0.3 ms at 25 GB/s).
constexpr std::size_t kStagingBytes = 8u << 20;

struct Staging {
  std::mutex mutex;  // one transfer at a time per GPU
  void* buffers[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};  // the last copy stream use of each buffer
  cudaEvent_t compute_ready = nullptr;       // orders the copy stream after the compute stream
  cudaEvent_t copy_done = nullptr;           // orders the compute stream after the copy stream
};

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
    for (int i = 0; i < 2; ++i) {
      check(cudaHostAlloc(&s->buffers[i], kStagingBytes, cudaHostAllocPortable),
            "cudaHostAlloc (pinned staging buffer)");
      check(cudaEventCreateWithFlags(&s->done[i], cudaEventDisableTiming), "cudaEventCreate");
    }
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
  for (std::size_t offset = 0, chunk = 0; offset < bytes; offset += kStagingBytes, ++chunk) {
    const int b = static_cast<int>(chunk % 2);
    const std::size_t n = std::min(kStagingBytes, bytes - offset);
    // The buffer's previous DMA must be finished before the host overwrites it.
    check(cudaEventSynchronize(st.done[b]), "waiting for a staging buffer");
    std::memcpy(st.buffers[b], from + offset, n);
    check(cudaMemcpyAsync(to + offset, st.buffers[b], n, cudaMemcpyHostToDevice, ctx.copy),
          "cudaMemcpyAsync (host to device)");
    check(cudaEventRecord(st.done[b], ctx.copy), "cudaEventRecord");
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
  const std::size_t chunks = (bytes + kStagingBytes - 1) / kStagingBytes;
  // Chunk c is copied into buffer c % 2; while it is in flight the host drains chunk c - 1.
  const auto drain = [&](std::size_t c) {
    const int b = static_cast<int>(c % 2);
    const std::size_t offset = c * kStagingBytes;
    check(cudaEventSynchronize(st.done[b]), "waiting for a device to host copy");
    std::memcpy(to + offset, st.buffers[b], std::min(kStagingBytes, bytes - offset));
  };
  for (std::size_t c = 0; c < chunks; ++c) {
    const int b = static_cast<int>(c % 2);
    const std::size_t offset = c * kStagingBytes;
    // Buffer b last held chunk c - 2, drained in the previous iteration.
    check(cudaMemcpyAsync(st.buffers[b], from + offset, std::min(kStagingBytes, bytes - offset),
                          cudaMemcpyDeviceToHost, ctx.copy),
          "cudaMemcpyAsync (device to host)");
    check(cudaEventRecord(st.done[b], ctx.copy), "cudaEventRecord");
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
    check(cudaStreamSynchronize(ctx.compute), "waiting for a GPU to GPU copy");
  }
  return out;
}

}  // namespace mixprec::cuda
