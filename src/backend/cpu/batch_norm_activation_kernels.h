// The innermost loops of the CPU batch-norm kernels (batch_norm_activation.cpp, and
// batch_norm.cpp's loops for float32 / float16 / bfloat16): one pass over a run of n consecutive
// elements of x
// (..., C) with every per-element step in registers: the 16-bit load widened to float32, the
// pre-activation (x - mean) * scale + shift, the activation or its derivative inline (one
// instantiation per activation, no per-element switch), the accumulation or the 16-bit store
// rounded to nearest even. The per-channel parameters come repeated over a Period of whole rows,
// so a run of several short rows is one flat loop with no tail per row. Compiled for AVX-512,
// AVX2 and the baseline (target_clones, as vector_math.cpp), the widest the CPU has picked at load
// time; force_baseline() selects the baseline copies (tests compare the two). The bfloat16 loops
// that store (forward, backward_dx) have native-rounding versions on CPUs with AVX512_BF16
// (batch_norm_activation_kernels_bf16.h), bit-identical, used by the widest choice.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/op_kinds.h"
#include "mixprec/bfloat16.h"
#include "mixprec/float16.h"

namespace mixprec::cpu::bn_kernels {

// The activation after the normalization; `none` is plain batch normalization.
enum class Act { none, relu, relu6, sigmoid, silu };

// The fused activation for op, or nullopt where there is none.
std::optional<Act> act_of(UnaryOp op);

// A run of `rows` whole rows of C channels, `elements` = rows * C: a multiple of 16 floats (one
// AVX-512 vector) where possible, about 512 elements or one row when C is larger.
struct Period {
  std::int64_t rows = 1;
  std::int64_t elements = 0;
};
Period period_of(std::int64_t c);

// The C per-channel values v repeated over the period.
std::vector<float> repeat(const float* v, std::int64_t c, Period p);
// The same into out (p.elements floats).
void repeat_into(const float* v, std::int64_t c, Period p, float* out);
// The inverse: sums of the period's `elements` partial values per channel, added into out[C]
// in float64.
void fold(const float* partial, std::int64_t c, Period p, double* out);

// Per-element parameters over one period (each `elements` long; unused ones may be null).
// pre = (x - mean) * scale + shift; the backward's dx = k * (dz - p - (x - mean) * q).
struct Coefficients {
  const float* mean = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  const float* k = nullptr;
  const float* p = nullptr;
  const float* q = nullptr;
};

// The loops for storage type T (float, float16, bfloat16); n <= the period's elements, the run
// starting at a row start. Accumulators are float32, indexed like the period.
template <typename T>
struct Kernels {
  // acc[i] += x[i]
  void (*sum)(const T* x, std::int64_t n, float* acc);
  // d = x[i] - mean[i]: acc1[i] += d, acc2[i] += d * d
  void (*centered)(const T* x, std::int64_t n, const float* mean, float* acc1, float* acc2);
  // y[i] = act(pre)
  void (*forward)(const T* x, std::int64_t n, const Coefficients& c, T* y);
  // dz = dy * act'(pre): acc_g[i] += dz, acc_gx[i] += dz * (x - mean)
  void (*backward_sums)(const T* dy, const T* x, std::int64_t n, const Coefficients& c,
                        float* acc_g, float* acc_gx);
  // dx[i] = k * (dz - p - (x - mean) * q)
  void (*backward_dx)(const T* dy, const T* x, std::int64_t n, const Coefficients& c, T* dx);
};

template <typename T>
Kernels<T> kernels(Act act);

// Tests: true selects the baseline (SSE2) copies of the loops, false (the default) the widest the
// CPU runs. Not thread-safe against running kernels.
void force_baseline(bool baseline);

}  // namespace mixprec::cpu::bn_kernels
