// The CUDA-vs-CPU harness of the op tests: an op runs on the same inputs on both backends and its
// output, then its input gradients (for a fixed random output gradient), must agree within the
// dtype's tolerance.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gpu/gpu_support.h"

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
};

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
