// Elementwise unary (forward and fused backward) and broadcasting binary kernels, each templated on
// the storage type and computing in float (double for float64) with the CPU backend's formulas
// (src/backend/cpu/unary.cpp, binary.cpp). The op is a runtime argument, uniform across the grid,
// so one kernel per storage type serves every op and compile time stays modest.
//
// Two kernels per family and type: a dense one (every operand contiguous, no broadcasting, 16-byte
// aligned) that moves 16 bytes per load and store, and a strided one for everything else
// (broadcasting, views), with 32-bit index arithmetic whenever the offsets fit.
#include "backend/cuda/kernels/common.cuh"

namespace mixprec::cuda::kernels {

namespace {

// ---- scalar math, float and double overloads ----
__device__ __forceinline__ float k_exp(float x) { return expf(x); }
__device__ __forceinline__ double k_exp(double x) { return exp(x); }
__device__ __forceinline__ float k_log(float x) { return logf(x); }
__device__ __forceinline__ double k_log(double x) { return log(x); }
__device__ __forceinline__ float k_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double k_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float k_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double k_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float k_erf(float x) { return erff(x); }
__device__ __forceinline__ double k_erf(double x) { return erf(x); }
__device__ __forceinline__ float k_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double k_pow(double x, double y) { return pow(x, y); }

// sqrt(2/pi) and the cubic coefficient of the tanh approximation of GELU; 1/sqrt(2); 1/sqrt(2 pi).
constexpr double kGeluTanhScale = 0.7978845608028654;
constexpr double kGeluTanhCubic = 0.044715;
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

template <typename C>
__device__ __forceinline__ C sigmoid_value(C x) {
  // Split by sign so exp never overflows: for x < 0, e^x / (1 + e^x).
  if (x >= C(0)) return C(1) / (C(1) + k_exp(-x));
  const C e = k_exp(x);
  return e / (C(1) + e);
}

template <typename C>
__device__ C unary_value(Unary op, C x) {
  switch (op) {
    case Unary::neg: return -x;
    case Unary::exp: return k_exp(x);
    case Unary::log: return k_log(x);
    case Unary::sqrt: return k_sqrt(x);
    case Unary::rsqrt: return C(1) / k_sqrt(x);  // IEEE division: rsqrtf is only 2-ulp accurate
    case Unary::abs: return fabs(x);
    case Unary::relu: return x > C(0) ? x : (x != x ? x : C(0));  // NaN stays NaN
    case Unary::relu6: return x != x ? x : fmin(fmax(x, C(0)), C(6));
    case Unary::sigmoid: return sigmoid_value(x);
    case Unary::tanh: return k_tanh(x);
    case Unary::gelu: return C(0.5) * x * (C(1) + k_erf(x * C(kSqrtHalf)));
    case Unary::gelu_tanh: {
      const C inner = C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x);
      return C(0.5) * x * (C(1) + k_tanh(inner));
    }
    case Unary::silu: return x * sigmoid_value(x);
  }
  return x;
}

// d op(x) / dx from x and y = op(x).
template <typename C>
__device__ C unary_derivative(Unary op, C x, C y) {
  switch (op) {
    case Unary::neg: return C(-1);
    case Unary::exp: return y;
    case Unary::log: return C(1) / x;
    case Unary::sqrt: return C(0.5) / y;
    case Unary::rsqrt: return C(-0.5) * y / x;
    case Unary::abs: return x > C(0) ? C(1) : (x < C(0) ? C(-1) : C(0));
    case Unary::relu: return x > C(0) ? C(1) : C(0);
    case Unary::relu6: return (x > C(0) && x < C(6)) ? C(1) : C(0);
    case Unary::sigmoid: return y * (C(1) - y);
    case Unary::tanh: return C(1) - y * y;
    case Unary::gelu: {
      const C cdf = C(0.5) * (C(1) + k_erf(x * C(kSqrtHalf)));
      const C pdf = k_exp(C(-0.5) * x * x) * C(kInvSqrt2Pi);
      return cdf + x * pdf;
    }
    case Unary::gelu_tanh: {
      const C t = k_tanh(C(kGeluTanhScale) * (x + C(kGeluTanhCubic) * x * x * x));
      return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * C(kGeluTanhScale) *
                                       (C(1) + C(3 * kGeluTanhCubic) * x * x);
    }
    case Unary::silu: {
      const C s = sigmoid_value(x);
      return s * (C(1) + x * (C(1) - s));
    }
  }
  return C(0);
}

template <typename T>
__device__ __forceinline__ compute_t<T> backward_value(Unary op, compute_t<T> g, compute_t<T> x,
                                                       compute_t<T> y) {
  // A 16-bit y is rounded, and derivatives such as y (1 - y) and 1 - y^2 cancel near saturation:
  // recompute y in float from x (as the CPU backend does).
  constexpr bool kHalf = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
  const compute_t<T> yy = kHalf ? unary_value(op, x) : y;
  return g * unary_derivative(op, x, yy);
}

template <typename C>
__device__ __forceinline__ C binary_value(Binary op, C a, C b) {
  switch (op) {
    case Binary::add: return a + b;
    case Binary::sub: return a - b;
    case Binary::mul: return a * b;
    case Binary::div: return a / b;
    case Binary::pow: return k_pow(a, b);
    // NaN propagates: a comparison with NaN is false, so pick the NaN explicitly.
    case Binary::maximum: return (a >= b || a != a) ? a : b;
    case Binary::minimum: return (a <= b || a != a) ? a : b;
  }
  return a;
}

// ---- unary ----
template <typename T>
__global__ void unary_dense(Unary op, const T* __restrict__ x, T* __restrict__ out,
                            std::int64_t n) {
  constexpr int V = Pack<T>::kSize;
  const std::int64_t packs = n / V;
  for (std::int64_t p = global_thread(); p < packs; p += grid_threads()) {
    Pack<T> v = load_pack(x + p * V);
#pragma unroll
    for (int j = 0; j < V; ++j) v.v[j] = from_compute<T>(unary_value(op, to_compute(v.v[j])));
    store_pack(out + p * V, v);
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_threads())
    out[i] = from_compute<T>(unary_value(op, to_compute(x[i])));
}

template <typename T, typename Index>
__global__ void unary_strided(Unary op, Strided<1> plan, const T* __restrict__ x,
                              T* __restrict__ out) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[1];
    offsets_of<Index, 1>(plan, i, off);
    out[i] = from_compute<T>(unary_value(op, to_compute(x[off[0]])));
  }
}

