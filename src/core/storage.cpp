#include "core/storage.h"

#include "backend/backend.h"
#include "backend/device_runtime.h"
#include "mixprec/error.h"

namespace mixprec::core {

// Storage comes from the device's backend (DeviceRuntime::allocate): the host allocator for the
// CPU, the caching allocator for a GPU; backend_for() throws the DeviceError for a device kind this
// build lacks.
Storage::Storage(std::size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), runtime_(backend_for(device).runtime) {
  data_ = runtime_->allocate(device, nbytes);
}

Storage::Storage(void* data, std::size_t nbytes, Device device, std::function<void()> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {
  if (!release_) release_ = [] {};
}

// The release callback may run foreign code (Python's reference counting): it must not throw
// out of a destructor, and an exception it raises anyway ends here.
Storage::~Storage() {
  if (release_) {
    try {
      release_();
    } catch (...) {
    }
    return;
  }
  runtime_->deallocate(device_, data_, nbytes_);
}

}  // namespace mixprec::core
