// batch_norm_training / batch_norm_inference: forward and backward against a long-double
// reference written here, float64 finite-difference gradients, the oneDNN path against the
// reference loops, 16-bit against float32 (DESIGN §4), the mixed case (16-bit x, float32
// parameters), numerically hard statistics, autograd details and error messages.
#include "backend/cpu/batch_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/dnnl_context.h"
#include "mixprec/mixprec.h"
#include "mixprec/nn_ops.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

// oneDNN 2.x has its batch-norm jit kernel on AVX-512 CPUs and on some AVX2 ones; on others (seen:
// an AVX2-only AMD EPYC) it offers only its generic kernel, which cpu::batch_norm never takes, so
// the tests of the oneDNN path have nothing to run there and report themselves skipped. Where the
// CPU has AVX-512 the kernel must be there: those machines never skip.
bool onednn_bnorm_jit_missing() {
  if (dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core) return false;
  return cpu::batch_norm_implementation(zeros({64, 32}), cpu::BatchNormImpl::onednn)
             .rfind("oneDNN bnorm_jit", 0) != 0;
}

#define SKIP_WITHOUT_ONEDNN_BNORM_JIT()                                            \
  if (onednn_bnorm_jit_missing()) {                                                \
    GTEST_SKIP() << "oneDNN has no batch-norm jit kernel on this CPU (no AVX-512)" \
                 << ": the loops run every batch norm here";                       \
  }

using cpu::BatchNormImpl;
using testing::all_close;
using testing::check_low_precision;
using testing::expect_error;
using testing::gradcheck;
using testing::Tolerance;

constexpr double kEps = 1e-3;  // Keras' default

Tensor normal(const Shape& shape, std::uint64_t seed, double mean = 0.0, double stddev = 1.0,
              DType dtype = DType::float32) {
  Generator gen(seed);
  return random_normal(shape, mean, stddev, {.dtype = dtype}, gen);
}

Tensor as_tensor(const std::vector<double>& values, const Shape& shape) {
  return from_vector(values, shape, {.dtype = DType::float64});
}

// ---- the reference: straightforward loops in long double over the stored values ----

struct Reference {
  std::vector<double> y, mean, variance;
};

std::int64_t channels(const Tensor& x) { return x.dim(-1); }
std::int64_t rows(const Tensor& x) { return x.numel() / x.dim(-1); }

Reference reference_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            double epsilon, const Tensor& moving_mean = Tensor(),
                            const Tensor& moving_variance = Tensor()) {
  const auto xv = x.to_vector<double>(), g = gamma.to_vector<double>(),
             b = beta.to_vector<double>();
  const std::int64_t c = channels(x), m = rows(x);
  Reference r{std::vector<double>(xv.size()), std::vector<double>(c), std::vector<double>(c)};
  for (std::int64_t j = 0; j < c; ++j) {
    long double mu, var;
    if (moving_mean.defined()) {
      mu = moving_mean.to_vector<double>()[j];
      var = moving_variance.to_vector<double>()[j];
    } else {
      long double s = 0;
      for (std::int64_t i = 0; i < m; ++i) s += xv[i * c + j];
      mu = s / m;
      long double q = 0;
      for (std::int64_t i = 0; i < m; ++i) q += (xv[i * c + j] - mu) * (xv[i * c + j] - mu);
      var = q / m;  // biased
    }
    r.mean[j] = static_cast<double>(mu);
    r.variance[j] = static_cast<double>(var);
    for (std::int64_t i = 0; i < m; ++i) {
      r.y[i * c + j] =
          static_cast<double>((xv[i * c + j] - mu) / std::sqrt(var + epsilon) * g[j] + b[j]);
    }
  }
  return r;
}

struct ReferenceGrads {
  std::vector<double> dx, dgamma, dbeta;
};

