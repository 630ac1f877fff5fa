// The fused attention kernels (launched by attention.cu; see cuda/attention.h), in headers of
// their own so that a block emulation can run them on the CPU
// (tests/unit/cuda_attention_emulation_test.cpp): attention_common.cuh (shapes, layouts, masking,
// the warp products; its opening comment states the names the kernels need and their numerics),
// attention_forward.cuh and attention_backward.cuh.
#pragma once

#include "backend/cuda/kernels/attention_backward.cuh"
#include "backend/cuda/kernels/attention_common.cuh"
#include "backend/cuda/kernels/attention_forward.cuh"
