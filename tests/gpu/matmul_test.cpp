// cuBLASLt matmul (cuda::matmul and the matmul op on CUDA tensors) against the CPU backend: shapes
// with odd extents, every transpose combination, transposed and padded views as operands, batches
// with and without broadcasting, float32 results of 16-bit operands, true FP32 by default vs TF32
// on request, float16 accumulation, the descriptor/heuristic cache and the one workspace per
// device.
#include "backend/cuda/matmul.h"

#include <array>
#include <cmath>

#include "backend/cuda/allocator.h"
#include "gpu/op_harness.h"

namespace mixprec::testing {
namespace {

// Positive operands: no cancellation, so the two libraries' summation orders agree to about
// K float32 ulp at worst; float32 is compared at rtol 1e-5 (K <= 130 here) rather than the
// single-op 1.3e-6. 16-bit results are the float32 accumulator rounded once: one 16-bit ulp.
Tolerance matmul_tolerance(DType dtype) {
  return dtype == kFloat32 ? Tolerance{1e-5, 1e-5} : tolerance_for(dtype);
}

Tensor operand(const Shape& shape, DType dtype, std::uint64_t seed) {
  return sample(shape, 0.0, 1.0, dtype, seed);
}

TEST(GpuMatmulTest, ShapesAndTransposesMatchTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<std::array<std::int64_t, 3>> mkn = {{1, 1, 1},     {7, 13, 5},    {64, 64, 64},
                                                        {33, 130, 17}, {128, 8, 256}, {3, 1, 9}};
  for (DType dtype : float_dtypes()) {
    for (const auto& [m, k, n] : mkn) {
      for (Transpose ta : {Transpose::no, Transpose::yes}) {
        for (Transpose tb : {Transpose::no, Transpose::yes}) {
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " m" + std::to_string(m) + " k" +
                       std::to_string(k) + " n" + std::to_string(n) +
                       (ta == Transpose::yes ? " A^T" : "") + (tb == Transpose::yes ? " B^T" : ""));
          const Tensor a = operand(ta == Transpose::no ? Shape{m, k} : Shape{k, m}, dtype, 1);
          const Tensor b = operand(tb == Transpose::no ? Shape{k, n} : Shape{n, k}, dtype, 2);
          const Tensor expected = matmul(a, b, ta, tb);
          EXPECT_TRUE(matches(cuda::matmul(on_gpu(a), on_gpu(b), ta, tb), expected,
                              matmul_tolerance(dtype)));
        }
      }
    }
  }
}

TEST(GpuMatmulTest, ViewsAreUsedAsLayouts) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor big = operand({40, 50}, dtype, 3);
    const Tensor g = on_gpu(big);
    // A padded view (row stride 50 for 30 columns), a transposed view, and a view with gaps in
    // both axes (copied first).
    const Tensor a_cpu = big.slice(0, 2, 22).slice(1, 5, 35);  // (20, 30), row stride 50
    const Tensor a_gpu = g.slice(0, 2, 22).slice(1, 5, 35);
    const Tensor b_cpu = big.slice(0, 0, 30).slice(1, 0, 12);  // (30, 12), row stride 50
    const Tensor b_gpu = g.slice(0, 0, 30).slice(1, 0, 12);
    const Tensor bt_cpu = big.slice(0, 0, 12).slice(1, 0, 30).transpose(0, 1);  // (30, 12)^T view
    const Tensor bt_gpu = g.slice(0, 0, 12).slice(1, 0, 30).transpose(0, 1);
    const Tensor gap_cpu = big.slice(0, 0, 40, 2).slice(1, 0, 50, 2);  // (20, 25), strides (100, 2)
    const Tensor gap_gpu = g.slice(0, 0, 40, 2).slice(1, 0, 50, 2);
    const Tensor bt25_cpu = big.slice(0, 0, 12).slice(1, 0, 25).transpose(0, 1);  // (25, 12)
    const Tensor bt25_gpu = g.slice(0, 0, 12).slice(1, 0, 25).transpose(0, 1);
    const Tolerance tol = matmul_tolerance(dtype);
    EXPECT_TRUE(matches(cuda::matmul(a_gpu, b_gpu, Transpose::no, Transpose::no),
                        matmul(a_cpu.contiguous(), b_cpu.contiguous()), tol));
    EXPECT_TRUE(matches(cuda::matmul(a_gpu, bt_gpu, Transpose::no, Transpose::no),
                        matmul(a_cpu.contiguous(), bt_cpu.contiguous()), tol));
    EXPECT_TRUE(matches(cuda::matmul(gap_gpu, bt25_gpu, Transpose::no, Transpose::no),
                        matmul(gap_cpu.contiguous(), bt25_cpu.contiguous()), tol));
    // The transposed view as A with Transpose::yes: (30, 12)^T -> (12, 30) x (30, 12).
    EXPECT_TRUE(matches(cuda::matmul(bt_gpu, b_gpu, Transpose::yes, Transpose::no),
                        matmul(bt_cpu.contiguous(), b_cpu.contiguous(), Transpose::yes), tol));
  }
}

