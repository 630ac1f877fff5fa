// scaled_dot_product_attention on CUDA (own flash-attention kernels, cuda/attention.h) against the
// CPU's fused kernels on the same inputs, forward and backward: tensor cores (float16 / bfloat16
// at head dims 16, 64 and 128, GPT-2's causal 64 among them) and the scalar kernels (float32,
// float64, float16 at a head dim of 24), lengths that are not multiples of the blocks, Tq != Tk,
// masks (with a fully masked row), dropout. Also: attention_scores against the CPU's, the backward
// is the same bits on every run, and the fused op's peak memory does not grow as T^2.
//
// Tolerances (tests/gpu/TOLERANCES.md), as tests/ops/attention_test.cpp's fused-vs-reference
// bounds: both sides compute in float32 from the same stored inputs in different orders (the
// tensor cores' own accumulation order among them), so float32 within (2e-5, 2e-6); 16-bit
// outputs are float32 values rounded once on each side: 1x; 16-bit gradients 2x rtol plus 8 u
// max|gradient| (the backward's D = rowsum(dO * O) reads the stored rounded output, which may be
// an ulp apart between the two sides). float64 within (1e-10, 1e-12).
#include "mixprec/attention.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "gpu/gpu_support.h"

namespace mixprec::testing {
namespace {

struct FusionOn {
  FusionOn() { set_attention_fusion(true); }
  ~FusionOn() { set_attention_fusion(std::nullopt); }
};

struct Case {
  std::string name;
  std::int64_t b, tq, tk, h, d, dv;
  bool causal = false;
  // 0 none; 1 (B, Tq, Tk): batch 1 hides its last third of keys, batch 0 query 1 sees no key.
  int mask = 0;
  double dropout = 0.0;
};

Tensor mask_for(const Case& c) {
  if (c.mask == 0) return Tensor();
  std::vector<float> m(static_cast<std::size_t>(c.b * c.tq * c.tk), 1.0f);
  for (std::int64_t b = 0; b < c.b; ++b) {
    for (std::int64_t i = 0; i < c.tq; ++i) {
      for (std::int64_t j = 0; j < c.tk; ++j) {
        if ((b == 1 && j >= c.tk - c.tk / 3) || (b == 0 && i == 1)) {
          m[static_cast<std::size_t>((b * c.tq + i) * c.tk + j)] = 0.0f;
        }
      }
    }
  }
  return greater(from_vector(m, {c.b, c.tq, c.tk}), full({}, 0.5));
}

struct Result {
  Tensor out, dq, dk, dv;
};

// out and the gradients of sum(out * w) for fresh leaves with the values of q, k, v (on their
// device).
Result run(const Tensor& q0, const Tensor& k0, const Tensor& v0, const AttentionOptions& o,
           const Tensor& w) {
  Tensor q = q0.detach(), k = k0.detach(), v = v0.detach();
  q.set_requires_grad(true), k.set_requires_grad(true), v.set_requires_grad(true);
  Result r;
  r.out = scaled_dot_product_attention(q, k, v, o);
  const auto g = grad(sum(mul(cast(r.out, DType::float32), w)), {q, k, v});
  r.dq = g[0], r.dk = g[1], r.dv = g[2];
  return r;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector<double>()) m = std::max(m, std::abs(x));
  return m;
}

void expect_matches(const Case& c, DType dtype) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  FusionOn fused;
  const double u = dtype == DType::float16 ? 0x1p-11 : (dtype == DType::bfloat16 ? 0x1p-8 : 0.0);
  const Tolerance out_tol = dtype == DType::float32   ? Tolerance{2e-5, 2e-6}
                            : dtype == DType::float64 ? Tolerance{1e-10, 1e-12}
                                                      : tolerance_for(dtype);
  const Tolerance grad_tol = u == 0.0 ? out_tol : Tolerance{2 * tolerance_for(dtype).rtol, 0};
  const Tensor q = sample({c.b, c.tq, c.h, c.d}, -2, 2, dtype, 1);
  const Tensor k = sample({c.b, c.tk, c.h, c.d}, -2, 2, dtype, 2);
  const Tensor v = sample({c.b, c.tk, c.h, c.dv}, -1, 1, dtype, 3);
  const Tensor w = sample({c.b, c.tq, c.h, c.dv}, -1, 1, DType::float32, 4);
  AttentionOptions o;
  o.causal = c.causal;
  o.dropout_rate = c.dropout;
  o.training = c.dropout > 0.0;
  o.seed = 99;
  const Tensor mask = mask_for(c);
  o.mask = mask;
  const Result cpu = run(q, k, v, o, w);
  o.mask = mask.defined() ? mask.to(kGpu) : Tensor();
  const Result gpu = run(on_gpu(q), on_gpu(k), on_gpu(v), o, on_gpu(w));
  ASSERT_NE(gpu.out.grad_fn(), nullptr);
  EXPECT_EQ(gpu.out.grad_fn()->name(), "ScaledDotProductAttentionBackward");  // the fused path
  EXPECT_TRUE(matches(gpu.out, cpu.out, out_tol)) << "out";
  const std::pair<const Tensor*, const Tensor*> grads[] = {
      {&gpu.dq, &cpu.dq}, {&gpu.dk, &cpu.dk}, {&gpu.dv, &cpu.dv}};
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    const Tolerance t{grad_tol.rtol, std::max(grad_tol.atol, 8 * u * max_abs(*grads[i].second))};
    EXPECT_TRUE(matches(*grads[i].first, *grads[i].second, t)) << names[i];
  }
}

