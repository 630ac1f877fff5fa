// Storage: one owned allocation on one device, from that device's backend (host memory, or GPU
// memory from the CUDA caching allocator), shared by every tensor that views it.
#pragma once

#include <cstddef>
#include <memory>

#include "mixprec/device.h"

namespace mixprec {
struct DeviceRuntime;
}

namespace mixprec::core {

class Storage {
 public:
  Storage(std::size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  const DeviceRuntime* runtime_;  // the backend that allocated data_ frees it
};

}  // namespace mixprec::core
