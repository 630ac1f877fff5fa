// The CUDA multi-tensor launches of loss scaling and the optimizer updates (DESIGN §3: the
// loss-scale decision stays on the GPU, one fused multi-tensor pass unscales and checks every
// gradient, one updates every variable; no host synchronisation per step). The per-element bodies
// the kernels run are in backend/kernel_math/training.h, shared with the CPU loops and tested on
// the host; the TrainingKernels entries that launch them are in training_kernels.cpp.
//
// This header has two parts:
//  1. the multi-tensor launch tables and their planner (plain host code, tested on the host);
//  2. the kernel launchers of kernels/optimizers.cu (CUDA builds only).
//
// Multi-tensor launches: every tensor is cut into chunks of kMultiTensorChunk elements and each
// thread block processes one chunk. A launch carries its table (pointers per tensor, element
// counts, and the (tensor, chunk) of each block) by value in the kernel's parameter space, so a
// launch needs no host-to-device copy and no device-side table to keep in sync with the variable
// list; a list too long for one table is split over several launches (a tensor may continue in
// the next launch). The table stays under the classic 4 KiB kernel-parameter limit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/kernel_math/training.h"

namespace mixprec::cuda {

// ---- 1. multi-tensor launch tables ----

inline constexpr int kMultiTensorMaxTensors = 32;
inline constexpr int kMultiTensorMaxBlocks = 384;
// 16384 float32 = 64 KiB per block: 32 elements per thread of a 512-thread block, and a full table
// (384 blocks, 6.3 M elements) keeps about three blocks on each of an H100's 132 SMs.
inline constexpr std::int64_t kMultiTensorChunk = 1 << 14;
inline constexpr int kMultiTensorThreads = 512;

// What a launch receives by value. ptr[k][t]: the k-th operand of the t-th tensor of this launch
// (unscale: 0 = gradient in, 1 = float32 out (null: check only); update: 0 = gradient, 1 =
// variable, 2.. = slots; sum of squares: 0 = input). Block b processes elements
// [block_chunk[b] * kMultiTensorChunk, min(numel, (block_chunk[b] + 1) * kMultiTensorChunk)) of
// tensor block_tensor[b].
template <int L>
struct MultiTensorTable {
  void* ptr[L][kMultiTensorMaxTensors];
  std::int64_t numel[kMultiTensorMaxTensors];
  float clip_scale[kMultiTensorMaxTensors];  // update only: the gradient's clipping factor
  std::int32_t block_chunk[kMultiTensorMaxBlocks];
  std::uint8_t block_tensor[kMultiTensorMaxBlocks];
  std::int32_t tensors;
  std::int32_t blocks;
};
static_assert(sizeof(MultiTensorTable<5>) + 96 <= 4096, "a launch's parameters must fit in 4 KiB");

// One launch of a multi-tensor pass: the caller's tensor indices it covers (in table order) and,
// for each block, the position in `tensors` and the chunk index.
struct MultiTensorLaunch {
  struct Block {
    int slot = 0;            // index into `tensors`
    std::int64_t chunk = 0;  // chunk of that tensor
  };
  std::vector<int> tensors;
  std::vector<Block> blocks;
};

// Cuts tensors of numels[i] elements into chunks of `chunk` elements and packs them, in order, into
// launches of at most max_tensors tensors and max_blocks blocks. Empty tensors get no block. Every
// (tensor, chunk) appears exactly once; a tensor whose chunks do not fit in the current launch
// continues at the start of the next. Throws ValueError on a limit < 1 or a chunk index past 2^31.
std::vector<MultiTensorLaunch> plan_multi_tensor(const std::vector<std::int64_t>& numels,
                                                 int max_tensors = kMultiTensorMaxTensors,
                                                 int max_blocks = kMultiTensorMaxBlocks,
                                                 std::int64_t chunk = kMultiTensorChunk);

// The kernel table of `launch`: operands[k][i] is the k-th pointer of the caller's tensor i,
// numels[i] its element count, clip_scales[i] its clipping factor (empty: 1). `launch` must come
// from plan_multi_tensor with the default limits.
template <int L>
MultiTensorTable<L> make_multi_tensor_table(const MultiTensorLaunch& launch,
                                            const std::vector<void*> (&operands)[L],
                                            const std::vector<std::int64_t>& numels,
                                            const std::vector<float>& clip_scales = {}) {
  MultiTensorTable<L> table{};
  table.tensors = static_cast<std::int32_t>(launch.tensors.size());
  table.blocks = static_cast<std::int32_t>(launch.blocks.size());
  for (std::size_t t = 0; t < launch.tensors.size(); ++t) {
    const auto i = static_cast<std::size_t>(launch.tensors[t]);
    for (int k = 0; k < L; ++k) table.ptr[k][t] = operands[k][i];
    table.numel[t] = numels[i];
    table.clip_scale[t] = clip_scales.empty() ? 1.0f : clip_scales[i];
  }
  for (std::size_t b = 0; b < launch.blocks.size(); ++b) {
    table.block_tensor[b] = static_cast<std::uint8_t>(launch.blocks[b].slot);
    table.block_chunk[b] = static_cast<std::int32_t>(launch.blocks[b].chunk);
  }
  return table;
}

}  // namespace mixprec::cuda

