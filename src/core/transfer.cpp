// Device moves through the backend interface (core/transfer.h).
#include "core/transfer.h"

#include "backend/backend.h"
#include "backend/device_runtime.h"

namespace mixprec::core {

Tensor transfer(const Tensor& src, Device target) {
  const Device from = src.device();
  if (from == target) return src;
  if (from.is_cpu()) return backend_for(target).runtime->transfer(src, target);
  if (target.is_cpu() || target.type == from.type) {
    return backend_for(from).runtime->transfer(src, target);  // e.g. GPU to GPU: peer copies
  }
  return transfer(transfer(src, Device::cpu()), target);
}

}  // namespace mixprec::core
