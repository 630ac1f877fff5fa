// A tensor's values on another device: the one place that picks which backend moves them.
#pragma once

#include "mixprec/tensor.h"

namespace mixprec::core {

// A copy of src (detached) on `target`; src itself when it is already there. A move between the
// CPU and another device, or between two devices of one kind, is done by that kind's backend
// (DeviceRuntime::transfer); between two other kinds it goes through the host.
Tensor transfer(const Tensor& src, Device target);

}  // namespace mixprec::core
