// Kernels of the squeeze-and-excitation gate's gradient (see channel_gate.h): partial sums of
// g * x by (group, part, channel) threads, then the parts of each output added in double in a fixed
// order. Pass 2's warp form is batch_norm.cu's: lane l adds parts l, l + 32, l + 64, ... in turn,
// then a butterfly of __shfl_xor_sync over lane distances 16, 8, 4, 2, 1 adds the 32 lane sums; at
// each step lanes l and l ^ d add the same two values (a + b and b + a: the same bits), so every
// lane ends with the same total, and the order depends only on the plan: no atomics, the same bits
// on every run.
#include "backend/cuda/channel_gate.h"
#include "backend/cuda/kernels/common.cuh"

namespace mixprec::cuda::kernels {

namespace {

// Two adjacent 16-bit values, loaded as one 4-byte access.
template <typename T>
struct alignas(2 * sizeof(T)) Two {
  T a, b;
};

// Pass 1. Thread t = (n * parts + p) * lanes + l sums g * x over the pixels p, p + parts, ... of
// group n, for the V channels l * V, ..., l * V + V - 1, in order of the pixels, in the compute
// type. With `out` (one part) it writes the rounded result; else partials[(n * parts + p) * C + c].
template <typename T, int V>
__global__ void gate_partials_kernel(ChannelGeometry geo, std::int64_t parts,
                                     const T* __restrict__ g, const T* __restrict__ x,
                                     compute_t<T>* __restrict__ partials, T* __restrict__ out) {
  using P = compute_t<T>;
  const std::int64_t lanes = geo.channels / V;
  const std::int64_t t = global_thread();
  if (t >= geo.groups * parts * lanes) return;
  const std::int64_t l = t % lanes, q = t / lanes;  // q = n * parts + p
  const std::int64_t p = q % parts, n = q / parts;
  const std::int64_t c = l * V;
  const std::int64_t step = parts * geo.channels;
  const std::int64_t start = (n * geo.rows + p) * geo.channels + c;
  const std::int64_t count = p < geo.rows ? (geo.rows - p + parts - 1) / parts : 0;
  P s0 = P(0), s1 = P(0);
  const T* gp = g + start;
  const T* xp = x + start;
  // Unrolled: several loads in flight; the additions stay in pixel order.
#pragma unroll 4
  for (std::int64_t k = 0; k < count; ++k) {
    if constexpr (V == 2) {
      const Two<T> gv = *reinterpret_cast<const Two<T>*>(gp);
      const Two<T> xv = *reinterpret_cast<const Two<T>*>(xp);
      s0 += to_compute(gv.a) * to_compute(xv.a);
      s1 += to_compute(gv.b) * to_compute(xv.b);
    } else {
      s0 += to_compute(*gp) * to_compute(*xp);
    }
    gp += step;
    xp += step;
  }
  if (out != nullptr) {  // one part: q == n
    out[q * geo.channels + c] = from_compute<T>(s0);
    if constexpr (V == 2) out[q * geo.channels + c + 1] = from_compute<T>(s1);
  } else {
    partials[q * geo.channels + c] = s0;
    if constexpr (V == 2) partials[q * geo.channels + c + 1] = s1;
  }
}

constexpr int kWarp = 32;
static_assert(kThreads % kWarp == 0, "whole warps per block: a warp never spans two outputs");

// Pass 2, one warp per output o = n * C + c (kThreads / 32 outputs per block): the parts' sum in
// the order of the file comment; lane 0 writes it rounded once (double -> compute type -> T, as the
// CPU's store_as).
template <typename T>
__global__ void gate_finish_warp_kernel(const compute_t<T>* __restrict__ partials,
                                        std::int64_t parts, std::int64_t groups,
                                        std::int64_t channels, T* __restrict__ out) {
  const std::int64_t o = global_thread() / kWarp;
  if (o >= groups * channels) return;  // the whole warp
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const std::int64_t n = o / channels, c = o % channels;
  const compute_t<T>* base = partials + n * parts * channels + c;
  double s = 0.0;
#pragma unroll 4
  for (std::int64_t p = lane; p < parts; p += kWarp) s += static_cast<double>(base[p * channels]);
#pragma unroll
  for (int d = kWarp / 2; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
  if (lane == 0) out[o] = from_compute<T>(static_cast<compute_t<T>>(s));
}

// Pass 2, one thread per output o = n * C + c (consecutive threads read consecutive channels):
// parts 0, 1, 2, ... added in turn in double, rounded once as above.
template <typename T>
__global__ void gate_finish_kernel(const compute_t<T>* __restrict__ partials, std::int64_t parts,
                                   std::int64_t groups, std::int64_t channels,
                                   T* __restrict__ out) {
  for (std::int64_t o = global_thread(); o < groups * channels; o += grid_threads()) {
    const std::int64_t n = o / channels, c = o % channels;
    const compute_t<T>* base = partials + n * parts * channels + c;
    double s = 0.0;
    for (std::int64_t p = 0; p < parts; ++p) s += static_cast<double>(base[p * channels]);
    out[o] = from_compute<T>(static_cast<compute_t<T>>(s));
  }
}

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