TEST(GpuMatmulTest, BatchesAndBroadcastBatches) {
  MIXPREC_REQUIRE_GPU();
  struct Case {
    Shape a, b;
  };
  // Equal batches; B broadcast along the batch (stride 0); A broadcast on one of two batch axes
  // (not one stride: materialised); both with size-1 axes.
  const std::vector<Case> cases = {{{3, 8, 6}, {3, 6, 5}},
                                   {{4, 8, 6}, {1, 6, 5}},
                                   {{2, 1, 7, 6}, {2, 3, 6, 4}},
                                   {{1, 3, 5, 6}, {2, 1, 6, 5}}};
  for (DType dtype : float_dtypes()) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + c.a.to_string() + " x " +
                   c.b.to_string());
      const Tensor a = operand(c.a, dtype, 4), b = operand(c.b, dtype, 5);
      EXPECT_TRUE(matches(cuda::matmul(on_gpu(a), on_gpu(b), Transpose::no, Transpose::no),
                          matmul(a, b), matmul_tolerance(dtype)));
      // The same product from transposed copies: op(A^T) op(B^T) with both transposes.
      const Tensor at = a.transpose(-2, -1).contiguous(), bt = b.transpose(-2, -1).contiguous();
      EXPECT_TRUE(matches(cuda::matmul(on_gpu(at), on_gpu(bt), Transpose::yes, Transpose::yes),
                          matmul(a, b), matmul_tolerance(dtype)))
          << "from transposed operands";
    }
  }
}

TEST(GpuMatmulTest, SixteenBitOperandsCanReturnTheFloat32Accumulator) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {kFloat16, kBFloat16}) {
    const Tensor a = operand({17, 40}, dtype, 6), b = operand({40, 9}, dtype, 7);
    const Tensor expected =
        matmul(a.to(kFloat32), b.to(kFloat32));  // exact products of 16-bit values
    const Tensor got = cuda::matmul(on_gpu(a), on_gpu(b), Transpose::no, Transpose::no, kFloat32);
    EXPECT_EQ(got.dtype(), kFloat32);
    EXPECT_TRUE(matches(got, expected, {1e-5, 1e-6}));
  }
}

// Every product is exact and every partial sum is exactly representable in float32, but not in
// TF32's 10-bit significand: true FP32 gives the exact answer; TF32 (when it is used) rounds the
// inputs first.
// x = 1 + 2^-12 needs 13 significand bits: exact in float32 (24), rounded to 1 by TF32 (11). Every
// partial sum k x = k + k 2^-12 (k <= 256) spans at most 2^7 .. 2^-12, 20 bits: exact in float32
// whatever the summation order or split, so true FP32 must give 256 + 2^-4 exactly. (1 + 2^-20,
// the earlier value, does not fit from 17 terms on: 17 x needs 25 bits.)
TEST(GpuMatmulTest, Float32IsTrueFp32UnlessTf32IsEnabled) {
  MIXPREC_REQUIRE_GPU();
  const double x = 1.0 + std::ldexp(1.0, -12);
  const Tensor a = full({256, 256}, x), b = ones({256, 256});
  const bool initial = cuda::tensor_float_32_execution_enabled();
  cuda::enable_tensor_float_32_execution(false);
  const Tensor exact = on_cpu(cuda::matmul(on_gpu(a), on_gpu(b), Transpose::no, Transpose::no));
  const double expected = 256.0 * x;  // 256 + 2^-4, exact in float32
  for (float v : exact.to_vector<float>()) ASSERT_EQ(v, expected);
  cuda::enable_tensor_float_32_execution(true);
  const Tensor tf32 = on_cpu(cuda::matmul(on_gpu(a), on_gpu(b), Transpose::no, Transpose::no));
  cuda::enable_tensor_float_32_execution(initial);
  // TF32 may or may not be chosen by cuBLASLt for this shape: either the exact value, or the one
  // of x rounded to TF32 (1, so 256); nothing else.
  for (float v : tf32.to_vector<float>()) {
    ASSERT_TRUE(v == expected || v == 256.0f) << v;
  }
}

