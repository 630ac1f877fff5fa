// The CUDA runtime state of the backend: device discovery, error translation, and per-GPU contexts
// (one compute stream and one copy stream each) created lazily, on the first use of that GPU. A
// CUDA build runs on machines without a GPU or driver: device_count() is then 0 and nothing here
// touches the driver beyond that one query (DESIGN §3).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "mixprec/cuda.h"
#include "mixprec/device.h"

namespace mixprec::cuda {

// Why device_count() is 0: the CUDA runtime's message ("CUDA driver version is insufficient for
// CUDA runtime version", "no CUDA-capable device is detected"); empty when GPUs exist.
std::string unavailable_reason();
// GPUs the driver shows (0 without a usable driver: no exception); DeviceRuntime::device_count.
int visible_device_count();
// Waits for the device's copy and compute streams; DeviceRuntime::synchronize.
void synchronize_device(Device device);

// Throws DeviceError unless `device` is a CUDA device that exists here ("cuda:1 does not exist;
// this machine has 1 CUDA GPU", or "no CUDA GPU is available (...)"); returns its index.
int require_device(Device device);

// Throws DeviceError "<what> failed on the GPU: <CUDA's error string> (<error name>)".
[[noreturn]] void throw_cuda_error(cudaError_t status, const std::string& what);
inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw_cuda_error(status, what);
}

struct DeviceInfo {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;
  std::int64_t total_memory = 0;  // bytes
  int multiprocessors = 0;
};
// Read once per device (cudaGetDeviceProperties creates no context).
const DeviceInfo& device_info(int index);

// One GPU's streams. Every kernel, cuBLASLt call and stream-ordered allocation of the backend runs
// on `compute`; host<->device transfers run on `copy` and are ordered against `compute` with
// events (see transfer.cpp). Both are non-blocking streams (no implicit sync with stream 0).
struct DeviceContext {
  int index = 0;
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
};
// Created on first use (thread-safe) and kept for the life of the process.
DeviceContext& context(int index);

// Makes `index` the current CUDA device for its lifetime (restores the previous one after).
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The compute stream of a CUDA device, with that device current: what every kernel launch needs.
class StreamScope {
 public:
  explicit StreamScope(Device device);
  cudaStream_t stream() const { return stream_; }
  int index() const { return index_; }

 private:
  int index_;
  DeviceGuard guard_;
  cudaStream_t stream_;
};

}  // namespace mixprec::cuda
