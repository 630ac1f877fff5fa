// CPU dropout: each element decided alone from the counter-based hash, filled in parallel.
#include "backend/cpu/dropout.h"

#include "core/counter_hash.h"
#include "core/dispatch.h"
#include "core/scalar.h"
#include "core/tensor_impl.h"

namespace mixprec::cpu {

namespace {

// Elements below which the loop stays on one thread (thread start-up costs more than the ~10
// integer operations per element of the hash).
constexpr std::int64_t kParallelElements = 1 << 15;

}  // namespace

Tensor dropout(const Tensor& x, std::uint64_t base, std::uint64_t threshold, double keep) {
  const Tensor src = x.detach().contiguous();
  Tensor out = core::make_tensor(x.shape(), x.dtype(), x.device());
  core::dispatch_floating(x.dtype(), "dropout", [&]<typename T>() {
    using C = core::compute_t<T>;
    const C kept = static_cast<C>(keep);
    const T* in = static_cast<const T*>(src.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    const std::int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
    for (std::int64_t i = 0; i < n; ++i) {
      const C m = core::counter_keeps(base, static_cast<std::uint64_t>(i), threshold) ? kept : C(0);
      o[i] = core::store_as<T>(core::load_as<C>(in[i]) * m);
    }
  });
  return out;
}

}  // namespace mixprec::cpu
