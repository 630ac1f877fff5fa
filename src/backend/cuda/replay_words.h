// Writing the per-step values of a captured training step (core::ReplayParameters) into their
// device buffer before a replay: one kernel that takes the words by parameter, on the compute
// stream. No host memory is read after the launch returns (nothing to pin or keep alive) and the
// host never waits; stream order puts the write after the previous replay (which read the old
// values) and before the next. CUDA builds only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixprec/device.h"

#if MIXPREC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mixprec::cuda {

inline constexpr std::size_t kReplayWords = 256;  // core::ReplayParameters::kWords

// dst[i] = words[i] for i < count (count <= kReplayWords), enqueued on `device`'s compute stream.
void write_replay_words(Device device, std::uint64_t* dst, const std::uint64_t* words,
                        std::size_t count);

#if MIXPREC_HAVE_CUDA
namespace kernels {

struct ReplayWords {
  std::uint64_t words[kReplayWords];
};
// The launcher (kernels/replay_words.cu): dst[i] = words.words[i] for i < count.
void write_replay_words(std::uint64_t* dst, const ReplayWords& words, int count, cudaStream_t s);

}  // namespace kernels
#endif

}  // namespace mixprec::cuda