// The textbook gradients (batch statistics depend on x in training; constants in inference).
ReferenceGrads reference_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                  const std::vector<double>& mean,
                                  const std::vector<double>& variance, double epsilon,
                                  BatchNormStats stats) {
  const auto xv = x.to_vector<double>(), gv = dy.to_vector<double>(), g = gamma.to_vector<double>();
  const std::int64_t c = channels(x), m = rows(x);
  ReferenceGrads r{std::vector<double>(xv.size()), std::vector<double>(c), std::vector<double>(c)};
  for (std::int64_t j = 0; j < c; ++j) {
    const long double inv = 1.0L / std::sqrt(static_cast<long double>(variance[j]) + epsilon);
    long double sg = 0, sgx = 0;
    for (std::int64_t i = 0; i < m; ++i) {
      sg += gv[i * c + j];
      sgx += gv[i * c + j] * (xv[i * c + j] - mean[j]) * inv;
    }
    r.dbeta[j] = static_cast<double>(sg);
    r.dgamma[j] = static_cast<double>(sgx);
    for (std::int64_t i = 0; i < m; ++i) {
      const long double xhat = (xv[i * c + j] - mean[j]) * inv;
      long double d = gv[i * c + j];
      if (stats == BatchNormStats::batch) d -= sg / m + xhat * sgx / m;
      r.dx[i * c + j] = static_cast<double>(g[j] * inv * d);
    }
  }
  return r;
}

// ---- forward against the reference ----

