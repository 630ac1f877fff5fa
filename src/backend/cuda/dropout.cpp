#include "backend/cuda/dropout.h"

#include "backend/cuda/context.h"
#include "backend/cuda/copy.h"
#include "core/replay_parameters.h"
#include "core/tensor_impl.h"

namespace mixprec::cuda {

Tensor dropout_apply(const Tensor& x, std::uint64_t base, std::uint64_t threshold, double keep) {
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const Tensor src = contiguous(x.detach());
  // Captured for replays (core::ReplayParameters): the key of a draw the step recorded is read
  // from the replay buffer, where each replay writes its own step's draw.
  const std::uint64_t* base_in_memory = nullptr;
  if (const core::ReplayParameters* replay = core::ReplayParameters::active();
      replay != nullptr && replay->device() == x.device()) {
    base_in_memory = replay->draw_address(base);
  }
  StreamScope scope(x.device());
  kernels::dropout_apply(x.dtype(), src.data_ptr(), out.data_ptr(), out.numel(), base,
                         base_in_memory, threshold, keep, scope.stream());
  return out;
}

}  // namespace mixprec::cuda
