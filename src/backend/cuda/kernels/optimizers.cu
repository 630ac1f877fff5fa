// Multi-tensor kernels of loss scaling and the optimizers (see backend/cuda/optimizers.h): one
// thread block per chunk of one tensor, described by a table passed by value; the loss-scale state
// update is one thread.
//
// Every per-element body (the update formulas, the unscaled value and its non-finite test, the
// loss-scale rule) is the one of backend/kernel_math/training.h, which the CPU loops call too; it
// is written with the _rn intrinsics on the device (nvcc would otherwise contract a * b + c into
// one fused multiply-add), so with the same per-step constants the device results equal the CPU's
// bit for bit. tests/unit/training_math_test.cpp checks the bodies on the host.
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/optimizers.h"

namespace mixprec::cuda::kernels {

namespace {

// The elements [start, stop) of the block's chunk, and its tensor's slot in the table.
struct ChunkRange {
  int tensor;
  std::int64_t start, stop;
};

template <int L>
__device__ __forceinline__ ChunkRange chunk_of(const MultiTensorTable<L>& table) {
  const int t = table.block_tensor[blockIdx.x];
  const std::int64_t start =
      static_cast<std::int64_t>(table.block_chunk[blockIdx.x]) * kMultiTensorChunk;
  const std::int64_t end = start + kMultiTensorChunk;
  return {t, start, end < table.numel[t] ? end : table.numel[t]};
}

// ---- unscale + check ----

template <typename T>
__global__ void __launch_bounds__(kMultiTensorThreads)
    unscale_kernel(const MultiTensorTable<2> table, const float* __restrict__ scale,
                   int* __restrict__ found_inf) {
  const ChunkRange r = chunk_of(table);
  const T* __restrict__ in = static_cast<const T*>(table.ptr[0][r.tensor]);
  float* __restrict__ out = static_cast<float*>(table.ptr[1][r.tensor]);
  // In double, as the CPU does: 1 / scale and the product are exact for power-of-two scales, and
  // a non-power-of-two fixed scale still rounds once, as on the CPU.
  const double inverse = scale != nullptr ? 1.0 / static_cast<double>(*scale) : 1.0;
  // Each thread loads kUnroll elements (blockDim.x apart, so every load stays coalesced) before
  // using any: a read-once pass needs several loads in flight per thread to approach the memory
  // bandwidth.
  constexpr int kUnroll = 4;
  const std::int64_t stride = blockDim.x;
  int bad = 0;
  for (std::int64_t base = r.start + threadIdx.x; base < r.stop; base += stride * kUnroll) {
    compute_t<T> g[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = base + u * stride;
      g[u] = i < r.stop ? to_compute(in[i]) : compute_t<T>(0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = base + u * stride;
      if (i >= r.stop) break;
      const float v = kernel_math::unscale_element(static_cast<double>(g[u]), inverse);
      if (out != nullptr) out[i] = v;
      bad |= static_cast<int>(kernel_math::non_finite(v));
    }
  }
  // One verdict per block; blocks that saw a bad value all store the same 1 (no atomics needed).
  if (__syncthreads_or(bad) != 0 && threadIdx.x == 0) *found_inf = 1;
}

// ---- sum of squares (clipping by norm) ----

__global__ void __launch_bounds__(kMultiTensorThreads)
    sum_of_squares_kernel(const MultiTensorTable<1> table, double* __restrict__ partials) {
  const ChunkRange r = chunk_of(table);
  const float* __restrict__ x = static_cast<const float*>(table.ptr[0][r.tensor]);
  double s = 0.0;
  for (std::int64_t i = r.start + threadIdx.x; i < r.stop; i += blockDim.x) {
    const double v = x[i];
    s += v * v;
  }
  // Warp shuffles, then one partial per warp in shared memory, summed by warp 0: a fixed order for
  // a fixed launch, so the norm (and the clipping) is reproducible run to run.
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
  __shared__ double warp_sums[kMultiTensorThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < static_cast<int>(blockDim.x / 32) ? warp_sums[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(0xffffffffu, s, offset);
    if (lane == 0) partials[blockIdx.x] = s;
  }
}

// ---- the optimizer updates (the formulas: kernel_math::update_element) ----

// The block's chunk of the update with the constants `c`.
template <kernel_math::UpdateKind K>
__device__ __forceinline__ void update_chunk(const MultiTensorTable<5>& table,
                                             const kernel_math::UpdateConstants& c) {
  const ChunkRange r = chunk_of(table);
  const float* __restrict__ grad = static_cast<const float*>(table.ptr[0][r.tensor]);
  float* __restrict__ var = static_cast<float*>(table.ptr[1][r.tensor]);
  float* s0 = static_cast<float*>(table.ptr[2][r.tensor]);
  float* s1 = static_cast<float*>(table.ptr[3][r.tensor]);
  float* s2 = static_cast<float*>(table.ptr[4][r.tensor]);
  const float clip_scale = table.clip_scale[r.tensor];
  constexpr int kSlots = kernel_math::update_slot_count(K);
  for (std::int64_t i = r.start + threadIdx.x; i < r.stop; i += blockDim.x) {
    kernel_math::update_element<K>(c, grad[i], var + i, kSlots > 0 ? s0 + i : nullptr,
                                   kSlots > 1 ? s1 + i : nullptr, kSlots > 2 ? s2 + i : nullptr,
                                   clip_scale);
  }
}

// kInMemory: a step captured for CUDA graph replays reads its constants from device memory
// (core::ReplayParameters writes each replay's there before the launch); otherwise they are the
// launch's parameter (the eager step, code unchanged).
template <kernel_math::UpdateKind K, bool kInMemory>
__global__ void __launch_bounds__(kMultiTensorThreads)
    update_kernel(const MultiTensorTable<5> table, const kernel_math::UpdateConstants launched,
                  const kernel_math::UpdateConstants* __restrict__ in_memory,
                  const int* __restrict__ found_inf) {
  // The skip decision of loss scaling, read on the device: no host round trip.
  if (found_inf != nullptr && *found_inf != 0) return;
  if constexpr (kInMemory) {
    const kernel_math::UpdateConstants c = kernel_math::constants_to_use(launched, in_memory);
    update_chunk<K>(table, c);
  } else {
    update_chunk<K>(table, launched);
  }
}

// ---- the loss-scale state ----

__global__ void loss_scale_update_kernel(kernel_math::LossScaleState* state,
                                         kernel_math::LossScaleMode mode,
                                         std::int64_t growth_steps) {
  kernel_math::LossScaleState s = *state;
  kernel_math::loss_scale_step(mode, growth_steps, s);  // found_inf cleared for the next step
  *state = s;
}

__global__ void loss_scale_set_kernel(kernel_math::LossScaleState* state,
                                      kernel_math::LossScaleState value) {
  *state = value;
}

template <int L>
dim3 grid_of(const MultiTensorTable<L>& table) {
  return dim3(static_cast<unsigned>(table.blocks));
}

// Block k of gridDim.y's handles operand k; its threads stride over the elements.
template <typename T>
__global__ void moving_average_kernel(MovingAverageTable table, T momentum) {
  const int k = static_cast<int>(blockIdx.y);
  if (k >= table.count) return;
  T* moving = static_cast<T*>(table.moving[k]);
  const T* value = static_cast<const T*>(table.value[k]);
  const T weight = static_cast<T>(table.weight[k]);
  for (std::int64_t i = global_thread(); i < table.numel[k]; i += grid_threads()) {
    moving[i] = kernel_math::moving_average_element(moving[i], value[i], momentum, weight);
  }
}

}  // namespace

void multi_tensor_unscale(DType dtype, const MultiTensorTable<2>& table, const float* scale,
                          int* found_inf, cudaStream_t s) {
  dispatch_floating(dtype, "unscale_and_check", [&]<typename T>() {
    unscale_kernel<T><<<grid_of(table), kMultiTensorThreads, 0, s>>>(table, scale, found_inf);
  });
  check_launch("unscale_and_check");
}

void multi_tensor_sum_of_squares(const MultiTensorTable<1>& table, double* partials,
                                 cudaStream_t s) {
  sum_of_squares_kernel<<<grid_of(table), kMultiTensorThreads, 0, s>>>(table, partials);
  check_launch("sum_of_squares");
}

void multi_tensor_update(const kernel_math::UpdateRule& update, const MultiTensorTable<5>& table,
                         const int* found_inf, cudaStream_t s) {
  const dim3 grid = grid_of(table);
  const kernel_math::UpdateConstants& c = update.constants;
  kernel_math::dispatch_update_kind(update.kind, [&]<kernel_math::UpdateKind K>() {
    if (update.constants_in_memory != nullptr) {
      update_kernel<K, true>
          <<<grid, kMultiTensorThreads, 0, s>>>(table, c, update.constants_in_memory, found_inf);
    } else {
      update_kernel<K, false><<<grid, kMultiTensorThreads, 0, s>>>(table, c, nullptr, found_inf);
    }
  });
  check_launch("optimizer update");
}

void loss_scale_update(kernel_math::LossScaleState* state, kernel_math::LossScaleMode mode,
                       std::int64_t growth_steps, cudaStream_t s) {
  loss_scale_update_kernel<<<1, 1, 0, s>>>(state, mode, growth_steps);
  check_launch("loss_scale_update");
}

void loss_scale_set(kernel_math::LossScaleState* state, const kernel_math::LossScaleState& value,
                    cudaStream_t s) {
  loss_scale_set_kernel<<<1, 1, 0, s>>>(state, value);
  check_launch("loss_scale_set");
}

void moving_average(DType dtype, const MovingAverageTable& table, double momentum, cudaStream_t s) {
  if (table.count <= 0) return;
  std::int64_t most = 1;
  for (int k = 0; k < table.count; ++k) most = table.numel[k] > most ? table.numel[k] : most;
  const dim3 grid(blocks_for(most), static_cast<unsigned>(table.count));
  switch (dtype) {
    case DType::float32:
      moving_average_kernel<float><<<grid, kThreads, 0, s>>>(table, static_cast<float>(momentum));
      break;
    case DType::float64:
      moving_average_kernel<double><<<grid, kThreads, 0, s>>>(table, momentum);
      break;
    default: unsupported_dtype("moving_average", dtype, "float32, float64");
  }
  check_launch("moving_average");
}

}  // namespace mixprec::cuda::kernels