class BatchNormShapes : public ::testing::TestWithParam<Shape> {};

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  std::string name;
  for (int i = 0; i < info.param.rank(); ++i) {
    if (i > 0) name += 'x';
    name += std::to_string(info.param[i]);
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(BatchNorm, BatchNormShapes,
                         ::testing::Values(Shape{8, 3}, Shape{1, 5}, Shape{4, 32}, Shape{3, 7, 5},
                                           Shape{3, 5, 16}, Shape{2, 5, 4, 6}, Shape{2, 5, 4, 16},
                                           Shape{4, 3, 3, 17}, Shape{2, 16, 16, 32}),
                         shape_name);

TEST_P(BatchNormShapes, TrainingForwardMatchesReference) {
  const Shape shape = GetParam();
  const std::int64_t c = shape[shape.rank() - 1];
  for (DType dtype : {DType::float32, DType::float64}) {
    const Tensor x = normal(shape, 1, 0.5, 2.0, dtype);
    const Tensor gamma = normal({c}, 2, 1.0, 0.5, dtype);
    const Tensor beta = normal({c}, 3, 0.0, 1.0, dtype);
    const auto out = batch_norm_training(x, gamma, beta, kEps);
    const auto ref = reference_forward(x, gamma, beta, kEps);
    EXPECT_EQ(out.y.dtype(), dtype);
    EXPECT_EQ(out.mean.dtype(), dtype);  // float32 for float32 x, float64 for float64 x
    EXPECT_EQ(out.mean.shape(), Shape({c}));
    EXPECT_EQ(out.variance.shape(), Shape({c}));
    const Tolerance tol = dtype == DType::float64 ? Tolerance{1e-12, 1e-12} : Tolerance{1e-5, 1e-5};
    EXPECT_TRUE(all_close(out.y, as_tensor(ref.y, shape), tol)) << dtype_name(dtype);
    EXPECT_TRUE(all_close(out.mean, as_tensor(ref.mean, {c}), tol)) << dtype_name(dtype);
    EXPECT_TRUE(all_close(out.variance, as_tensor(ref.variance, {c}), tol)) << dtype_name(dtype);
    // The reference loops directly (the op above ran oneDNN where it has a kernel for the shape).
    const auto loops = cpu::batch_norm_training(x, gamma, beta, kEps, BatchNormImpl::reference);
    EXPECT_TRUE(all_close(loops.y, as_tensor(ref.y, shape), tol)) << dtype_name(dtype);
    EXPECT_TRUE(all_close(loops.variance, as_tensor(ref.variance, {c}), tol)) << dtype_name(dtype);
  }
}

TEST_P(BatchNormShapes, InferenceForwardMatchesReference) {
  const Shape shape = GetParam();
  const std::int64_t c = shape[shape.rank() - 1];
  for (DType dtype : {DType::float32, DType::float64}) {
    const Tensor x = normal(shape, 4, -1.0, 3.0, dtype);
    const Tensor gamma = normal({c}, 5, 1.0, 0.5, dtype);
    const Tensor beta = normal({c}, 6, 0.0, 1.0, dtype);
    const Tensor mean = normal({c}, 7, -1.0, 0.5, dtype);
    const Tensor variance = random_uniform({c}, 0.5, 9.0, {.dtype = dtype});
    const Tensor y = batch_norm_inference(x, gamma, beta, mean, variance, kEps);
    const auto ref = reference_forward(x, gamma, beta, kEps, mean, variance);
    const Tolerance tol = dtype == DType::float64 ? Tolerance{1e-12, 1e-12} : Tolerance{1e-5, 1e-5};
    EXPECT_EQ(y.dtype(), dtype);
    EXPECT_TRUE(all_close(y, as_tensor(ref.y, shape), tol)) << dtype_name(dtype);
    EXPECT_TRUE(all_close(
        cpu::batch_norm_inference(x, gamma, beta, mean, variance, kEps, BatchNormImpl::reference),
        as_tensor(ref.y, shape), tol))
        << dtype_name(dtype);
  }
}

// The backward of both modes, float32 (oneDNN) and float64 (loops), against the formulas.
TEST_P(BatchNormShapes, BackwardMatchesReference) {
  const Shape shape = GetParam();
  const std::int64_t c = shape[shape.rank() - 1];
  for (DType dtype : {DType::float32, DType::float64}) {
    for (BatchNormStats stats : {BatchNormStats::batch, BatchNormStats::moving}) {
      Tensor x = normal(shape, 8, 0.3, 1.5, dtype).set_requires_grad(true);
      Tensor gamma = normal({c}, 9, 1.0, 0.5, dtype).set_requires_grad(true);
      Tensor beta = normal({c}, 10, 0.0, 1.0, dtype).set_requires_grad(true);
      const Tensor dy = normal(shape, 11, 0.2, 1.0, dtype);
      std::vector<double> mean, variance;
      Tensor y;
      if (stats == BatchNormStats::batch) {
        const auto out = batch_norm_training(x, gamma, beta, kEps);
        y = out.y;
        mean = out.mean.to_vector<double>();
        variance = out.variance.to_vector<double>();
      } else {
        const Tensor mm = normal({c}, 12, 0.0, 0.5, dtype);
        const Tensor mv = random_uniform({c}, 0.5, 2.0, {.dtype = dtype});
        y = batch_norm_inference(x, gamma, beta, mm, mv, kEps);
        mean = mm.to_vector<double>();
        variance = mv.to_vector<double>();
      }
      const auto grads = grad(sum(mul(y, dy)), {x, gamma, beta});
      const auto ref = reference_backward(dy, x, gamma, mean, variance, kEps, stats);
      const Tolerance tol =
          dtype == DType::float64 ? Tolerance{1e-10, 1e-10} : Tolerance{2e-5, 2e-5};
      const std::string what = std::string(dtype_name(dtype)) +
                               (stats == BatchNormStats::batch ? " training" : " inference");
      EXPECT_TRUE(all_close(grads[0], as_tensor(ref.dx, shape), tol)) << what;
      EXPECT_TRUE(all_close(grads[1], as_tensor(ref.dgamma, {c}), tol)) << what;
      EXPECT_TRUE(all_close(grads[2], as_tensor(ref.dbeta, {c}), tol)) << what;
    }
  }
}

// Known values by hand: one channel 1, 2, 3, 4 has mean 2.5 and biased variance 1.25.
TEST(BatchNorm, HandComputedValues) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {4, 1});
  const auto out = batch_norm_training(x, ones({1}), zeros({1}), 1e-5);
  EXPECT_NEAR(out.mean.item(), 2.5, 1e-7);
  EXPECT_NEAR(out.variance.item(), 1.25, 1e-7);
  const auto y = out.y.to_vector<double>();
  const double s = std::sqrt(1.25 + 1e-5);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (i + 1 - 2.5) / s, 1e-6);
}

