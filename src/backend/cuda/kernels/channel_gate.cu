// Launchers of the squeeze-and-excitation gate's gradient (see channel_gate.h; the kernels are in
// channel_gate_kernels.cuh): partial sums of g * x by (group, part, channel) threads, then the
// parts of each output added in double in a fixed order (warp_ordered_sum's from 32 parts on):
// no atomics, the same bits on every run.
#include "backend/cuda/channel_gate.h"
#include "backend/cuda/kernels/common.cuh"
// After common.cuh, whose names the kernels use.
#include "backend/cuda/kernels/channel_gate_kernels.cuh"

namespace mixprec::cuda::kernels {

namespace {

using namespace channel_gate_kernels;

// About this many pass-1 threads: a few waves on current GPUs (H100: 132 SMs x 2048 threads).
constexpr std::int64_t kPartialThreads = std::int64_t{1} << 17;
// At least this many pixels per part (while there are that many): enough loads per thread to
// amortise its index arithmetic and its partial sum's round trip through memory.
constexpr std::int64_t kMinPixelsPerPart = 8;
// From this many parts on, pass 2 runs a warp per output (a thread would add them serially).
constexpr std::int64_t kWarpFinishParts = 32;

unsigned blocks_exact(std::int64_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

}  // namespace

GatePlan channel_gate_plan(DType dtype, const ChannelGeometry& geometry, bool aligned4) {
  GatePlan plan;
  const bool bits16 = dtype == DType::float16 || dtype == DType::bfloat16;
  plan.vector = bits16 && geometry.channels % 2 == 0 && aligned4 ? 2 : 1;
  const std::int64_t lanes = geometry.groups * (geometry.channels / plan.vector);
  std::int64_t parts = lanes > 0 ? (kPartialThreads + lanes - 1) / lanes : 1;
  const std::int64_t most = geometry.rows / kMinPixelsPerPart;
  if (parts > most) parts = most;
  plan.parts = parts < 1 ? 1 : parts;
  plan.warp_finish = plan.parts >= kWarpFinishParts;
  plan.partials = plan.parts > 1 ? geometry.groups * plan.parts * geometry.channels : 0;
  return plan;
}

void channel_gate_backward(DType dtype, const GatePlan& plan, const ChannelGeometry& geometry,
                           const void* g, const void* x, void* partials, void* out,
                           cudaStream_t s) {
  const std::int64_t outputs = geometry.groups * geometry.channels;
  dispatch_floating(dtype, "channel_gate_backward", [&]<typename T>() {
    using P = compute_t<T>;
    const bool direct = plan.parts == 1;
    P* part = static_cast<P*>(partials);
    T* o = static_cast<T*>(out);
    const auto pass1 = [&]<int V>() {
      const std::int64_t threads = geometry.groups * plan.parts * (geometry.channels / V);
      gate_partials_kernel<T, V><<<blocks_exact(threads), kThreads, 0, s>>>(
          geometry, plan.parts, static_cast<const T*>(g), static_cast<const T*>(x),
          direct ? nullptr : part, direct ? o : nullptr);
    };
    if constexpr (sizeof(T) == 2) {
      plan.vector == 2 ? pass1.template operator()<2>() : pass1.template operator()<1>();
    } else {
      pass1.template operator()<1>();
    }
    check_launch("channel_gate_backward partial sums");
    if (direct) return;
    if (plan.warp_finish) {
      gate_finish_warp_kernel<T><<<blocks_exact(outputs * kWarp), kThreads, 0, s>>>(
          part, plan.parts, geometry.groups, geometry.channels, o);
    } else {
      gate_finish_kernel<T><<<blocks_for(outputs), kThreads, 0, s>>>(
          part, plan.parts, geometry.groups, geometry.channels, o);
    }
  });
  check_launch("channel_gate_backward");
}

}  // namespace mixprec::cuda::kernels
