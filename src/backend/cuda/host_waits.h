// The count of the host's waits for a GPU: DeviceRuntime::host_synchronizations and the public
// mixprec::cuda::host_synchronizations(). Every place in the CUDA backend where the host blocks
// until GPU work has finished calls count_host_wait() once per wait: a synchronisation of a GPU's
// two streams is one wait, a readback of several staging chunks one per chunk (it waits for each).
// The sites: synchronize_device, synchronize_event, the transfers' waits for a staging buffer, a
// readback chunk and a GPU-to-GPU copy, the implicit device synchronisation of cudaFree and
// cudaFreeHost, and a timed cuDNN algorithm search (it runs and waits for every candidate: counted
// once). Waits the user's own data needs (a device-to-host readback) count too: the point is to
// see every one.
#pragma once

#include <cstdint>

namespace mixprec::cuda {

void count_host_wait() noexcept;
std::int64_t host_waits() noexcept;  // since the process started (relaxed: a statistic)

}  // namespace mixprec::cuda