// Statistics of data far from zero: a float32 E[x^2] - E[x]^2 would lose the variance (x ~ 1000
// + N(0, 1): E[x^2] ~ 1e6, float32 spacing 0.06 there), two passes keep it to ~1e-6.
TEST(BatchNorm, StatisticsOfOffsetDataAreAccurate) {
  SKIP_WITHOUT_ONEDNN_BNORM_JIT();
  const Tensor x = normal({4096, 16}, 13, 1000.0, 1.0);
  const auto ref = reference_forward(x, ones({16}), zeros({16}), kEps);
  ASSERT_EQ(cpu::batch_norm_implementation(x, BatchNormImpl::onednn).rfind("oneDNN", 0), 0u);
  for (BatchNormImpl impl : {BatchNormImpl::automatic, BatchNormImpl::onednn}) {
    const auto out = cpu::batch_norm_training(x, ones({16}), zeros({16}), kEps, impl);
    EXPECT_TRUE(all_close(out.variance, as_tensor(ref.variance, {16}), {1e-4, 0}));
    EXPECT_TRUE(all_close(out.mean, as_tensor(ref.mean, {16}), {1e-6, 0}));
    EXPECT_TRUE(all_close(out.y, as_tensor(ref.y, x.shape()), {1e-3, 1e-3}));
  }
}

// A constant channel has variance 0: y = beta, finite.
TEST(BatchNorm, ConstantChannelGivesBeta) {
  for (std::int64_t c : {2, 16}) {  // oneDNN has a jit kernel for 16
    for (BatchNormImpl impl : {BatchNormImpl::automatic, BatchNormImpl::onednn}) {
      const Tensor x = full({6, c}, 3.0);
      const Tensor beta = normal({c}, 40);
      const auto out = cpu::batch_norm_training(x, full({c}, 2.0), beta, kEps, impl);
      EXPECT_TRUE(all_close(out.variance, zeros({c}), {0, 1e-6}));
      EXPECT_TRUE(all_close(out.y, broadcast_to(beta, {6, c}), {1e-5, 1e-5})) << c;
    }
  }
}

// ---- gradients ----

TEST(BatchNorm, TrainingGradcheck) {
  for (const Shape& shape : {Shape{5, 3}, Shape{2, 3, 2, 4}}) {
    const std::int64_t c = shape[shape.rank() - 1];
    const Tensor x = normal(shape, 14, 0.5, 1.5, DType::float64);
    const Tensor gamma = normal({c}, 15, 1.0, 0.5, DType::float64);
    const Tensor beta = normal({c}, 16, 0.0, 1.0, DType::float64);
    EXPECT_TRUE(gradcheck(
        [](const std::vector<Tensor>& in) {
          return batch_norm_training(in[0], in[1], in[2], kEps).y;
        },
        {x, gamma, beta}))
        << shape.to_string();
  }
}

TEST(BatchNorm, InferenceGradcheck) {
  for (const Shape& shape : {Shape{5, 3}, Shape{2, 3, 2, 4}}) {
    const std::int64_t c = shape[shape.rank() - 1];
    const Tensor x = normal(shape, 17, 0.5, 1.5, DType::float64);
    const Tensor gamma = normal({c}, 18, 1.0, 0.5, DType::float64);
    const Tensor beta = normal({c}, 19, 0.0, 1.0, DType::float64);
    const Tensor mm = normal({c}, 20, 0.0, 1.0, DType::float64);
    const Tensor mv = random_uniform({c}, 0.5, 2.0, {.dtype = DType::float64});
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) {
          return batch_norm_inference(in[0], in[1], in[2], mm, mv, kEps);
        },
        {x, gamma, beta}))
        << shape.to_string();
  }
}

// ---- oneDNN against the reference loops ----

::testing::AssertionResult same_result(const Tensor& a, const Tensor& b, DType dtype) {
  // Both compute in float32 and round once; summation orders differ, and a 16-bit output may
  // round the other way: one unit in the last place of the storage type.
  const Tolerance tol =
      dtype == DType::float32 ? Tolerance{1e-5, 1e-5} : testing::tolerance_for(dtype);
  return all_close(a, b, tol);
}