// ---- unary backward ----
template <typename T>
__global__ void unary_backward_dense(Unary op, const T* __restrict__ g, const T* __restrict__ x,
                                     const T* __restrict__ y, T* __restrict__ out, std::int64_t n) {
  constexpr int V = Pack<T>::kSize;
  const std::int64_t packs = n / V;
  for (std::int64_t p = global_thread(); p < packs; p += grid_threads()) {
    const Pack<T> gv = load_pack(g + p * V), xv = load_pack(x + p * V), yv = load_pack(y + p * V);
    Pack<T> o;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      o.v[j] = from_compute<T>(
          backward_value<T>(op, to_compute(gv.v[j]), to_compute(xv.v[j]), to_compute(yv.v[j])));
    }
    store_pack(out + p * V, o);
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_threads()) {
    out[i] = from_compute<T>(
        backward_value<T>(op, to_compute(g[i]), to_compute(x[i]), to_compute(y[i])));
  }
}

template <typename T, typename Index>
__global__ void unary_backward_strided(Unary op, Strided<3> plan, const T* __restrict__ g,
                                       const T* __restrict__ x, const T* __restrict__ y,
                                       T* __restrict__ out) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[3];
    offsets_of<Index, 3>(plan, i, off);
    out[i] = from_compute<T>(
        backward_value<T>(op, to_compute(g[off[0]]), to_compute(x[off[1]]), to_compute(y[off[2]])));
  }
}

