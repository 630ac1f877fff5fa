// cpu::unscale_and_check (the loss-scaling pass): every element equals float(double(g) / scale)
// computed here, and the finiteness verdict is right wherever a bad value sits (vector body,
// tail, block boundaries), for the float32 fast path and the 16-bit generic path, with a scale that
// is not a power of two too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/optimizer_kernels.h"
#include "core/tensor_impl.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

std::vector<float> values(std::int64_t n) {
  Generator gen(5);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = static_cast<float>(gen.normal() * 1e4);
  return v;
}

void expect_unscaled(const std::vector<float>& g, double scale, DType dtype, bool finite) {
  const auto n = static_cast<std::int64_t>(g.size());
  const Tensor grad = from_vector(g, Shape{n}).to(dtype);
  Tensor out = core::make_tensor(Shape{n}, DType::float32, Device::cpu());
  EXPECT_EQ(cpu::unscale_and_check(grad, scale, out), finite) << "n " << n << " scale " << scale;
  const std::vector<float> stored = grad.to_vector<float>();
  const std::vector<float> got = out.to_vector<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(static_cast<double>(stored[i]) / scale);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[i])) << i;
    } else {
      ASSERT_EQ(got[i], want) << "element " << i << " of " << n << ", scale " << scale;
    }
  }
}

TEST(UnscaleAndCheck, ValuesMatchDivisionInDouble) {
  for (std::int64_t n : {1, 7, 8, 9, 1000, (1 << 14) + 3, 70001}) {
    for (double scale : {32768.0, 1.0, 1000.0}) {
      expect_unscaled(values(n), scale, DType::float32, true);
    }
  }
  expect_unscaled(values(5001), 32768.0, DType::float16, true);
  expect_unscaled(values(5001), 3.0, DType::bfloat16, true);
}

TEST(UnscaleAndCheck, FindsInfAndNaNAnywhere) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::int64_t n = 3 * (1 << 14) + 5;
  for (std::int64_t at : {std::int64_t{0}, std::int64_t{5}, std::int64_t{(1 << 14) - 1},
                          std::int64_t{1 << 14}, n - 3, n - 1}) {
    for (float bad : {inf, -inf, nan}) {
      std::vector<float> g = values(n);
      g[static_cast<std::size_t>(at)] = bad;
      expect_unscaled(g, 32768.0, DType::float32, false);
    }
  }
  // A finite gradient that overflows when unscaled by a scale below 1 is non-finite too.
  std::vector<float> g = values(100);
  g[40] = 3e38f;
  expect_unscaled(g, 0.5, DType::float32, false);
}

}  // namespace
}  // namespace mixprec
