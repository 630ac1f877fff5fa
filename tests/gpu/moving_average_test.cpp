// ops::moving_average_update on CUDA (kernels/optimizers.cu, a few operands per launch) against
// the CPU loop: the same kernel_math::moving_average_element with every product and sum rounded
// (no contraction on either side), so the results must agree to the bit. Five operands (more than
// one launch's four), sizes from 1 to several grid strides, float32 and float64.
#include "ops/moving_average.h"

#include <string>
#include <vector>

#include "gpu/gpu_support.h"

namespace mixprec::testing {
namespace {

void expect_same_bits(const Tensor& gpu, const Tensor& cpu) {
  const std::vector<double> g = on_cpu(gpu).to_vector<double>(), c = cpu.to_vector<double>();
  ASSERT_EQ(g.size(), c.size());
  for (std::size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], c[i]) << "element " << i;
}

TEST(GpuMovingAverageTest, MatchesTheCpuBitForBit) {
  MIXPREC_REQUIRE_GPU();
  const std::int64_t sizes[] = {1, 2048, 3, 4096 * 256 * 3 + 5, 64};
  for (DType dtype : {DType::float32, DType::float64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    std::vector<Tensor> cpu_moving, gpu_moving;
    std::vector<MovingAverageOperand> cpu_ops, gpu_ops;
    for (int k = 0; k < 5; ++k) {
      const Shape s{sizes[k]};
      const Tensor m = sample(s, -2, 5, dtype, 10 + k), v = sample(s, -3, 3, dtype, 20 + k);
      cpu_moving.push_back(m.detach().to(Device::cpu()) * 1.0);  // a private copy
      gpu_moving.push_back(on_gpu(m));
      const double weight = 0.01 * (k + 1);
      cpu_ops.push_back({cpu_moving.back(), v, weight});
      gpu_ops.push_back({gpu_moving.back(), on_gpu(v), weight});
    }
    ops::moving_average_update("test", cpu_ops, 0.99);
    ops::moving_average_update("test", gpu_ops, 0.99);
    for (int k = 0; k < 5; ++k) expect_same_bits(gpu_moving[k], cpu_moving[k]);
  }
}

TEST(GpuMovingAverageTest, MixedDevicesAreRefused) {
  MIXPREC_REQUIRE_GPU();
  const Tensor c = full(Shape{4}, 1.0), g = on_gpu(c);
  const std::vector<MovingAverageOperand> ops = {{g, g, 0.5}, {c, c, 0.5}};
  EXPECT_THROW(ops::moving_average_update("bn", ops, 0.5), DeviceError);
}

}  // namespace
}  // namespace mixprec::testing
