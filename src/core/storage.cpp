#include "core/storage.h"

#include "core/allocator.h"
#include "mixprec/error.h"

namespace mixprec::core {

Storage::Storage(std::size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (!device.is_cpu()) {
    throw DeviceError("cannot allocate on " + device.to_string() +
                      ": this build of mixprec has no CUDA backend; use --device cpu");
  }
  data_ = cpu_allocate(nbytes);
}

Storage::~Storage() { cpu_deallocate(data_, nbytes_); }

}  // namespace mixprec::core
