#include "core/storage.h"

#include "core/allocator.h"
#include "mixprec/error.h"

namespace mixprec::core {

// CPU storage comes from the host allocator; CUDA storage from the device allocator hook, which
// the CUDA backend implements with its caching allocator (and which throws a DeviceError naming the
// device in a build without the backend or on a machine without a GPU).
Storage::Storage(std::size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = device.is_cpu() ? cpu_allocate(nbytes) : device_allocate(device, nbytes);
}

Storage::~Storage() {
  if (device_.is_cpu()) {
    cpu_deallocate(data_, nbytes_);
  } else {
    device_deallocate(device_, data_, nbytes_);
  }
}

}  // namespace mixprec::core
