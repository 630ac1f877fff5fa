// The cpu backend's DeviceRuntime table (backend/device_runtime.h).
#include "backend/device_runtime.h"

namespace mixprec::cpu {

extern const DeviceRuntime kDeviceRuntime;
const DeviceRuntime kDeviceRuntime{};

}  // namespace mixprec::cpu
