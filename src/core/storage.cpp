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

Storage::~Storage() { runtime_->deallocate(device_, data_, nbytes_); }

}  // namespace mixprec::core
