// The device backend interface: one table of operations per device kind, at the op boundary.
//
// An op (src/ops/) validates its arguments, then dispatches once on its tensors' device:
//   const Backend& be = backend_for(x.device());
//   Tensor y = be.tensor->unary(op, x);
// Each backend (src/backend/cpu/, src/backend/cuda/) defines one constant `Backend` whose members
// point at its tables, grouped by concept (each table's header says what it holds). A build
// without the CUDA backend has no CUDA table, and backend_for() is then the one place that
// refuses a CUDA device, with a DeviceError that says how to get one.
//
// The tables are constant data chosen at compile time (registry.cpp): no mutable global state, no
// registration order. An entry a device does not provide is a null pointer (a capability: the op
// then takes its portable path, e.g. the CPU has no fused matmul epilogue); the table's header
// says which entries may be null.
#pragma once

#include "mixprec/device.h"

namespace mixprec {

struct DeviceRuntime;    // backend/device_runtime.h: devices, memory, synchronisation
struct TensorKernels;    // backend/tensor_kernels.h: elementwise, reductions, copies, indexing
struct NnKernels;        // backend/nn_kernels.h: matmul, convolution, pooling, normalization
struct TrainingKernels;  // backend/training_kernels.h: optimizer updates, loss scaling
struct DeviceServices;   // backend/device_services.h: staging, events, streams, statistics
struct Collectives;      // backend/collectives.h: all-reduce and broadcast across processes

struct Backend {
  DeviceType type = DeviceType::cpu;
  const char* name = "";  // "cpu", "cuda"
  const DeviceRuntime* runtime = nullptr;
  const TensorKernels* tensor = nullptr;
  const NnKernels* nn = nullptr;
  const TrainingKernels* training = nullptr;
  const DeviceServices* services = nullptr;
  // Nullable capability: null in a build without the device's collective library (MPI for the
  // CPU, NCCL for CUDA).
  const Collectives* collectives = nullptr;
};

// The backend of a device kind, or nullptr when this build has none (CUDA without the toolkit).
const Backend* find_backend(DeviceType type) noexcept;

// The backend of `device`'s kind; throws DeviceError naming the device when this build has none.
const Backend& backend_for(Device device);

}  // namespace mixprec