// Operands whose matrices must be copied (gaps in both axes) and whose batch is broadcast through
// a stride-0 axis: describe makes one copy, expanded to the full batch where the copy would have
// no single batch stride.
TEST(GpuMatmulTest, CopiedMatricesOverBroadcastBatches) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {kFloat32, kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor big = operand({1, 1, 16, 24}, dtype, 11);
    const Tensor g = on_gpu(big);
    // (1, 1, 8, 12) with matrix strides (48, 2), broadcast to (2, 5, 8, 12) and to (2, 1, 8, 12)
    // (a stride-0 axis of extent 2).
    const auto gapped = [](const Tensor& t) { return t.slice(2, 0, 16, 2).slice(3, 0, 24, 2); };
    const Tensor b = operand({2, 5, 12, 3}, dtype, 12);
    for (const Shape& batch : {Shape{2, 5, 8, 12}, Shape{2, 1, 8, 12}}) {
      SCOPED_TRACE(batch.to_string());
      const Tensor a_cpu = broadcast_to(gapped(big), batch);
      const Tensor a_gpu = broadcast_to(gapped(g), batch);
      EXPECT_TRUE(matches(cuda::matmul(a_gpu, on_gpu(b), Transpose::no, Transpose::no),
                          matmul(a_cpu.contiguous(), b), matmul_tolerance(dtype)));
    }
  }
}

// Seed 004's table, switch = 0: float16 accumulation is observable. K = 4096 products of
// a = float16(0.1) = 1638 / 16384 and b = 1. With float32 accumulation every partial sum
// k * 1638 / 16384 is exact, so the result is 409.5 exactly (representable in float16, spacing
// 0.25 there). A float16 accumulator, however the tensor cores chunk the products (MMAs add 8-16
// products before rounding to the accumulator), rounds each addition of a non-dyadic chunk sum to
// float16's spacing (0.125 to 0.25 above 128) with a systematic error of the same sign: the sum
// ends many ulps away (a sequential one stalls at 256). 4 ulps (1.0) is the least gap asserted.
// Ones would not do: 4096 exact integers reach 4096 exactly in chunks of 16 (every partial sum a
// multiple of 16 up to 4096 is a float16 number).
TEST(GpuMatmulTest, Float16AccumulationIsSixteenBit) {
  MIXPREC_REQUIRE_GPU();
  const Tensor a = full({16, 4096}, 0.1, {.dtype = kFloat16}),
               b = ones({4096, 16}, {.dtype = kFloat16});
  ASSERT_EQ(a.to_vector<float>()[0], 1638.0f / 16384.0f);
  const Tensor f32 = on_cpu(cuda::matmul(on_gpu(a), on_gpu(b), Transpose::no, Transpose::no,
                                         kFloat16, Accumulation::float32));
  for (float v : f32.to_vector<float>()) ASSERT_EQ(v, 409.5f);
  const Tensor f16 = on_cpu(cuda::matmul(on_gpu(a), on_gpu(b), Transpose::no, Transpose::no,
                                         kFloat16, Accumulation::compute_dtype));
  for (float v : f16.to_vector<float>()) EXPECT_GE(std::fabs(v - 409.5f), 1.0f) << v;
  // bfloat16 has no 16-bit accumulation in cuBLASLt: float32 accumulation, rounded once.
  // bfloat16(0.1) = 205 / 2048: 4096 of them sum exactly in float32 (410) and round once.
  const Tensor ab = full({16, 4096}, 0.1, {.dtype = kBFloat16}),
               bb = ones({4096, 16}, {.dtype = kBFloat16});
  const float one_bf = ab.to_vector<float>()[0];
  const float sum_bf = static_cast<float>(bfloat16(4096.0f * one_bf));
  const Tensor bf = on_cpu(cuda::matmul(on_gpu(ab), on_gpu(bb), Transpose::no, Transpose::no,
                                        kBFloat16, Accumulation::compute_dtype));
  for (float v : bf.to_vector<float>()) ASSERT_EQ(v, sum_bf);
}

TEST(GpuMatmulTest, DescriptorsAndHeuristicsAreCachedPerShape) {
  MIXPREC_REQUIRE_GPU();
  const Tensor a = on_gpu(operand({37, 29}, kFloat32, 8)),
               b = on_gpu(operand({29, 41}, kFloat32, 9));
  cuda::matmul(a, b, Transpose::no, Transpose::no);
  const cuda::MatmulCacheStats before = cuda::matmul_cache_stats();
  for (int i = 0; i < 5; ++i) cuda::matmul(a, b, Transpose::no, Transpose::no);
  const cuda::MatmulCacheStats after = cuda::matmul_cache_stats();
  EXPECT_EQ(after.misses, before.misses);  // no new heuristic query
  EXPECT_EQ(after.hits - before.hits, 5);
  EXPECT_EQ(after.entries, before.entries);
  cuda::matmul(b.transpose(0, 1), a.transpose(0, 1), Transpose::no, Transpose::no);  // new layout
  EXPECT_EQ(cuda::matmul_cache_stats().misses, before.misses + 1);
}

