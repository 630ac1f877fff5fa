// The cuda backend's DeviceServices table (backend/device_services.h).
#include "backend/device_services.h"

namespace mixprec::cuda {

extern const DeviceServices kDeviceServices;
const DeviceServices kDeviceServices{};

}  // namespace mixprec::cuda