TEST(GpuAttentionTest, TensorCoreKernelsMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {DType::bfloat16, DType::float16}) {
    expect_matches({"gpt2_causal", 2, 200, 200, 3, 64, 64, true}, dtype);
    expect_matches({"d16_mask_cross", 2, 70, 90, 2, 16, 16, false, 1}, dtype);
    expect_matches({"d128_causal_kv_cache", 1, 37, 130, 2, 128, 128, true}, dtype);
    expect_matches({"d64_dv32_dropout_mask", 2, 65, 65, 2, 64, 32, true, 1, 0.2}, dtype);
  }
}

TEST(GpuAttentionTest, ScalarKernelsMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  expect_matches({"f32_gpt2_causal", 2, 130, 130, 2, 64, 64, true}, DType::float32);
  expect_matches({"f32_mask_dropout", 2, 40, 33, 2, 20, 12, false, 1, 0.3}, DType::float32);
  expect_matches({"f16_d24_causal", 2, 50, 50, 2, 24, 24, true, 1}, DType::float16);
  expect_matches({"f64_small", 2, 9, 13, 2, 5, 3, true, 1, 0.25}, DType::float64);
}

// attention_scores (the composition's probabilities, public CUDA ops: permute, matmul, where,
// softmax) against the CPU's: float32 both sides, a causal Tq != Tk case with a fully masked row.
TEST(GpuAttentionTest, ScoresMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const Case c{"scores_causal_masked", 2, 20, 33, 2, 16, 16, true, 1};
  for (DType dtype : {DType::bfloat16, DType::float32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor q = sample({c.b, c.tq, c.h, c.d}, -2, 2, dtype, 5);
    const Tensor k = sample({c.b, c.tk, c.h, c.d}, -2, 2, dtype, 6);
    AttentionOptions o;
    o.causal = true;
    const Tensor mask = mask_for(c);
    o.mask = mask;
    const Tensor cpu = attention_scores(q, k, o);
    o.mask = mask.to(kGpu);
    const Tensor gpu = attention_scores(on_gpu(q), on_gpu(k), o);
    EXPECT_EQ(gpu.dtype(), DType::float32);
    EXPECT_TRUE(matches(gpu, cpu, Tolerance{2e-5, 2e-6}));
  }
}

TEST(GpuAttentionTest, BackwardIsTheSameBitsOnEveryRun) {
  MIXPREC_REQUIRE_GPU();
  FusionOn fused;
  for (DType dtype : {DType::bfloat16, DType::float32}) {
    const Tensor q = on_gpu(sample({2, 150, 2, 64}, -2, 2, dtype, 1));
    const Tensor k = on_gpu(sample({2, 150, 2, 64}, -2, 2, dtype, 2));
    const Tensor v = on_gpu(sample({2, 150, 2, 64}, -1, 1, dtype, 3));
    const Tensor w = on_gpu(sample({2, 150, 2, 64}, -1, 1, DType::float32, 4));
    const AttentionOptions o{.causal = true, .dropout_rate = 0.1, .training = true, .seed = 5};
    const Result a = run(q, k, v, o, w), b = run(q, k, v, o, w);
    EXPECT_TRUE(all_close(on_cpu(a.out), on_cpu(b.out), {0, 0}));
    EXPECT_TRUE(all_close(on_cpu(a.dq), on_cpu(b.dq), {0, 0}));
    EXPECT_TRUE(all_close(on_cpu(a.dk), on_cpu(b.dk), {0, 0}));
    EXPECT_TRUE(all_close(on_cpu(a.dv), on_cpu(b.dv), {0, 0}));
  }
}

// Peak GPU bytes of a forward and backward at (B, T) with B * T fixed: the fused path holds O(T)
// per head, so the peak stays flat; the composition holds (B, H, T, T) matrices, 4x more at 4x T.
std::int64_t peak_bytes(bool fused, DType dtype, std::int64_t b, std::int64_t t) {
  set_attention_fusion(fused);
  const Tensor q = on_gpu(sample({b, t, 2, 64}, -2, 2, dtype, 1), true);
  const Tensor k = on_gpu(sample({b, t, 2, 64}, -2, 2, dtype, 2), true);
  const Tensor v = on_gpu(sample({b, t, 2, 64}, -1, 1, dtype, 3), true);
  const Tensor w = on_gpu(sample({b, t, 2, 64}, -1, 1, dtype, 4));
  cuda::synchronize();
  reset_peak_memory_stats(kGpu);
  const std::int64_t base = memory_stats(kGpu).current_bytes;
  {
    const Tensor y = scaled_dot_product_attention(q, k, v, {.causal = true});
    const auto g = grad(sum(mul(y, w)), {q, k, v});
    cuda::synchronize();
  }
  set_attention_fusion(std::nullopt);
  return memory_stats(kGpu).peak_bytes - base;
}

TEST(GpuAttentionTest, FusedMemoryDoesNotGrowAsTSquared) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {DType::bfloat16, DType::float32}) {  // tensor cores, scalar kernels
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const std::int64_t fused_short = peak_bytes(true, dtype, 4, 512);
    const std::int64_t fused_long = peak_bytes(true, dtype, 1, 2048);
    EXPECT_LT(static_cast<double>(fused_long), 1.25 * static_cast<double>(fused_short))
        << fused_short << " -> " << fused_long;
    // The measurement sees the quadratic composition (so it can fail).
    const std::int64_t ref_short = peak_bytes(false, dtype, 4, 512);
    const std::int64_t ref_long = peak_bytes(false, dtype, 1, 2048);
    EXPECT_GT(static_cast<double>(ref_long), 2.5 * static_cast<double>(ref_short))
        << ref_short << " -> " << ref_long;
    EXPECT_LT(fused_long * 4, ref_long);
  }
}

}  // namespace
}  // namespace mixprec::testing
