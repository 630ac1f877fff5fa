// The public mixprec/cuda.h functions, answered through the backend interface: a build without the
// CUDA backend reports no GPU (and synchronize() its one DeviceError), with no stub file.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/backend.h"
#include "backend/device_runtime.h"
#include "mixprec/cuda.h"

namespace mixprec::cuda {

namespace {

// TF32 for float32 matmuls and convolutions on Ampere and newer: off unless enabled here or with
// MIXPREC_ALLOW_TF32=1 (read once).
std::atomic<bool>& tf32_flag() {
  static std::atomic<bool> flag = [] {
    const char* env = std::getenv("MIXPREC_ALLOW_TF32");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return flag;
}

}  // namespace

int device_count() {
  const Backend* backend = find_backend(DeviceType::cuda);
  return backend == nullptr ? 0 : backend->runtime->device_count();
}

bool is_available() { return device_count() > 0; }

void synchronize(Device device) { backend_for(device).runtime->synchronize(device); }

std::int64_t host_synchronizations() {
  const Backend* backend = find_backend(DeviceType::cuda);
  return backend == nullptr ? 0 : backend->runtime->host_synchronizations();
}

void enable_tensor_float_32_execution(bool enabled) { tf32_flag().store(enabled); }
bool tensor_float_32_execution_enabled() { return tf32_flag().load(); }

}  // namespace mixprec::cuda
