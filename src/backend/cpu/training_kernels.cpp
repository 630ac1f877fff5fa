// The cpu backend's TrainingKernels table (backend/training_kernels.h).
#include "backend/training_kernels.h"

namespace mixprec::cpu {

extern const TrainingKernels kTrainingKernels;
const TrainingKernels kTrainingKernels{};

}  // namespace mixprec::cpu
