// CUDA GPUs: availability and the few global switches of the CUDA backend. Tensors go to a GPU with
// Tensor::to(Device::cuda(i)) or TensorOptions{.device = Device::cuda(i)}; ops run where their
// operands live. Every function here also exists in a build without the CUDA backend (there is no
// GPU there: device_count() is 0).
#pragma once

#include <cstdint>

#include "mixprec/device.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::cuda {

// The number of usable CUDA GPUs. 0 in a build without the CUDA backend and on a machine without a
// GPU or without a working driver ("driver version is insufficient" counts as no GPU). Never
// throws; the first call initialises the CUDA runtime (no GPU context is created).
int device_count();
bool is_available();  // device_count() > 0

// Waits until all work queued on `device` (its compute and copy streams) has finished. Kernels run
// asynchronously: host timers around GPU work need this. Throws DeviceError for a device that does
// not exist.
void synchronize(Device device = Device::cuda());

// Times the host has waited for a CUDA GPU (a stream or event synchronisation, a blocking copy)
// since the process started; 0 in a build without the CUDA backend or without a GPU. Every wait
// counts once, those the program's own data needs included (Tensor::to(Device::cpu()) of a GPU
// tensor, a loss read as a host number), on every thread (fit's background prefetcher too).
// Read it before and after a piece of work to see how often that work stalls on the GPU. Never
// throws; thread-safe.
std::int64_t host_synchronizations();

// TensorFloat-32 for float32 matmuls (tensor cores; inputs rounded to a 10-bit significand, float32
// accumulation), as tf.config.experimental.enable_tensor_float_32_execution. Off by default here
// (unlike TensorFlow): the float32 policy means true float32 unless the user opts in. The
// environment variable MIXPREC_ALLOW_TF32=1 sets the initial value. Thread-safe.
void enable_tensor_float_32_execution(bool enabled);
bool tensor_float_32_execution_enabled();

}  // namespace mixprec::cuda

#pragma GCC visibility pop
