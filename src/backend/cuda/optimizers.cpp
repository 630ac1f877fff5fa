// The multi-tensor launch planner (see optimizers.h); the TrainingKernels entries that build the
// launch tables from tensors are in training_kernels.cpp.
#include "backend/cuda/optimizers.h"

#include <array>
#include <string>

#include "mixprec/error.h"

namespace mixprec::cuda {

std::vector<MultiTensorLaunch> plan_multi_tensor(const std::vector<std::int64_t>& numels,
                                                 int max_tensors, int max_blocks,
                                                 std::int64_t chunk) {
  if (max_tensors < 1 || max_tensors > kMultiTensorMaxTensors || max_blocks < 1 ||
      max_blocks > kMultiTensorMaxBlocks || chunk < 1) {
    throw ValueError("plan_multi_tensor: limits must be in [1, " +
                     std::to_string(kMultiTensorMaxTensors) + "] tensors and [1, " +
                     std::to_string(kMultiTensorMaxBlocks) +
                     "] blocks with a positive chunk, got " + std::to_string(max_tensors) + ", " +
                     std::to_string(max_blocks) + ", " + std::to_string(chunk));
  }
  std::vector<MultiTensorLaunch> launches;
  MultiTensorLaunch current;
  auto flush = [&] {
    if (!current.blocks.empty()) launches.push_back(std::move(current));
    current = MultiTensorLaunch{};
  };
  for (std::size_t i = 0; i < numels.size(); ++i) {
    const std::int64_t n = numels[i];
    if (n < 0) throw ValueError("plan_multi_tensor: negative element count " + std::to_string(n));
    const std::int64_t chunks = (n + chunk - 1) / chunk;
    if (chunks > std::int64_t{1} << 31) {
      throw ValueError("plan_multi_tensor: tensor " + std::to_string(i) + " has " +
                       std::to_string(n) + " elements, more than the 2^31 chunks a table indexes");
    }
    for (std::int64_t c = 0; c < chunks; ++c) {
      if (static_cast<int>(current.blocks.size()) == max_blocks) flush();
      if (current.tensors.empty() || current.tensors.back() != static_cast<int>(i)) {
        if (static_cast<int>(current.tensors.size()) == max_tensors) flush();
        current.tensors.push_back(static_cast<int>(i));
      }
      current.blocks.push_back({static_cast<int>(current.tensors.size()) - 1, c});
    }
  }
  flush();
  return launches;
}

}  // namespace mixprec::cuda