// The loops run by default; oneDNN runs on request for float32 (and native bfloat16) where it has
// a jit kernel: channel counts that are a multiple of the vector width (16 floats with AVX-512, 8
// with AVX2).
TEST(BatchNorm, OneDnnRunsWhereItHasAJitKernelWhenAsked) {
  SKIP_WITHOUT_ONEDNN_BNORM_JIT();
  constexpr BatchNormImpl kOneDnn = BatchNormImpl::onednn;
  for (const Shape& shape : {Shape{64, 32}, Shape{2, 8, 8, 16}, Shape{3, 5, 7, 48}}) {
    EXPECT_EQ(cpu::batch_norm_implementation(zeros(shape), kOneDnn).rfind("oneDNN bnorm_jit", 0),
              0u)
        << cpu::batch_norm_implementation(zeros(shape), kOneDnn);
    for (BatchNormImpl impl : {BatchNormImpl::automatic, BatchNormImpl::reference}) {
      EXPECT_EQ(cpu::batch_norm_implementation(zeros(shape), impl), "reference loops");
      EXPECT_EQ(cpu::batch_norm_implementation(zeros(shape, {.dtype = DType::bfloat16}), impl),
                "reference loops");
    }
    EXPECT_EQ(cpu::batch_norm_implementation(zeros(shape, {.dtype = DType::float16}), kOneDnn),
              "reference loops");
    EXPECT_EQ(cpu::batch_norm_implementation(zeros(shape, {.dtype = DType::float64}), kOneDnn),
              "reference loops");
    EXPECT_EQ(cpu::batch_norm_implementation(zeros(shape, {.dtype = DType::bfloat16}), kOneDnn)
                      .rfind("oneDNN", 0) == 0,
              cpu::use_native_bf16());
  }
  // Three channels (an RGB input): oneDNN only has a generic kernel, slower than the loops.
  EXPECT_EQ(cpu::batch_norm_implementation(zeros({3, 5, 7, 3}), kOneDnn), "reference loops");
}

TEST(BatchNorm, OneDnnMatchesReferenceLoops) {
  SKIP_WITHOUT_ONEDNN_BNORM_JIT();
  std::vector<DType> dtypes{DType::float32};
  if (cpu::use_native_bf16()) dtypes.push_back(DType::bfloat16);
  for (DType dtype : dtypes) {
    for (const Shape& shape : {Shape{64, 32}, Shape{2, 8, 8, 16}, Shape{3, 5, 7, 48}}) {
      const std::int64_t c = shape[shape.rank() - 1];
      ASSERT_EQ(
          cpu::batch_norm_implementation(zeros(shape, {.dtype = dtype}), BatchNormImpl::onednn)
              .rfind("oneDNN", 0),
          0u);
      const Tensor x = normal(shape, 21, 0.5, 2.0, dtype);
      const Tensor dy = normal(shape, 22, 0.0, 1.0, dtype);
      const Tensor gamma = normal({c}, 23, 1.0, 0.5), beta = normal({c}, 24);
      const Tensor mm = normal({c}, 25), mv = random_uniform({c}, 0.5, 2.0);
      const std::string what = std::string(dtype_name(dtype)) + " " + shape.to_string();

      const auto before = cpu::batch_norm_cache_stats();
      const auto fast = cpu::batch_norm_training(x, gamma, beta, kEps, BatchNormImpl::onednn);
      const auto after = cpu::batch_norm_cache_stats();
      // The automatic path really ran oneDNN (a cache lookup), and not its reference kernel.
      EXPECT_EQ(after.hits + after.misses, before.hits + before.misses + 1) << what;
      EXPECT_EQ(after.reference_implementations, before.reference_implementations) << what;
      const auto slow = cpu::batch_norm_training(x, gamma, beta, kEps, BatchNormImpl::reference);
      EXPECT_TRUE(same_result(fast.y, slow.y, dtype)) << what;
      EXPECT_TRUE(all_close(fast.mean, slow.mean, {1e-6, 1e-6})) << what;
      EXPECT_TRUE(all_close(fast.variance, slow.variance, {1e-5, 1e-6})) << what;

      EXPECT_TRUE(same_result(
          cpu::batch_norm_inference(x, gamma, beta, mm, mv, kEps, BatchNormImpl::onednn),
          cpu::batch_norm_inference(x, gamma, beta, mm, mv, kEps, BatchNormImpl::reference), dtype))
          << what;

      for (BatchNormStats stats : {BatchNormStats::batch, BatchNormStats::moving}) {
        const Tensor& mean = stats == BatchNormStats::batch ? slow.mean : mm;
        const Tensor& var = stats == BatchNormStats::batch ? slow.variance : mv;
        const auto gf =
            cpu::batch_norm_backward(dy, x, gamma, mean, var, kEps, stats, BatchNormImpl::onednn);
        const auto gs = cpu::batch_norm_backward(dy, x, gamma, mean, var, kEps, stats,
                                                 BatchNormImpl::reference);
        // dx in training subtracts two means from dy: allow the float32 cancellation error.
        EXPECT_TRUE(all_close(
            gf.dx, gs.dx,
            dtype == DType::float32 ? Tolerance{1e-4, 1e-5} : testing::tolerance_for(dtype)))
            << what;
        EXPECT_TRUE(all_close(gf.dgamma, gs.dgamma, {1e-4, 1e-4})) << what;
        EXPECT_TRUE(all_close(gf.dbeta, gs.dbeta, {1e-4, 1e-4})) << what;
      }
    }
  }
}

