#include "backend/cuda/context.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/cuda/host_waits.h"
#include "backend/cuda/kernels/launch.h"
#include "mixprec/error.h"

namespace mixprec::cuda {

namespace {

struct Discovery {
  int count = 0;
  std::string reason;
};

// cudaGetDeviceCount is the one call made on a machine without a GPU; any failure (no driver,
// driver too old, no device, a broken installation) means zero GPUs, never an exception.
const Discovery& discovery() {
  static const Discovery d = [] {
    Discovery r;
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      r.reason = std::string(cudaGetErrorString(status));
      (void)cudaGetLastError();  // clear it, so that no later check reports it
      count = 0;
    } else if (count == 0) {
      r.reason = "no CUDA-capable device is detected";
    }
    r.count = count;
    return r;
  }();
  return d;
}

struct Contexts {
  std::mutex mutex;
  std::vector<std::unique_ptr<DeviceContext>> by_index;
  std::vector<std::unique_ptr<DeviceInfo>> info;
};

Contexts& contexts() {
  static Contexts* c = new Contexts();  // never destroyed: tensors may outlive static objects
  return *c;
}

}  // namespace

int visible_device_count() { return discovery().count; }
std::string unavailable_reason() { return discovery().reason; }

void throw_cuda_error(cudaError_t status, const std::string& what) {
  (void)cudaGetLastError();
  throw DeviceError(what + " failed on the GPU: " + cudaGetErrorString(status) + " (" +
                    cudaGetErrorName(status) + ")");
}

int require_device(Device device) {
  if (!device.is_cuda()) {
    throw DeviceError("expected a CUDA device, got " + device.to_string());
  }
  const int count = device_count();
  if (count == 0) {
    throw DeviceError("cannot use " + device.to_string() + ": no CUDA GPU is available (" +
                      unavailable_reason() +
                      "); check the GPU and driver with nvidia-smi, or use --device cpu");
  }
  if (device.index < 0 || device.index >= count) {
    throw DeviceError("cannot use " + device.to_string() + ": this machine has " +
                      std::to_string(count) + " CUDA GPU" + (count == 1 ? "" : "s") +
                      " (cuda:0 to cuda:" + std::to_string(count - 1) + ")");
  }
  return device.index;
}

const DeviceInfo& device_info(int index) {
  require_device(Device::cuda(index));
  Contexts& c = contexts();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.info.size() <= static_cast<std::size_t>(index)) c.info.resize(index + 1);
  auto& slot = c.info[static_cast<std::size_t>(index)];
  if (!slot) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    auto info = std::make_unique<DeviceInfo>();
    info->name = prop.name;
    info->major = prop.major;
    info->minor = prop.minor;
    info->total_memory = static_cast<std::int64_t>(prop.totalGlobalMem);
    info->multiprocessors = prop.multiProcessorCount;
    slot = std::move(info);
  }
  return *slot;
}

DeviceContext& context(int index) {
  require_device(Device::cuda(index));
  Contexts& c = contexts();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.by_index.size() <= static_cast<std::size_t>(index)) c.by_index.resize(index + 1);
  auto& slot = c.by_index[static_cast<std::size_t>(index)];
  if (!slot) {
    DeviceGuard guard(index);
    auto ctx = std::make_unique<DeviceContext>();
    ctx->index = index;
    // The first runtime call on a device creates its primary context (tens of milliseconds).
    check(cudaStreamCreateWithFlags(&ctx->compute, cudaStreamNonBlocking),
          "creating the compute stream");
    check(cudaStreamCreateWithFlags(&ctx->copy, cudaStreamNonBlocking), "creating the copy stream");
    slot = std::move(ctx);
  }
  return *slot;
}

DeviceGuard::DeviceGuard(int index) {
  int current = -1;
  check(cudaGetDevice(&current), "cudaGetDevice");
  if (current != index) {
    check(cudaSetDevice(index), "cudaSetDevice");
    previous_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

StreamScope::StreamScope(Device device)
    : index_(require_device(device)), guard_(index_), stream_(context(index_).compute) {}

void synchronize_device(Device device) {
  const int index = require_device(device);
  DeviceContext& ctx = context(index);
  DeviceGuard guard(index);
  count_host_wait();  // one wait, for both streams
  check(cudaStreamSynchronize(ctx.copy), "synchronizing the copy stream");
  check(cudaStreamSynchronize(ctx.compute), "synchronizing the compute stream");
}

}  // namespace mixprec::cuda

namespace mixprec::cuda::kernels {

void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw_cuda_error(status, std::string(kernel) + " launch");
}

void unsupported_dtype(const char* op, DType dtype, const char* supported) {
  throw DTypeError(std::string(op) + " on CUDA does not support dtype " +
                   std::string(dtype_name(dtype)) + "; supported: " + supported);
}

}  // namespace mixprec::cuda::kernels
