// layer_norm / rms_norm on CUDA (own kernels, cuda/layer_norm.h) against the CPU: y and the
// gradients of x, gamma and beta, for float32, float16, bfloat16 (with float32 parameters, the
// mixed-policy case) and float64; rows wider and narrower than a block; without gamma/beta; a large
// mean (1e4 + noise: the two-pass statistics must not cancel). embedding_lookup on CUDA: the
// gather bit for bit the CPU's, the scatter-add bit for bit the CPU's (the same float sums in
// position order) and the same on every run, out-of-range device ids as NaN rows. The fused
// residual step (ops::add_layer_norm) bit for bit add then layer_norm on the GPU.
//
// Tolerances (tests/gpu/TOLERANCES.md): y 1x (both sides: double row sums, float statistics, the
// same float expression, rounded once; CUDA may contract a multiply-add into an FMA: a float ulp);
// gradients 4x (dx cancels: g - mean(g) - xhat mean(g xhat); dgamma/dbeta are float column sums in
// different run lengths).
#include "mixprec/transformer_ops.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/gpu_support.h"
#include "ops/add_layer_norm.h"

namespace mixprec::testing {
namespace {

enum class Kind { layer, rms };

void expect_matches(Kind kind, const Shape& shape, DType dtype, bool params, double offset) {
  SCOPED_TRACE(shape.to_string() + " " + std::string(dtype_name(dtype)) +
               (kind == Kind::layer ? " layer" : " rms") + (params ? "" : " no parameters") +
               " offset " + std::to_string(offset));
  const std::int64_t c = shape[shape.rank() - 1];
  const DType pd = dtype == DType::float64 ? DType::float64 : DType::float32;
  const Tensor x = sample(shape, offset - 2, offset + 2, dtype, 1);
  std::vector<Tensor> cpu_in = {x.detach()};
  if (params) {
    cpu_in.push_back(sample({c}, 0.5, 1.5, pd, 2));
    if (kind == Kind::layer) cpu_in.push_back(sample({c}, -1, 1, pd, 3));
  }
  std::vector<Tensor> gpu_in;
  for (Tensor& t : cpu_in) {
    gpu_in.push_back(on_gpu(t, true));
    t.set_requires_grad(true);
  }
  auto run = [&](const std::vector<Tensor>& in) {
    const Tensor gamma = in.size() > 1 ? in[1] : Tensor();
    const Tensor beta = in.size() > 2 ? in[2] : Tensor();
    return kind == Kind::layer ? layer_norm(in[0], gamma, beta, 1e-3)
                               : rms_norm(in[0], gamma, 1e-5);
  };
  const Tensor y_cpu = run(cpu_in), y_gpu = run(gpu_in);
  ASSERT_TRUE(matches(y_gpu, y_cpu, tolerance_for(dtype))) << "y";
  const Tensor weighting = sample(shape, 0.5, 1.5, dtype, 99);
  const std::vector<Tensor> g_cpu = grad(y_cpu, cpu_in, weighting);
  const std::vector<Tensor> g_gpu = grad(y_gpu, gpu_in, on_gpu(weighting));
  ASSERT_EQ(g_gpu.size(), cpu_in.size());
  for (std::size_t k = 0; k < cpu_in.size(); ++k) {
    EXPECT_EQ(g_gpu[k].dtype(), cpu_in[k].dtype()) << "gradient " << k;
    EXPECT_TRUE(matches(g_gpu[k], g_cpu[k], scaled(tolerance_for(g_cpu[k].dtype()), 4)))
        << "gradient of input " << k;
  }
}

TEST(GpuLayerNormTest, MatchesTheCpu) {
  MIXPREC_REQUIRE_GPU();
  for (Kind kind : {Kind::layer, Kind::rms}) {
    for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
      expect_matches(kind, {4, 5, 300}, dtype, true, 0.0);
      expect_matches(kind, {33, 24}, dtype, true, 1.0);
      expect_matches(kind, {7, 1}, dtype, true, 0.0);
      expect_matches(kind, {2048, 768}, dtype, true, 0.0);
      expect_matches(kind, {6, 64}, dtype, false, 0.0);
    }
  }
}

TEST(GpuLayerNormTest, LargeMeanKeepsPrecision) {
  MIXPREC_REQUIRE_GPU();
  expect_matches(Kind::layer, {16, 512}, DType::float32, true, 1e4);
}

// The fused residual step (ops::add_layer_norm, add_forward_kernel) against add then layer_norm on
// the GPU: the same bits (the model's fusion switches between them), sum, y and every gradient.
TEST(GpuLayerNormTest, AddLayerNormEqualsAddThenLayerNormBitForBit) {
  MIXPREC_REQUIRE_GPU();
  const auto same_bits = [](const Tensor& got, const Tensor& want) {
    const Tensor g = got.detach().to(Device::cpu()).contiguous();
    const Tensor w = want.detach().to(Device::cpu()).contiguous();
    return g.shape() == w.shape() && g.dtype() == w.dtype() &&
           std::memcmp(g.data_ptr(), w.data_ptr(), g.nbytes()) == 0;
  };
  for (const bool rms : {false, true}) {
    for (DType dtype : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
      for (const Shape& shape : {Shape{4, 5, 300}, Shape{2048, 768}, Shape{7, 1}}) {
        SCOPED_TRACE(shape.to_string() + " " + std::string(dtype_name(dtype)) +
                     (rms ? " rms" : " layer"));
        const std::int64_t c = shape[shape.rank() - 1];
        const DType pd = dtype == DType::float64 ? DType::float64 : DType::float32;
        std::vector<Tensor> results[2];
        for (const bool fused : {true, false}) {
          const Tensor a = on_gpu(sample(shape, -1, 3, dtype, 1), true);
          const Tensor b = on_gpu(sample(shape, -1, 1, dtype, 2), true);
          const Tensor gamma = on_gpu(sample({c}, 0.5, 1.5, pd, 3), true);
          const Tensor beta = on_gpu(sample({c}, -1, 1, pd, 4), true);
          Tensor s, y;
          if (fused) {
            ops::AddNormOutput out = rms ? ops::add_rms_norm(a, b, gamma, 1e-5)
                                         : ops::add_layer_norm(a, b, gamma, beta, 1e-5);
            s = out.sum, y = out.y;
          } else {
            s = add(a, b);
            y = rms ? rms_norm(s, gamma, 1e-5) : layer_norm(s, gamma, beta, 1e-5);
          }
          const Tensor dy = on_gpu(sample(shape, 0.5, 1.5, dtype, 5));
          const Tensor ds = on_gpu(sample(shape, -1, 1, dtype, 6));
          std::vector<Tensor> wrt{a, b, gamma};
          if (!rms) wrt.push_back(beta);
          results[fused ? 0 : 1] = grad(add(sum(mul(y, dy)), sum(mul(s, ds))), wrt);
          results[fused ? 0 : 1].push_back(s);
          results[fused ? 0 : 1].push_back(y);
        }
        ASSERT_EQ(results[0].size(), results[1].size());
        for (std::size_t i = 0; i < results[0].size(); ++i) {
          EXPECT_TRUE(same_bits(results[0][i], results[1][i])) << "result " << i;
        }
      }
    }
  }
}

TEST(GpuEmbeddingTest, GatherAndScatterAddMatchTheCpuBitForBit) {
  MIXPREC_REQUIRE_GPU();
  const std::int64_t vocab = 1000, c = 96, n = 8 * 129;
  std::vector<std::int32_t> ids(n);
  for (std::int64_t i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>((i * 31 + i / 3) % 97);
  const Tensor ids_cpu = from_vector(ids, Shape{8, 129}, {.dtype = DType::int32});
  for (DType out : {DType::float32, DType::float16, DType::bfloat16}) {
    SCOPED_TRACE(dtype_name(out));
    Tensor table = sample({vocab, c}, -1, 1, DType::float32, 5);
    Tensor t_gpu = on_gpu(table, true);
    table.set_requires_grad(true);
    const Tensor y_cpu = embedding_lookup(table, ids_cpu, out);
    const Tensor y_gpu = embedding_lookup(t_gpu, on_gpu(ids_cpu), out);
    ASSERT_TRUE(matches(y_gpu, y_cpu, {0, 0})) << "gather";
    const Tensor w = sample({8, 129, c}, -50, 50, out, 6);
    const Tensor g_cpu = grad(y_cpu, {table}, w)[0];
    const Tensor g_gpu = grad(y_gpu, {t_gpu}, on_gpu(w))[0];
    ASSERT_TRUE(matches(g_gpu, g_cpu, {0, 0})) << "scatter-add";
    const Tensor again = grad(embedding_lookup(t_gpu, on_gpu(ids_cpu), out), {t_gpu}, on_gpu(w))[0];
    EXPECT_TRUE(matches(again, on_cpu(g_gpu), {0, 0})) << "run to run";
  }
}

TEST(GpuEmbeddingTest, OutOfRangeDeviceIdsGiveNanRows) {
  MIXPREC_REQUIRE_GPU();
  const Tensor table = on_gpu(sample({4, 3}, -1, 1, DType::float32, 7));
  const Tensor ids = on_gpu(
      from_vector(std::vector<std::int64_t>{1, 4, -1, 2}, Shape{4}, {.dtype = DType::int64}));
  const auto y = on_cpu(embedding_lookup(table, ids, DType::float32)).to_vector<float>();
  for (int j = 0; j < 3; ++j) {
    EXPECT_FALSE(std::isnan(y[j]));
    EXPECT_TRUE(std::isnan(y[3 + j]));
    EXPECT_TRUE(std::isnan(y[6 + j]));
    EXPECT_FALSE(std::isnan(y[9 + j]));
  }
}

}  // namespace
}  // namespace mixprec::testing