TEST(BatchNorm, PrimitivesAreCachedPerGeometry) {
  const Tensor x = normal({7, 5, 3, 16}, 26);
  const Tensor gamma = ones({16}), beta = zeros({16});
  constexpr BatchNormImpl kOneDnn = BatchNormImpl::onednn;
  // Compiled (or already cached by another test).
  cpu::batch_norm_training(x, gamma, beta, kEps, kOneDnn);
  const auto before = cpu::batch_norm_cache_stats();
  for (int i = 0; i < 3; ++i) cpu::batch_norm_training(x, gamma, beta, kEps, kOneDnn);
  const auto after = cpu::batch_norm_cache_stats();
  EXPECT_EQ(after.hits - before.hits, 3);
  EXPECT_EQ(after.misses, before.misses);
  // The default path (the loops) does not touch the cache.
  cpu::batch_norm_training(x, gamma, beta, kEps);
  EXPECT_EQ(cpu::batch_norm_cache_stats().hits, after.hits);
  // Another epsilon is another primitive.
  cpu::batch_norm_training(x, gamma, beta, 1e-5, kOneDnn);
  EXPECT_EQ(cpu::batch_norm_cache_stats().misses, after.misses + 1);
}

// ---- 16-bit storage ----

// Everything in the 16-bit type (gamma/beta too) against float32 on the same rounded values.
TEST(BatchNorm, LowPrecisionMatchesFloat32) {
  const Shape shape{4, 5, 3, 6};
  const Tensor x = normal(shape, 27, 0.5, 2.0);
  const Tensor gamma = normal({6}, 28, 1.0, 0.5), beta = normal({6}, 29);
  const Tensor mm = normal({6}, 30), mv = random_uniform({6}, 0.5, 2.0);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    EXPECT_TRUE(check_low_precision(
        [](const std::vector<Tensor>& in) {
          return batch_norm_training(in[0], in[1], in[2], kEps).y;
        },
        {x, gamma, beta}, dtype))
        << dtype_name(dtype) << " training";
    EXPECT_TRUE(check_low_precision(
        [](const std::vector<Tensor>& in) {
          return batch_norm_inference(in[0], in[1], in[2], in[3], in[4], kEps);
        },
        {x, gamma, beta, mm, mv}, dtype))
        << dtype_name(dtype) << " inference";
  }
}

