// The cpu backend's NnKernels table (backend/nn_kernels.h).
#include "backend/nn_kernels.h"

namespace mixprec::cpu {

extern const NnKernels kNnKernels;
const NnKernels kNnKernels{};

}  // namespace mixprec::cpu
