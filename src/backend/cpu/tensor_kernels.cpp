// The cpu backend's TensorKernels table (backend/tensor_kernels.h).
#include "backend/tensor_kernels.h"

namespace mixprec::cpu {

extern const TensorKernels kTensorKernels;
const TensorKernels kTensorKernels{};

}  // namespace mixprec::cpu
