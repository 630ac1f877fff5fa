// One cudnnHandle_t per GPU, created on first use (see cudnn_handle.h).
// Compiled only with cuDNN (MIXPREC_HAVE_CUDNN, set by the root CMakeLists.txt when it finds it).
#if defined(MIXPREC_HAVE_CUDNN)
#include "backend/cuda/cudnn_handle.h"

#include <mutex>
#include <vector>

#include "backend/cuda/context.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

struct Handles {
  std::mutex mutex;
  std::vector<cudnnHandle_t> per_device;
};

Handles& handles() {
  static Handles* h = new Handles();  // never destroyed: handles live as long as the process
  return *h;
}

}  // namespace

void check_cudnn(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw DeviceError(what + " failed: " + cudnnGetErrorString(status) + " (cuDNN status " +
                    std::to_string(static_cast<int>(status)) +
                    "); check that the cuDNN library matches the CUDA driver and the GPU");
}

cudnnHandle_t cudnn_handle(int index) {
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  if (h.per_device.size() <= static_cast<std::size_t>(index)) {
    h.per_device.resize(static_cast<std::size_t>(index) + 1, nullptr);
  }
  cudnnHandle_t& handle = h.per_device[static_cast<std::size_t>(index)];
  if (handle == nullptr) {
    DeviceGuard guard(index);
    cudnnHandle_t created = nullptr;
    check_cudnn(cudnnCreate(&created), "cudnnCreate on cuda:" + std::to_string(index));
    const cudnnStatus_t bound = cudnnSetStream(created, context(index).compute);
    if (bound != CUDNN_STATUS_SUCCESS) {
      cudnnDestroy(created);
      check_cudnn(bound, "cudnnSetStream");
    }
    handle = created;
  }
  return handle;
}

}  // namespace mixprec::cuda

#endif  // MIXPREC_HAVE_CUDNN