// ---- 2. the kernel launchers (kernels/optimizers.cu) ----
#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "mixprec/dtype.h"

namespace mixprec::cuda::kernels {

// Every launcher enqueues on `s`, checks the launch and returns without waiting; tables come from
// make_multi_tensor_table and have at least one block.

// out = float32(double(g) * (1 / double(*scale))) for gradients of `dtype` (float32, float16,
// bfloat16, float64); sets *found_inf = 1 when some out is Inf or NaN (each block ORs its threads'
// verdicts and at most one thread per block stores; never clears). With ptr[1][t] null the tensor
// is only checked; with scale null the factor is 1.
void multi_tensor_unscale(DType dtype, const MultiTensorTable<2>& table, const float* scale,
                          int* found_inf, cudaStream_t s);
// partials[b] = sum over block b's chunk of double(x)^2 (float32 inputs), b < table.blocks.
void multi_tensor_sum_of_squares(const MultiTensorTable<1>& table, double* partials,
                                 cudaStream_t s);
// The update of `update.kind` (kernel_math::update_element) over every tensor of the table (float32
// gradients, variables and slots); when found_inf is not null and *found_inf != 0 every block
// returns before touching memory (variables and slots stay bit-identical). The constants are
// update.constants_in_memory's when it is set (read by the kernel when it runs: a replayed step's).
void multi_tensor_update(const kernel_math::UpdateRule& update, const MultiTensorTable<5>& table,
                         const int* found_inf, cudaStream_t s);
// One thread: kernel_math::loss_scale_step on *state.
void loss_scale_update(kernel_math::LossScaleState* state, kernel_math::LossScaleMode mode,
                       std::int64_t growth_steps, cudaStream_t s);
// *state = value (by kernel parameter: no host memory is read, so it may be captured in a graph).
void loss_scale_set(kernel_math::LossScaleState* state, const kernel_math::LossScaleState& value,
                    cudaStream_t s);

// A few moving averages in one launch, by kernel parameter: moving[k][i] =
// kernel_math::moving_average_element(moving[k][i], value[k][i], momentum, weight[k]) for
// k < count, in the dtype of the launch (float32 or float64).
inline constexpr int kMaxMovingAverages = 4;
struct MovingAverageTable {
  void* moving[kMaxMovingAverages] = {};
  const void* value[kMaxMovingAverages] = {};
  std::int64_t numel[kMaxMovingAverages] = {};
  double weight[kMaxMovingAverages] = {};
  int count = 0;
};
void moving_average(DType dtype, const MovingAverageTable& table, double momentum, cudaStream_t s);

}  // namespace mixprec::cuda::kernels
#endif  // MIXPREC_HAVE_CUDA
