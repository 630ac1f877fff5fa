// The cuda backend's DeviceRuntime table (backend/device_runtime.h).
#include "backend/device_runtime.h"

namespace mixprec::cuda {

extern const DeviceRuntime kDeviceRuntime;
const DeviceRuntime kDeviceRuntime{};

}  // namespace mixprec::cuda
