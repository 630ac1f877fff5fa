// The sweeps of the CPU batch-norm (+ activation) kernels over x (..., C) as an (M, C) matrix,
// built on the register-resident loops of batch_norm_activation_kernels.h and the fixed row
// blocking of batch_norm_loops.h (results independent of the thread count):
//  - statistics: one sweep over x. Each block of rows takes its mean and its sum of squared
//    deviations in two passes over the block while it stays in cache (the second pass also sums
//    the deviations, correcting the block mean); the blocks are combined in float64 in block order
//    with Chan's formula. Never E[x^2] - E[x]^2.
//  - forward: one sweep writing y = act((x - mean) * scale + shift).
//  - backward: two sweeps, the per-channel sums of dz = dy * act'(pre) and dz * (x - mean), then
//    dx, recomputing pre from x in each.
// T: float, float16 or bfloat16 storage; statistics, parameters and arithmetic in float32.
#pragma once

#include <cstdint>

#include "backend/cpu/batch_norm_activation_kernels.h"
#include "backend/cpu/batch_norm_loops.h"
#include "backend/nn_kernels.h"

namespace mixprec::cpu::bn_sweeps {

// mean and the biased variance per channel (C floats each).
template <typename T>
void statistics(const T* x, bn_loops::Rows r, float* mean, float* variance);

// Per-channel float32 constants (C each): pre = (x - mean) * scale + shift.
struct Affine {
  const float* mean = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
};

template <typename T>
void forward(const T* x, bn_loops::Rows r, const Affine& a, bn_kernels::Act act, T* y);

// scale = gamma * inv_std; dbeta = sum(dz), dgamma = sum(dz * (x - mean)) * inv_std;
// batch statistics: dx = scale * (dz - dbeta / M - (x - mean) * dgamma * inv_std / M),
// moving: dx = scale * dz (C floats each for inv_std, dgamma, dbeta).
template <typename T>
void backward(const T* dy, const T* x, bn_loops::Rows r, const Affine& a, const float* inv_std,
              BatchNormStats stats, bn_kernels::Act act, T* dx, float* dgamma, float* dbeta);

}  // namespace mixprec::cpu::bn_sweeps
