#include "ops/moving_average.h"

#include <string>

#include "backend/backend.h"
#include "ops/checks.h"

namespace mixprec::ops {

void moving_average_update(const char* op, std::span<const MovingAverageOperand> operands,
                           double momentum) {
  if (operands.empty()) return;
  check_defined(op, operands[0].moving);
  const Device device = operands[0].moving.device();
  for (std::size_t k = 0; k < operands.size(); ++k) {
    const MovingAverageOperand& o = operands[k];
    const std::string what = std::string(op) + ": moving average " + std::to_string(k);
    check_defined(op, o.moving);
    check_defined(op, o.value);
    if (o.moving.dtype() != DType::float32 && o.moving.dtype() != DType::float64) {
      throw DTypeError(what + " is " + describe(o.moving) + "; it must be float32 or float64");
    }
    if (o.value.shape() != o.moving.shape() || o.value.dtype() != o.moving.dtype()) {
      throw ShapeError(what + ": the value is " + describe(o.value) + " but the average is " +
                       describe(o.moving) + "; they must have one shape and dtype");
    }
    if (!(o.moving.device() == device) || !(o.value.device() == device)) {
      throw DeviceError(what + ": every average and value must be on " + device.to_string() +
                        ", got " + o.moving.device().to_string() + " and " +
                        o.value.device().to_string());
    }
    if (!o.moving.is_contiguous() || !o.value.is_contiguous()) {
      throw ValueError(what + ": the average and the value must be contiguous");
    }
  }
  backend_for(device).training->moving_average(operands, momentum);
}

}  // namespace mixprec::ops
