// SparseCategoricalCrossentropy from logits (the fused op, kernels/sparse_crossentropy_kernels.cuh)
// on CUDA against the CPU: (batch, time, vocab) logits in every floating dtype, a vocabulary
// larger than a warp's stride many times over, ignore_class (some positions, a whole sequence,
// everything), no host wait, and a bad label giving NaN instead of an exception.
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu/gpu_support.h"

namespace mixprec::testing {
namespace {

Tensor token_labels(const Shape& shape, std::int64_t classes, std::uint64_t seed,
                    std::int64_t ignore = -1, int ignore_every = 0) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(shape.numel()));
  std::uint64_t s = seed;
  for (std::size_t i = 0; i < v.size(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<std::int64_t>((s >> 33) % static_cast<std::uint64_t>(classes));
    if (ignore_every > 0 && i % static_cast<std::size_t>(ignore_every) == 0) v[i] = ignore;
  }
  return from_vector(v, shape);
}

TEST(GpuSparseCrossentropyTest, FusedLossAndGradientMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  struct Geometry {
    Shape logits;
    int ignore_every;  // 0: nothing ignored
  };
  const std::vector<Geometry> geometries = {
      {{4, 16, 50257}, 0},  // GPT-2's vocabulary
      {{3, 7, 1000}, 3},    // every third position ignored
      {{2, 5, 33}, 1},      // everything ignored
      {{9, 17}, 0},         // rank 2, fewer classes than a warp
  };
  for (const Geometry& g : geometries) {
    for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
      SCOPED_TRACE(g.logits.to_string() + " " + std::string(dtype_name(dtype)));
      const std::int64_t classes = g.logits[g.logits.rank() - 1];
      const Shape label_shape(std::vector<std::int64_t>(g.logits.begin(), g.logits.end() - 1));
      const Tensor y = token_labels(label_shape, classes, 3, -100, g.ignore_every);
      const losses::SparseCategoricalCrossentropy loss({.from_logits = true, .ignore_class = -100});
      const Tensor x = sample(g.logits, -4.0, 4.0, dtype, 5);
      Tensor xc = x.detach(), xg = on_gpu(x, true);
      xc.set_requires_grad(true);
      const Tensor lc = loss(y, xc), lg = loss(on_gpu(y), xg);
      const DType out = dtype == kFloat64 ? kFloat64 : kFloat32;
      // The loss in float32 (float64): both sides sum exp in their own order (the CPU in float,
      // CUDA in double) with their own exp (expf within 2 ulp): a few float32 ulps per position.
      EXPECT_TRUE(matches(lg, lc, scaled(tolerance_for(out), 4.0)));
      // The gradient, rounded once to the dtype on both sides.
      EXPECT_TRUE(matches(grad(lg, {xg})[0], grad(lc, {xc})[0], tolerance_for(dtype)));
    }
  }
}

TEST(GpuSparseCrossentropyTest, NoHostWaitAndABadLabelIsNaN) {
  MIXPREC_REQUIRE_GPU();
  const losses::SparseCategoricalCrossentropy loss({.from_logits = true});
  const Tensor x = on_gpu(sample({2, 3, 40}, -1.0, 1.0, kFloat16, 7), true);
  const Tensor y = on_gpu(token_labels({2, 3}, 40, 8));
  const std::int64_t before = cuda::host_synchronizations();
  const Tensor l = loss(y, x);
  const Tensor g = grad(l, {x})[0];
  EXPECT_EQ(cuda::host_synchronizations() - before, 0);
  EXPECT_EQ(g.dtype(), kFloat16);
  const Tensor bad = on_gpu(from_vector(std::vector<std::int64_t>{1, 40, 3, 0, 0, 0}, {2, 3}));
  EXPECT_TRUE(std::isnan(on_cpu(loss(bad, x)).to_vector<double>()[0]));
}

}  // namespace
}  // namespace mixprec::testing
