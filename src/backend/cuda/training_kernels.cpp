// The cuda backend's TrainingKernels table (backend/training_kernels.h).
#include "backend/training_kernels.h"

namespace mixprec::cuda {

extern const TrainingKernels kTrainingKernels;
const TrainingKernels kTrainingKernels{};

}  // namespace mixprec::cuda