// The mixed-policy case: 16-bit x with float32 parameters, against all-float32 on the unrounded
// x (the layer parity of DESIGN §4: 1e-2 for BatchNorm). Gradients of the float32 parameters
// stay float32.
TEST(BatchNorm, MixedPrecisionParity) {
  const Shape shape{8, 6, 6, 5};
  const Tensor x32 = normal(shape, 31, 0.0, 1.0);
  const Tensor dy32 = normal(shape, 32, 0.0, 1.0);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    Tensor gamma = normal({5}, 33, 1.0, 0.2).set_requires_grad(true);
    Tensor beta = normal({5}, 34, 0.0, 0.2).set_requires_grad(true);
    Tensor x = x32.to(dtype).detach().set_requires_grad(true);
    const auto out = batch_norm_training(x, gamma, beta, kEps);
    EXPECT_EQ(out.y.dtype(), dtype);
    EXPECT_EQ(out.mean.dtype(), DType::float32);
    EXPECT_EQ(out.variance.dtype(), DType::float32);
    const auto g = grad(sum(mul(out.y, dy32.to(dtype))), {x, gamma, beta});
    EXPECT_EQ(g[0].dtype(), dtype);
    EXPECT_EQ(g[1].dtype(), DType::float32);
    EXPECT_EQ(g[2].dtype(), DType::float32);

    Tensor x_ref = x32.detach().set_requires_grad(true);
    Tensor gamma_ref = gamma.detach().set_requires_grad(true);
    Tensor beta_ref = beta.detach().set_requires_grad(true);
    const auto ref = batch_norm_training(x_ref, gamma_ref, beta_ref, kEps);
    const auto g_ref = grad(sum(mul(ref.y, dy32)), {x_ref, gamma_ref, beta_ref});
    const Tolerance parity{1e-2, 1e-2};
    const std::string what = dtype_name(dtype).data();
    EXPECT_TRUE(all_close(out.y, ref.y, parity)) << what;
    EXPECT_TRUE(all_close(out.mean, ref.mean, parity)) << what;
    EXPECT_TRUE(all_close(out.variance, ref.variance, parity)) << what;
    // Per-element gradients carry the rounding of x and dy (bf16: 2^-8 relative each).
    EXPECT_TRUE(all_close(g[0], g_ref[0], {2e-2, 2e-2})) << what;
    // Sums over 288 rows: compare with the scale of the sum, not element by element.
    EXPECT_TRUE(all_close(g[1], g_ref[1], {1e-2, 0.5})) << what;
    EXPECT_TRUE(all_close(g[2], g_ref[2], {1e-2, 0.5})) << what;
  }
}

// float16 and bfloat16 without native support run the reference loops; with native bf16 the
// reference loops are still compared against float32 here.
TEST(BatchNorm, ReferenceLoopsIn16BitMatchFloat32) {
  const Shape shape{3, 4, 4, 7};
  const Tensor x32 = normal(shape, 35, 1.0, 2.0);
  const Tensor gamma = normal({7}, 36, 1.0, 0.5), beta = normal({7}, 37);
  for (DType dtype : {DType::float16, DType::bfloat16}) {
    const Tensor x = x32.to(dtype);
    const auto low = cpu::batch_norm_training(x, gamma, beta, kEps, BatchNormImpl::reference);
    const auto ref = reference_forward(x, gamma, beta, kEps);
    EXPECT_EQ(low.y.dtype(), dtype);
    EXPECT_TRUE(all_close(low.y, as_tensor(ref.y, shape).to(dtype), testing::tolerance_for(dtype)))
        << dtype_name(dtype);
    EXPECT_TRUE(all_close(low.variance, as_tensor(ref.variance, {7}), {1e-5, 1e-6}));
  }
}

// Enough elements for the loops to run on several threads (and C = 24: no oneDNN jit kernel), and
// a strided (transposed) x.
TEST(BatchNorm, LargeAndStridedInputs) {
  const Tensor base = normal({8, 24, 16, 24}, 41, 0.5, 2.0);
  const Tensor x = base.transpose(1, 2);  // (8, 16, 24, 24), not contiguous
  ASSERT_FALSE(x.is_contiguous());
  const Tensor gamma = normal({24}, 42, 1.0, 0.5), beta = normal({24}, 43);
  const auto out = batch_norm_training(x, gamma, beta, kEps);
  const auto ref = reference_forward(x, gamma, beta, kEps);
  EXPECT_TRUE(all_close(out.y, as_tensor(ref.y, x.shape()), {1e-5, 1e-5}));
  EXPECT_TRUE(all_close(out.variance, as_tensor(ref.variance, {24}), {1e-5, 1e-6}));
  const Tensor dy = normal(x.shape(), 44);
  const auto g =
      cpu::batch_norm_backward(dy, x, gamma, out.mean, out.variance, kEps, BatchNormStats::batch);
  const auto gref =
      reference_backward(dy, x, gamma, out.mean.to_vector<double>(),
                         out.variance.to_vector<double>(), kEps, BatchNormStats::batch);
  EXPECT_TRUE(all_close(g.dx, as_tensor(gref.dx, x.shape()), {1e-4, 1e-5}));
  EXPECT_TRUE(all_close(g.dgamma, as_tensor(gref.dgamma, {24}), {1e-4, 1e-3}));
  EXPECT_TRUE(all_close(g.dbeta, as_tensor(gref.dbeta, {24}), {1e-4, 1e-3}));
}

