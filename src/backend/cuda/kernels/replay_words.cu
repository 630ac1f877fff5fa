// The write of core::ReplayParameters' buffer before a replay (see replay_words.h): the words come
// by kernel parameter (2 KiB, under the 4 KiB limit), one thread per word.
#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/replay_words.h"

namespace mixprec::cuda::kernels {

namespace {

__global__ void write_replay_words_kernel(std::uint64_t* dst, const ReplayWords words, int count) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < count) dst[i] = words.words[i];
}

}  // namespace

void write_replay_words(std::uint64_t* dst, const ReplayWords& words, int count, cudaStream_t s) {
  static_assert(sizeof(ReplayWords) + 16 <= 4096, "a launch's parameters must fit in 4 KiB");
  if (count <= 0) return;
  write_replay_words_kernel<<<1, static_cast<unsigned>(kReplayWords), 0, s>>>(dst, words, count);
  check_launch("write_replay_words");
}

}  // namespace mixprec::cuda::kernels
