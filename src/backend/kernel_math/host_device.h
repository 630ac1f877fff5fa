// MIXPREC_HOST_DEVICE: marks a function that the CPU loops and the CUDA kernels share. Compiled by
// nvcc it is `__host__ __device__`; by the host compiler it is nothing, so the same body runs in
// the CPU backend and in CPU tests (src/backend/kernel_math/: the per-element bodies of the
// kernels, written once).
#pragma once

#ifndef MIXPREC_HOST_DEVICE
#if defined(__CUDACC__)
#define MIXPREC_HOST_DEVICE __host__ __device__
#else
#define MIXPREC_HOST_DEVICE
#endif
#endif
