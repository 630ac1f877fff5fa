// Comparisons, where and finiteness checks. Comparisons and finiteness read any dtype as double
// (exact for every value of every dtype except int64 beyond 2^53, the CPU backend's documented
// limit too), so one strided kernel per index width serves all dtypes; `where` is templated on the
// storage type, since it sits on gradient paths (maximum, minimum, where's backward).
#include "backend/cuda/kernels/common.cuh"

namespace mixprec::cuda::kernels {

namespace {

__device__ __forceinline__ bool compare_value(CompareOp op, double a, double b) {
  switch (op) {
    case CompareOp::equal: return a == b;
    case CompareOp::not_equal: return a != b;
    case CompareOp::less: return a < b;
    case CompareOp::less_equal: return a <= b;
    case CompareOp::greater: return a > b;
    case CompareOp::greater_equal: return a >= b;
  }
  return false;
}

template <typename Index>
__global__ void compare_strided(CompareOp op, DType dtype, Strided<2> plan, const void* a,
                                const void* b, bool* __restrict__ out) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[2];
    offsets_of<Index, 2>(plan, i, off);
    out[i] = compare_value(op, load_as_double(a, dtype, off[0]), load_as_double(b, dtype, off[1]));
  }
}

template <typename T, typename Index>
__global__ void where_strided(Strided<3> plan, const bool* __restrict__ cond,
                              const T* __restrict__ a, const T* __restrict__ b,
                              T* __restrict__ out) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[3];
    offsets_of<Index, 3>(plan, i, off);
    out[i] = cond[off[0]] ? a[off[1]] : b[off[2]];
  }
}

__device__ __forceinline__ bool finite_value(DType dtype, const void* x, std::int64_t i) {
  if (is_integral_dtype(dtype)) return true;
  return isfinite(load_as_double(x, dtype, i));
}

template <typename Index>
__global__ void is_finite_strided(DType dtype, Strided<1> plan, const void* x,
                                  bool* __restrict__ out) {
  const Index n = static_cast<Index>(plan.numel);
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[1];
    offsets_of<Index, 1>(plan, i, off);
    out[i] = finite_value(dtype, x, off[0]);
  }
}

// Any thread that sees a non-finite value clears the flag (a benign race: every writer writes 0).
template <typename Index>
__global__ void all_finite_strided(DType dtype, Strided<1> plan, const void* x, int* flag) {
  const Index n = static_cast<Index>(plan.numel);
  bool finite = true;
  for (Index i = static_cast<Index>(global_thread()); i < n;
       i += static_cast<Index>(grid_threads())) {
    Index off[1];
    offsets_of<Index, 1>(plan, i, off);
    finite = finite && finite_value(dtype, x, off[0]);
  }
  if (__syncthreads_and(finite ? 1 : 0) == 0 && threadIdx.x == 0) *flag = 0;
}

}  // namespace

void compare(CompareOp op, DType dtype, const Strided<2>& plan, const void* a, const void* b,
             bool* out, cudaStream_t s) {
  const unsigned blocks = blocks_for(plan.numel);
  if (plan.index32) {
    compare_strided<std::uint32_t><<<blocks, kThreads, 0, s>>>(op, dtype, plan, a, b, out);
  } else {
    compare_strided<std::int64_t><<<blocks, kThreads, 0, s>>>(op, dtype, plan, a, b, out);
  }
  check_launch("compare");
}

void where(DType dtype, const Strided<3>& plan, const bool* cond, const void* a, const void* b,
           void* out, cudaStream_t s) {
  dispatch_floating(dtype, "where", [&]<typename T>() {
    const T* ap = static_cast<const T*>(a);
    const T* bp = static_cast<const T*>(b);
    T* o = static_cast<T*>(out);
    const unsigned blocks = blocks_for(plan.numel);
    if (plan.index32) {
      where_strided<T, std::uint32_t><<<blocks, kThreads, 0, s>>>(plan, cond, ap, bp, o);
    } else {
      where_strided<T, std::int64_t><<<blocks, kThreads, 0, s>>>(plan, cond, ap, bp, o);
    }
  });
  check_launch("where");
}

void is_finite(DType dtype, const Strided<1>& plan, const void* x, bool* out, cudaStream_t s) {
  const unsigned blocks = blocks_for(plan.numel);
  if (plan.index32) {
    is_finite_strided<std::uint32_t><<<blocks, kThreads, 0, s>>>(dtype, plan, x, out);
  } else {
    is_finite_strided<std::int64_t><<<blocks, kThreads, 0, s>>>(dtype, plan, x, out);
  }
  check_launch("is_finite");
}

void all_finite(DType dtype, const Strided<1>& plan, const void* x, int* flag, cudaStream_t s) {
  const unsigned blocks = blocks_for(plan.numel);
  if (plan.index32) {
    all_finite_strided<std::uint32_t><<<blocks, kThreads, 0, s>>>(dtype, plan, x, flag);
  } else {
    all_finite_strided<std::int64_t><<<blocks, kThreads, 0, s>>>(dtype, plan, x, flag);
  }
  check_launch("all_finite");
}

}  // namespace mixprec::cuda::kernels
