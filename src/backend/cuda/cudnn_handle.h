// The cuDNN handle of each GPU: created lazily, on the first convolution that runs there (a CUDA
// build must run where there is no GPU or driver, DESIGN §3), bound to that GPU's compute stream
// (context.h) and kept for the life of the process. Only compiled with cuDNN
// (MIXPREC_HAVE_CUDNN); without it the convolutions on CUDA throw DeviceError (conv.cpp).
#pragma once

#include <cudnn.h>

#include <string>

namespace mixprec::cuda {

// The handle of GPU `index`, on its compute stream. The caller holds a StreamScope (or DeviceGuard)
// for `index`. Thread-safe; throws DeviceError when cudnnCreate fails (no usable GPU, or a cuDNN
// library that does not match the driver).
cudnnHandle_t cudnn_handle(int index);

// Throws DeviceError "<what> failed: <cudnnGetErrorString> (status <n>)" unless status is
// CUDNN_STATUS_SUCCESS.
void check_cudnn(cudnnStatus_t status, const std::string& what);

}  // namespace mixprec::cuda
