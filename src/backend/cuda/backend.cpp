// The cuda backend: its tables, gathered into the one Backend that registry.cpp returns for
// DeviceType::cuda.
#include "backend/backend.h"

namespace mixprec::cuda {

extern const DeviceRuntime kDeviceRuntime;      // device_runtime.cpp
extern const TensorKernels kTensorKernels;      // tensor_kernels.cpp
extern const NnKernels kNnKernels;              // nn_kernels.cpp
extern const TrainingKernels kTrainingKernels;  // training_kernels.cpp
extern const DeviceServices kDeviceServices;    // device_services.cpp
#if MIXPREC_HAVE_NCCL
extern const Collectives kCollectives;  // collectives.cpp (NCCL)
constexpr const Collectives* kCollectivesIfBuilt = &kCollectives;
#else
constexpr const Collectives* kCollectivesIfBuilt = nullptr;  // a build without NCCL
#endif

extern const Backend kBackend;
const Backend kBackend{.type = DeviceType::cuda,
                       .name = "cuda",
                       .runtime = &kDeviceRuntime,
                       .tensor = &kTensorKernels,
                       .nn = &kNnKernels,
                       .training = &kTrainingKernels,
                       .services = &kDeviceServices,
                       .collectives = kCollectivesIfBuilt};

}  // namespace mixprec::cuda
