// Which backend serves which device kind: a compile-time choice, one switch.
#include <string>

#include "backend/backend.h"
#include "mixprec/error.h"

namespace mixprec {

namespace cpu {
extern const Backend kBackend;  // src/backend/cpu/backend.cpp
}
#if MIXPREC_HAVE_CUDA
namespace cuda {
extern const Backend kBackend;  // src/backend/cuda/backend.cpp
}
#endif

const Backend* find_backend(DeviceType type) noexcept {
  switch (type) {
    case DeviceType::cpu: return &cpu::kBackend;
    case DeviceType::cuda:
#if MIXPREC_HAVE_CUDA
      return &cuda::kBackend;
#else
      return nullptr;
#endif
  }
  return nullptr;
}

const Backend& backend_for(Device device) {
  if (const Backend* backend = find_backend(device.type)) return *backend;
  throw DeviceError(device.to_string() +
                    ": this build of mixprec has no CUDA backend; use --device cpu (or rebuild "
                    "with the CUDA toolkit installed and -DMIXPREC_CUDA=ON)");
}

}  // namespace mixprec