// cuBLASLt's workspace is allocated once per device and reused by every later product, whatever
// its shape, dtype or epilogue.
TEST(GpuMatmulTest, OneWorkspacePerDevice) {
  MIXPREC_REQUIRE_GPU();
  const auto products = [] {
    for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
      for (std::int64_t n : {64, 256, 1024}) {
        const Tensor a = on_gpu(operand({n, 512}, dtype, 13)),
                     b = on_gpu(operand({512, n}, dtype, 14));
        cuda::matmul(a, b, Transpose::no, Transpose::no);
        cuda::matmul_epilogue(a, b, Transpose::no, Transpose::no, dtype, Epilogue::bias_grad);
      }
    }
  };
  products();
  const cuda::MatmulCacheStats first = cuda::matmul_cache_stats();
  EXPECT_LE(first.workspace_allocations, 1);  // one GPU used
  const std::int64_t mallocs = cuda::allocator_stats(kGpu).device_mallocs;
  products();
  cuda::synchronize(kGpu);
  EXPECT_EQ(cuda::matmul_cache_stats().workspace_allocations, first.workspace_allocations);
  EXPECT_EQ(cuda::allocator_stats(kGpu).device_mallocs, mallocs);
}

TEST(GpuMatmulTest, EmptyAndZeroInnerExtent) {
  MIXPREC_REQUIRE_GPU();
  const Tensor a = on_gpu(zeros({4, 0})), b = on_gpu(zeros({0, 3}));
  const Tensor c = cuda::matmul(a, b, Transpose::no, Transpose::no);
  EXPECT_TRUE(matches(c, zeros({4, 3}), {0, 0}));
  EXPECT_EQ(cuda::matmul(on_gpu(zeros({0, 5})), on_gpu(zeros({5, 2})), Transpose::no, Transpose::no)
                .shape(),
            Shape({0, 2}));
}

// The matmul op (autograd, batch folding, broadcasting) on CUDA tensors.
TEST(GpuMatmulTest, TheMatmulOpMatchesTheCpuForwardAndBackward) {
  MIXPREC_REQUIRE_GPU();
  const std::vector<OpCase> cases = {
      {"dense layer",
       [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
       {{{32, 20}, 0, 1}, {{20, 12}, 0, 1}}},
      {"batched activations x weights",
       [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
       {{{3, 8, 20}, 0, 1}, {{20, 12}, 0, 1}}},
      {"A^T B^T",
       [](const std::vector<Tensor>& x) {
         return matmul(x[0], x[1], Transpose::yes, Transpose::yes);
       },
       {{{20, 8}, 0, 1}, {{12, 20}, 0, 1}}},
      {"broadcast batch",
       [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
       {{{2, 3, 5, 6}, 0, 1}, {{3, 6, 4}, 0, 1}}},
  };
  for (const OpCase& c : cases) {
    for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
      SCOPED_TRACE(c.name);
      // expect_same_on_gpu compares at the single-op tolerance; float32 matmuls get rtol 1e-5.
      std::vector<Tensor> cpu_in, gpu_in;
      std::uint64_t seed = 30;
      for (const InputSpec& s : c.inputs) {
        const Tensor x = sample(s.shape, s.lo, s.hi, dtype, seed++);
        Tensor leaf = x.detach();
        leaf.set_requires_grad(true);
        cpu_in.push_back(leaf);
        gpu_in.push_back(on_gpu(x, true));
      }
      const Tensor out_cpu = c.f(cpu_in), out_gpu = c.f(gpu_in);
      ASSERT_TRUE(matches(out_gpu, out_cpu, matmul_tolerance(dtype)));
      const Tensor w = sample(out_cpu.shape(), 0.5, 1.5, dtype, 99);
      const auto g_cpu = grad(out_cpu, cpu_in, w);
      const auto g_gpu = grad(out_gpu, gpu_in, on_gpu(w));
      for (std::size_t k = 0; k < g_cpu.size(); ++k)
        EXPECT_TRUE(matches(g_gpu[k], g_cpu[k], scaled(matmul_tolerance(dtype), 2.0)));
    }
  }
}

}  // namespace
}  // namespace mixprec::testing