// ---- binary ----
template <typename T>
__global__ void binary_dense(Binary op, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ out, std::int64_t n) {
  constexpr int V = Pack<T>::kSize;
  const std::int64_t packs = n / V;
  for (std::int64_t p = global_thread(); p < packs; p += grid_threads()) {
    const Pack<T> av = load_pack(a + p * V), bv = load_pack(b + p * V);
    Pack<T> o;
#pragma unroll
    for (int j = 0; j < V; ++j)
      o.v[j] = from_compute<T>(binary_value(op, to_compute(av.v[j]), to_compute(bv.v[j])));
    store_pack(out + p * V, o);
  }
  for (std::int64_t i = packs * V + global_thread(); i < n; i += grid_threads())
    out[i] = from_compute<T>(binary_value(op, to_compute(a[i]), to_compute(b[i])));
}

template <typename T, typename Index>
__global__ void binary_strided(Binary op, Strided<2> plan, const T* __restrict__ a,
                               const T* __restrict__ b, T* __restrict__ out) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[2];
    offsets_of<Index, 2>(plan, i, off);
    out[i] = from_compute<T>(binary_value(op, to_compute(a[off[0]]), to_compute(b[off[1]])));
  }
}

}  // namespace

void unary(Unary op, DType dtype, const Strided<1>& plan, const void* x, void* out,
           cudaStream_t s) {
  dispatch_floating(dtype, "unary op", [&]<typename T>() {
    const T* xp = static_cast<const T*>(x);
    T* op_out = static_cast<T*>(out);
    const unsigned blocks = blocks_for(plan.numel);
    if (plan.dense && aligned16(x) && aligned16(out)) {
      unary_dense<T><<<blocks_for(plan.numel / Pack<T>::kSize + 1), kThreads, 0, s>>>(
          op, xp, op_out, plan.numel);
    } else if (plan.index32) {
      unary_strided<T, std::uint32_t><<<blocks, kThreads, 0, s>>>(op, plan, xp, op_out);
    } else {
      unary_strided<T, std::int64_t><<<blocks, kThreads, 0, s>>>(op, plan, xp, op_out);
    }
  });
  check_launch("unary");
}

void unary_backward(Unary op, DType dtype, const Strided<3>& plan, const void* g, const void* x,
                    const void* y, void* out, cudaStream_t s) {
  dispatch_floating(dtype, "unary op backward", [&]<typename T>() {
    const T* gp = static_cast<const T*>(g);
    const T* xp = static_cast<const T*>(x);
    const T* yp = static_cast<const T*>(y);
    T* o = static_cast<T*>(out);
    const unsigned blocks = blocks_for(plan.numel);
    if (plan.dense && aligned16(g) && aligned16(x) && aligned16(y) && aligned16(out)) {
      unary_backward_dense<T><<<blocks_for(plan.numel / Pack<T>::kSize + 1), kThreads, 0, s>>>(
          op, gp, xp, yp, o, plan.numel);
    } else if (plan.index32) {
      unary_backward_strided<T, std::uint32_t><<<blocks, kThreads, 0, s>>>(op, plan, gp, xp, yp, o);
    } else {
      unary_backward_strided<T, std::int64_t><<<blocks, kThreads, 0, s>>>(op, plan, gp, xp, yp, o);
    }
  });
  check_launch("unary_backward");
}

void binary(Binary op, DType dtype, const Strided<2>& plan, const void* a, const void* b, void* out,
            cudaStream_t s) {
  dispatch_floating(dtype, "binary op", [&]<typename T>() {
    const T* ap = static_cast<const T*>(a);
    const T* bp = static_cast<const T*>(b);
    T* o = static_cast<T*>(out);
    const unsigned blocks = blocks_for(plan.numel);
    if (plan.dense && aligned16(a) && aligned16(b) && aligned16(out)) {
      binary_dense<T><<<blocks_for(plan.numel / Pack<T>::kSize + 1), kThreads, 0, s>>>(
          op, ap, bp, o, plan.numel);
    } else if (plan.index32) {
      binary_strided<T, std::uint32_t><<<blocks, kThreads, 0, s>>>(op, plan, ap, bp, o);
    } else {
      binary_strided<T, std::int64_t><<<blocks, kThreads, 0, s>>>(op, plan, ap, bp, o);
    }
  });
  check_launch("binary");
}

}  // namespace mixprec::cuda::kernels
