// The CUDA-vs-CPU harness of the op tests: an op runs on the same inputs on both backends and its
// output, then its input gradients (for a fixed random output gradient), must agree within the
// dtype's tolerance.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gpu/gpu_support.h"
#include "support/summation_bound.h"

namespace mixprec::testing {

struct InputSpec {
  Shape shape;
  double lo = -2.0, hi = 2.0;
  bool integer_valued = false;  // rounded toward zero to integers (ties for comparisons)
};

struct OpCase {
  std::string name;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  std::vector<InputSpec> inputs;
  // Gradients composed of several 16-bit ops round more than once; the two backends' float math
  // differs by a few ulp, which such chains can amplify by a rounding step or two.
  double backward_tolerance_scale = 1.0;
  bool differentiable = true;
  // Gradients that sum over broadcast axes (mul's broadcast operand): the two backends sum the
  // float32 products in different orders (the CPU's fused channel kernel, CUDA's reduce), each
  // rounding once, so they are compared with the float32 summation bound over sum |term| (the op
  // on absolute values in float64) plus the dtype's tolerance.
  bool summed_gradients = false;
};

// Gradient k's float32 summation bound (see OpCase::summed_gradients).
inline ::testing::AssertionResult within_summed_gradient_bound(const OpCase& c,
                                                               const std::vector<Tensor>& cpu_in,
                                                               const Tensor& w, std::size_t k,
                                                               const Tensor& got,
                                                               const Tensor& ref) {
  std::vector<Tensor> absolute;
  for (const Tensor& t : cpu_in) {
    absolute.push_back(abs(t.detach().to(DType::float64)));
    absolute.back().set_requires_grad(true);
  }
  const Tensor y = c.f(absolute);
  const Tensor m = grad(y, absolute, abs(w.to(DType::float64)))[k];
  const double terms = static_cast<double>(y.numel()) / static_cast<double>(m.numel());
  // A gradient that sums nothing (the operand of the output's shape) rounds once on both sides.
  const SummationBound bound{2.0 * terms, 0.0,
                             scaled(tolerance_for(ref.dtype()), c.backward_tolerance_scale)};
  return within_reduction_bound(on_cpu(got), ref, m, bound);
}

inline void expect_same_on_gpu(const OpCase& c, DType dtype) {
  SCOPED_TRACE(c.name + " in " + std::string(dtype_name(dtype)));
  std::vector<Tensor> cpu_in, gpu_in;
  std::uint64_t seed = 17;
  for (const InputSpec& spec : c.inputs) {
    Tensor x = sample(spec.shape, spec.lo, spec.hi, dtype, seed++);
    if (spec.integer_valued) x = x.to(DType::int32).to(dtype);  // on the CPU
    Tensor leaf = x.detach();
    if (c.differentiable) leaf.set_requires_grad(true);
    cpu_in.push_back(leaf);
    gpu_in.push_back(on_gpu(x, c.differentiable));
  }
  const Tensor out_cpu = c.f(cpu_in);
  const Tensor out_gpu = c.f(gpu_in);
  const Tolerance tol = tolerance_for(out_cpu.dtype());
  ASSERT_TRUE(matches(out_gpu, out_cpu, tol)) << "forward";
  if (!c.differentiable) return;
  const Tensor w = sample(out_cpu.shape(), 0.5, 1.5, out_cpu.dtype(), 99);
  const std::vector<Tensor> g_cpu = grad(out_cpu, cpu_in, w);
  const std::vector<Tensor> g_gpu = grad(out_gpu, gpu_in, on_gpu(w));
  ASSERT_EQ(g_cpu.size(), g_gpu.size());
  for (std::size_t k = 0; k < g_cpu.size(); ++k) {
    if (c.summed_gradients) {
      EXPECT_TRUE(matches(g_gpu[k], g_cpu[k], {1e300, 1e300}));  // device, dtype and shape
      EXPECT_TRUE(within_summed_gradient_bound(c, cpu_in, w, k, g_gpu[k], g_cpu[k]))
          << "gradient of input " << k;
      continue;
    }
    EXPECT_TRUE(matches(g_gpu[k], g_cpu[k],
                        scaled(tolerance_for(g_cpu[k].dtype()), c.backward_tolerance_scale)))
        << "gradient of input " << k;
  }
}

inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> all = {DType::float32, DType::float16, DType::bfloat16,
                                         DType::float64};
  return all;
}

}  // namespace mixprec::testing
