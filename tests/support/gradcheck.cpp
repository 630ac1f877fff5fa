#include "support/gradcheck.h"

#include <cmath>
#include <sstream>

namespace mixprec::testing {

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::float16: return {1e-3, 1e-5};
    case DType::bfloat16: return {1.6e-2, 1e-5};
    case DType::float32: return {1.3e-6, 1e-5};
    case DType::float64: return {1e-7, 1e-7};
    default: return {0.0, 0.0};
  }
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tolerance tol) {
  if (!actual.defined() || !expected.defined()) {
    return ::testing::AssertionFailure() << "undefined tensor";
  }
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shape " << actual.shape().to_string() << " vs expected "
                                         << expected.shape().to_string();
  }
  const auto a = actual.to_vector<double>();
  const auto e = expected.to_vector<double>();
  std::size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    bool ok;
    if (std::isnan(e[i]) || std::isnan(a[i])) ok = std::isnan(e[i]) && std::isnan(a[i]);
    else if (std::isinf(e[i]) || std::isinf(a[i])) ok = a[i] == e[i];
    else ok = std::abs(a[i] - e[i]) <= tol.atol + tol.rtol * std::abs(e[i]);
    if (!ok) {
      ++bad;
      const double excess = std::abs(a[i] - e[i]) - tol.rtol * std::abs(e[i]);
      if (excess > worst_excess || std::isnan(excess)) worst_excess = excess, worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << a.size() << " elements differ (rtol " << tol.rtol << ", atol " << tol.atol
         << "); worst at flat index " << worst << ": " << a[worst] << " vs expected " << e[worst];
}

namespace {

Tensor weighted(const Tensor& out, const Tensor& weights) { return sum(mul(out, weights)); }

Tensor weights_for(const Tensor& out, std::uint64_t seed) {
  Generator gen(seed);
  return random_uniform(out.shape(), 0.5, 1.5, {.dtype = out.dtype()}, gen);
}

}  // namespace

::testing::AssertionResult gradcheck(const OpFn& f, const std::vector<Tensor>& inputs, GradcheckOptions options) {
  std::vector<Tensor> leaves;
  for (const Tensor& x : inputs) {
    if (x.dtype() != DType::float64) return ::testing::AssertionFailure() << "gradcheck needs float64 inputs";
    Tensor leaf = x.detach().contiguous().detach();
    leaf.set_requires_grad(true);
    leaves.push_back(leaf);
  }
  const Tensor out = f(leaves);
  if (!out.requires_grad()) return ::testing::AssertionFailure() << "output does not require grad";
  const Tensor w = weights_for(out, 1234);
  const std::vector<Tensor> analytic = grad(weighted(out, w), leaves);

  for (std::size_t k = 0; k < leaves.size(); ++k) {
    std::vector<double> numeric(static_cast<std::size_t>(leaves[k].numel()));
    for (std::int64_t i = 0; i < leaves[k].numel(); ++i) {
      double* p = leaves[k].data<double>() + i;
      const double saved = *p;
      NoGradScope no_grad;
      *p = saved + options.eps;
      const double plus = weighted(f(leaves), w).item();
      *p = saved - options.eps;
      const double minus = weighted(f(leaves), w).item();
      *p = saved;
      numeric[static_cast<std::size_t>(i)] = (plus - minus) / (2 * options.eps);
    }
    const Tensor expected = from_vector(numeric, leaves[k].shape(), {.dtype = DType::float64});
    auto r = all_close(analytic[k], expected, {options.rtol, options.atol});
    if (!r) return ::testing::AssertionFailure() << "gradient of input " << k << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_low_precision(const OpFn& f, const std::vector<Tensor>& inputs, DType dtype,
                                               double tolerance_scale) {
  std::vector<Tensor> low, ref;
  for (const Tensor& x : inputs) {
    const bool floating = is_floating(x.dtype());
    Tensor l = floating ? x.detach().to(dtype).detach() : x;
    Tensor r = floating ? l.to(DType::float32).detach() : x;  // the same rounded values, in float32
    if (floating) {
      l.set_requires_grad(true);
      r.set_requires_grad(true);
    }
    low.push_back(l);
    ref.push_back(r);
  }
  const Tensor out_low = f(low);
  const Tensor out_ref = f(ref);
  if (out_low.dtype() != dtype) {
    return ::testing::AssertionFailure() << "output dtype " << dtype_name(out_low.dtype()) << ", expected "
                                         << dtype_name(dtype);
  }
  Tolerance tol = tolerance_for(dtype);
  tol.rtol *= tolerance_scale;
  tol.atol *= tolerance_scale;
  // The reference is rounded to the storage dtype once, as the 16-bit op's own output is.
  auto r = all_close(out_low, out_ref.detach().to(dtype), tol);
  if (!r) return ::testing::AssertionFailure() << "forward: " << r.message();
  if (!out_low.requires_grad()) return ::testing::AssertionSuccess();
  const Tensor w32 = weights_for(out_ref, 99);
  const auto g_low = grad(weighted(out_low, w32.to(dtype)), low);
  const auto g_ref = grad(weighted(out_ref, w32.to(dtype).to(DType::float32)), ref);
  for (std::size_t k = 0; k < low.size(); ++k) {
    auto rg = all_close(g_low[k], g_ref[k].to(dtype), tol);
    if (!rg) return ::testing::AssertionFailure() << "gradient of input " << k << ": " << rg.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mixprec::testing
