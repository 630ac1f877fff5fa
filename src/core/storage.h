// Storage: one allocation on one device, shared by every tensor that views it. Either owned, from
// that device's backend (host memory, or GPU memory from the CUDA caching allocator), or external:
// memory someone else owns (a NumPy array's buffer, a DLPack tensor), viewed in place and handed
// back through a release callback.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "mixprec/device.h"

namespace mixprec {
struct DeviceRuntime;
}

namespace mixprec::core {

class Storage {
 public:
  Storage(std::size_t nbytes, Device device);
  // External memory: nothing is allocated or freed; `release` (never empty) runs once, when the
  // last tensor viewing `data` is gone. No backend is asked for: the memory need not come from
  // one, and the device's backend is looked up only by the ops that use it.
  Storage(void* data, std::size_t nbytes, Device device, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool external() const { return static_cast<bool>(release_); }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  const DeviceRuntime* runtime_ = nullptr;  // the backend that allocated data_ frees it
  std::function<void()> release_;           // set for external memory
};

}  // namespace mixprec::core