// ---- autograd details ----

TEST(BatchNorm, StatisticsAreNotDifferentiable) {
  Tensor x = normal({6, 3}, 38).set_requires_grad(true);
  const auto out = batch_norm_training(x, ones({3}), zeros({3}), kEps);
  EXPECT_TRUE(out.y.requires_grad());
  EXPECT_FALSE(out.mean.requires_grad());
  EXPECT_FALSE(out.variance.requires_grad());
  {
    NoGradScope no_grad;
    EXPECT_FALSE(batch_norm_training(x, ones({3}), zeros({3}), kEps).y.requires_grad());
  }
  // Updating the returned statistics in place (a moving-average update that reuses them) does
  // not change the gradient.
  const Tensor dy = normal({6, 3}, 39);
  const auto ref =
      reference_backward(dy, x, ones({3}), out.mean.to_vector<double>(),
                         out.variance.to_vector<double>(), kEps, BatchNormStats::batch);
  out.mean.assign(full({3}, 100.0));
  out.variance.assign(full({3}, 100.0));
  const auto g = grad(sum(mul(out.y, dy)), {x});
  EXPECT_TRUE(all_close(g[0], as_tensor(ref.dx, {6, 3}), {2e-5, 2e-5}));
}

// ---- errors ----

TEST(BatchNorm, Errors) {
  const Tensor x = zeros({4, 3});
  const Tensor g = ones({3}), b = zeros({3});
  expect_error<ShapeError>([&] { batch_norm_training(x, ones({4}), b, kEps); },
                           {"batch_norm_training", "gamma", "(3,)", "(4, 3)", "(4,)"});
  expect_error<ShapeError>(
      [&] {
        batch_norm_training(x, g, zeros({3, 1}), kEps);
      },
      {"beta", "(3, 1)"});
  expect_error<ShapeError>([&] { batch_norm_training(zeros({3}), g, b, kEps); },
                           {"rank >= 2", "(3,)"});
  expect_error<ValueError>([&] { batch_norm_training(x, g, b, 0.0); }, {"epsilon", "positive"});
  expect_error<ValueError>([&] { batch_norm_training(x, g, b, -1e-3); }, {"epsilon"});
  expect_error<ValueError>([&] { batch_norm_training(x, g, b, std::nan("")); }, {"epsilon"});
  expect_error<ValueError>(
      [&] {
        batch_norm_training(zeros({0, 3}), g, b, kEps);
      },
      {"(0, 3)", "no elements per channel"});
  expect_error<DTypeError>([&] { batch_norm_training(x, g.to(DType::float64), b, kEps); },
                           {"gamma", "float32", "float64"});
  expect_error<DTypeError>(
      [&] { batch_norm_training(x.to(DType::bfloat16), g.to(DType::float16), b, kEps); },
      {"gamma", "float32", "bfloat16", "float16"});
  expect_error<DTypeError>([&] { batch_norm_training(x.to(DType::float64), g, b, kEps); },
                           {"float64"});
  expect_error<DTypeError>(
      [&] {
        batch_norm_training(zeros({4, 3}, {.dtype = DType::int32}), g, b, kEps);
      },
      {"int32"});
  expect_error<ShapeError>([&] { batch_norm_inference(x, g, b, zeros({3}), ones({2}), kEps); },
                           {"batch_norm_inference", "moving_variance", "(3,)", "(2,)"});
  expect_error<DTypeError>(
      [&] {
        batch_norm_inference(x, g, b, zeros({3}, {.dtype = DType::float16}), ones({3}), kEps);
      },
      {"moving_mean", "float16"});
  expect_error<ValueError>(
      [&] { batch_norm_inference(x, g, Tensor(), zeros({3}), ones({3}), kEps); },
      {"beta", "undefined"});
}

// Inference on an empty batch is fine (nothing to normalize).
TEST(BatchNorm, InferenceOnEmptyBatch) {
  const Tensor y =
      batch_norm_inference(zeros({0, 3}), ones({3}), zeros({3}), zeros({3}), ones({3}), kEps);
  EXPECT_EQ(y.shape(), Shape({0, 3}));
}

}  // namespace
}  // namespace mixprec
