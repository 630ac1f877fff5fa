// scaled_dot_product_attention: the reference composition checked by finite differences in
// float64 and against a hand-computed case; the fused CPU kernel against the reference, forward
// and backward, in float32, float16 and bfloat16, with causal and padding masks, Tq != Tk, lengths
// that are not multiples of the 64-wide blocks, Dv != D, dropout and fully masked rows; its
// backward's memory not growing as T^2; attention_scores against the reference; the argument
// errors.
//
// Bound of fused vs reference: both compute in float32 from the same inputs, in different orders
// (blocked online softmax against one softmax; 16-wide partial sums against oneDNN's products),
// so results differ by a few float32 roundings of sums of |terms| of order 1: float32 within
// (rtol 2e-5, atol 2e-6). 16-bit outputs are the float32 values rounded once, by both paths, so
// they agree within one unit in the last place: DESIGN §4's tolerance of the dtype. The 16-bit
// gradients get twice that relative bound plus a normwise one: the fused backward's
// Dr = rowsum(dO * O) reads the stored, rounded output (as FlashAttention does; the float32 O is
// never kept), so dS = P (dP - Dr) carries an error of P |dO| |O| u (u the dtype's unit roundoff)
// that cancellation in dP - Dr does not shrink: dq and dk are off by up to a few u times the
// size of their largest elements, not of each element. 8 u max|gradient| bounds it.
#include "mixprec/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::expect_error;
using testing::gradcheck;
using testing::Tolerance;
using testing::tolerance_for;

Tensor random(const Shape& shape, DType dtype, std::uint64_t seed, double stddev = 1.0) {
  Generator gen(seed);
  return random_normal(shape, 0.0, stddev, {.dtype = dtype}, gen);
}

// Restores the fusion switch on scope exit.
struct FusionOverride {
  explicit FusionOverride(bool on) { set_attention_fusion(on); }
  ~FusionOverride() { set_attention_fusion(std::nullopt); }
};

struct Result {
  Tensor out, dq, dk, dv;
};

using AttentionFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&,
                               const AttentionOptions&);

// out and the gradients of sum(out * w) for fresh leaves with the values of q, k, v.
Result run(AttentionFn f, const Tensor& q0, const Tensor& k0, const Tensor& v0,
           const AttentionOptions& o, const Tensor& w) {
  Tensor q = q0.detach(), k = k0.detach(), v = v0.detach();
  q.set_requires_grad(true), k.set_requires_grad(true), v.set_requires_grad(true);
  Result r;
  r.out = f(q, k, v, o);
  const auto g = grad(sum(mul(cast(r.out, DType::float32), w)), {q, k, v});
  r.dq = g[0], r.dk = g[1], r.dv = g[2];
  return r;
}

struct Case {
  std::string name;
  std::int64_t b, tq, tk, h, d, dv;
  bool causal = false;
  // mask: 0 none, 1 padding (B, Tq, Tk) hiding the last keys of batch 1, 2 random (B, H, Tq, Tk),
  // 3 (B, Tq, Tk) that hides every key of query 1 (a fully masked row).
  int mask = 0;
  double dropout = 0.0;
};

Tensor make_mask(const Case& c) {
  if (c.mask == 0) return Tensor();
  if (c.mask == 2) {
    Generator gen(77);
    const Tensor u = random_uniform({c.b, c.h, c.tq, c.tk}, 0.0, 1.0, {}, gen);
    return greater(u, full({}, 0.3));
  }
  std::vector<float> m(static_cast<std::size_t>(c.b * c.tq * c.tk), 1.0f);
  for (std::int64_t b = 0; b < c.b; ++b) {
    for (std::int64_t i = 0; i < c.tq; ++i) {
      for (std::int64_t j = 0; j < c.tk; ++j) {
        const bool hide = c.mask == 1 ? (b == 1 && j >= c.tk - c.tk / 3) : (i == 1);
        if (hide) m[static_cast<std::size_t>((b * c.tq + i) * c.tk + j)] = 0.0f;
      }
    }
  }
  return greater(from_vector(m, {c.b, c.tq, c.tk}), full({}, 0.5));
}

AttentionOptions options_for(const Case& c) {
  AttentionOptions o;
  o.causal = c.causal;
  o.mask = make_mask(c);
  o.dropout_rate = c.dropout;
  o.training = c.dropout > 0.0;
  o.seed = 1234;
  return o;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector<double>()) m = std::max(m, std::abs(x));
  return m;
}

// Outputs within out_tol; gradients within grad_tol, whose atol is `grad_norm_atol` times the
// largest |expected| of the tensor (the normwise part of the bound, see the file comment).
::testing::AssertionResult same_results(const Result& a, const Result& b, Tolerance out_tol,
                                        Tolerance grad_tol, double grad_norm_atol) {
  auto r = all_close(a.out, b.out, out_tol);
  if (!r) return r << " (output)";
  const std::pair<const Tensor*, const Tensor*> grads[] = {
      {&a.dq, &b.dq}, {&a.dk, &b.dk}, {&a.dv, &b.dv}};
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    const Tolerance t{grad_tol.rtol,
                      std::max(grad_tol.atol, grad_norm_atol * max_abs(*grads[i].second))};
    r = all_close(*grads[i].first, *grads[i].second, t);
    if (!r) return r << " (" << names[i] << ")";
  }
  return ::testing::AssertionSuccess();
}

std::vector<Case> fused_cases() {
  return {
      {"plain", 2, 5, 5, 2, 4, 4},
      {"causal", 2, 7, 7, 2, 8, 8, true},
      {"causal_kv_cache", 1, 3, 9, 2, 8, 8, true},
      {"cross_tq_lt_tk", 2, 6, 11, 3, 5, 7},
      {"long_not_block_multiple", 1, 130, 150, 2, 16, 16},
      {"long_causal", 2, 135, 135, 1, 24, 8, true},
      {"dv_ne_d", 2, 9, 13, 2, 12, 20},
      {"padding_mask", 2, 10, 10, 2, 8, 8, false, 1},
      {"random_mask_causal", 2, 70, 70, 2, 8, 8, true, 2},
      {"fully_masked_row", 2, 6, 8, 2, 8, 8, false, 3},
      {"dropout", 2, 66, 66, 2, 8, 8, false, 0, 0.25},
      {"dropout_causal_mask", 2, 20, 20, 2, 8, 8, true, 1, 0.5},
  };
}

class FusedVsReference : public ::testing::TestWithParam<DType> {};

INSTANTIATE_TEST_SUITE_P(Attention, FusedVsReference,
                         ::testing::Values(DType::float32, DType::float16, DType::bfloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST_P(FusedVsReference, ForwardAndBackwardAgreeOnEveryCase) {
  const DType dtype = GetParam();
  const Tolerance out_tol = dtype == DType::float32 ? Tolerance{2e-5, 2e-6} : tolerance_for(dtype);
  const Tolerance grad_tol =
      dtype == DType::float32 ? Tolerance{2e-5, 2e-6} : Tolerance{2 * tolerance_for(dtype).rtol, 0};
  // 16-bit: the unit roundoff u of the dtype times 8, times max |gradient| (see the file comment).
  const double grad_norm_atol =
      dtype == DType::float16 ? 8 * 0x1p-11 : (dtype == DType::bfloat16 ? 8 * 0x1p-8 : 0.0);
  FusionOverride fused(true);
  std::uint64_t seed = 10;
  for (const Case& c : fused_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor q = random({c.b, c.tq, c.h, c.d}, dtype, ++seed);
    const Tensor k = random({c.b, c.tk, c.h, c.d}, dtype, ++seed);
    const Tensor v = random({c.b, c.tk, c.h, c.dv}, dtype, ++seed);
    const Tensor w = random({c.b, c.tq, c.h, c.dv}, DType::float32, ++seed);
    const AttentionOptions o = options_for(c);
    const Result f = run(scaled_dot_product_attention, q, k, v, o, w);
    const Result r = run(attention_reference, q, k, v, o, w);
    EXPECT_EQ(f.out.dtype(), dtype);
    EXPECT_EQ(f.out.shape(), Shape({c.b, c.tq, c.h, c.dv}));
    ASSERT_NE(f.out.grad_fn(), nullptr);
    EXPECT_EQ(f.out.grad_fn()->name(), "ScaledDotProductAttentionBackward");
    EXPECT_TRUE(same_results(f, r, out_tol, grad_tol, grad_norm_atol));
  }
}

TEST(Attention, ReferenceGradcheckFloat64) {
  for (const Case& c : std::vector<Case>{{"plain", 2, 3, 4, 2, 3, 2},
                                         {"causal", 1, 4, 4, 2, 3, 3, true},
                                         {"kv_cache_masked", 2, 2, 5, 1, 2, 3, true, 1}}) {
    SCOPED_TRACE(c.name);
    const AttentionOptions o = options_for(c);
    const auto f = [&](const std::vector<Tensor>& in) {
      return attention_reference(in[0], in[1], in[2], o);
    };
    EXPECT_TRUE(gradcheck(f, {random({c.b, c.tq, c.h, c.d}, DType::float64, 1),
                              random({c.b, c.tk, c.h, c.d}, DType::float64, 2),
                              random({c.b, c.tk, c.h, c.dv}, DType::float64, 3)}));
  }
}

TEST(Attention, FusedGradcheckFloat64) {
  FusionOverride fused(true);
  const Case c{"masked_causal_dropout", 2, 3, 5, 2, 3, 2, true, 1, 0.3};
  const AttentionOptions o = options_for(c);
  const auto f = [&](const std::vector<Tensor>& in) {
    return scaled_dot_product_attention(in[0], in[1], in[2], o);
  };
  EXPECT_TRUE(gradcheck(f, {random({c.b, c.tq, c.h, c.d}, DType::float64, 4),
                            random({c.b, c.tk, c.h, c.d}, DType::float64, 5),
                            random({c.b, c.tk, c.h, c.dv}, DType::float64, 6)}));
}

TEST(Attention, ReferenceMatchesAHandComputedCausalCase) {
  // B = H = 1, Tq = Tk = 2, D = Dv = 1, scale 1: q = (1, 2), k = (0, 1), v = (10, 20).
  // Query 0 sees key 0 only: 10. Query 1 sees both with scores (0, 2): softmax (1, e^2) / (1 +
  // e^2).
  const Tensor q = from_vector(std::vector<double>{1, 2}, {1, 2, 1, 1}, {.dtype = DType::float64});
  const Tensor k = from_vector(std::vector<double>{0, 1}, {1, 2, 1, 1}, {.dtype = DType::float64});
  const Tensor v =
      from_vector(std::vector<double>{10, 20}, {1, 2, 1, 1}, {.dtype = DType::float64});
  const double e2 = std::exp(2.0);
  const std::vector<double> want{10.0, (10.0 + 20.0 * e2) / (1.0 + e2)};
  for (AttentionFn f : {attention_reference, scaled_dot_product_attention}) {
    const auto got = f(q, k, v, {.scale = 1.0, .causal = true}).to_vector<double>();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_NEAR(got[0], want[0], 1e-12);
    EXPECT_NEAR(got[1], want[1], 1e-12);
  }
  // Tq = 1 over Tk = 2 (a decoding step): the bottom-right alignment lets the query see both keys.
  const Tensor q1 = from_vector(std::vector<double>{2}, {1, 1, 1, 1}, {.dtype = DType::float64});
  for (AttentionFn f : {attention_reference, scaled_dot_product_attention}) {
    EXPECT_NEAR(f(q1, k, v, {.scale = 1.0, .causal = true}).item(), want[1], 1e-12);
  }
}

TEST(Attention, FullyMaskedRowGivesZerosAndNoGradient) {
  FusionOverride fused(true);
  const Case c{"fully_masked_row", 1, 4, 5, 2, 4, 3, false, 3};
  const AttentionOptions o = options_for(c);
  for (AttentionFn f : {attention_reference, scaled_dot_product_attention}) {
    const Result r =
        run(f, random({1, 4, 2, 4}, DType::float32, 1), random({1, 5, 2, 4}, DType::float32, 2),
            random({1, 5, 2, 3}, DType::float32, 3), o, random({1, 4, 2, 3}, DType::float32, 4));
    const Tensor row = r.out.slice(1, 1, 2);
    EXPECT_TRUE(all_close(row, zeros_like(row), {0, 0}));
    const Tensor drow = r.dq.slice(1, 1, 2);
    EXPECT_TRUE(all_close(drow, zeros_like(drow), {0, 0}));
    EXPECT_TRUE(all_finite(r.out) && all_finite(r.dk) && all_finite(r.dv));
  }
}

TEST(Attention, DropoutDependsOnTheSeedAndOnlyInTraining) {
  FusionOverride fused(true);
  const Tensor q = random({1, 16, 2, 8}, DType::float32, 1);
  const Tensor k = random({1, 16, 2, 8}, DType::float32, 2);
  const Tensor v = random({1, 16, 2, 8}, DType::float32, 3);
  const AttentionOptions a{.dropout_rate = 0.5, .training = true, .seed = 1};
  AttentionOptions b = a;
  b.seed = 2;
  AttentionOptions inference = a;
  inference.training = false;
  const Tensor ya = scaled_dot_product_attention(q, k, v, a);
  EXPECT_TRUE(all_close(ya, scaled_dot_product_attention(q, k, v, a), {0, 0}));
  EXPECT_FALSE(all_close(ya, scaled_dot_product_attention(q, k, v, b), {1e-3, 1e-3}));
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, k, v, inference),
                        scaled_dot_product_attention(q, k, v, {}), {0, 0}));
}

TEST(Attention, FusionSwitchSelectsTheComposition) {
  const Tensor q = random({1, 3, 1, 4}, DType::float32, 1).set_requires_grad(true);
  {
    FusionOverride off(false);
    const Tensor y = scaled_dot_product_attention(q, q, q);
    ASSERT_NE(y.grad_fn(), nullptr);
    EXPECT_NE(y.grad_fn()->name(), "ScaledDotProductAttentionBackward");
  }
  FusionOverride on(true);
  EXPECT_EQ(scaled_dot_product_attention(q, q, q).grad_fn()->name(),
            "ScaledDotProductAttentionBackward");
}

// Peak bytes of a forward and backward at (B, T) with B * T fixed: the fused path holds O(T) per
// head, so the peak stays flat; the composition holds (B, H, T, T) matrices, 4x more at 4x T.
std::int64_t peak_bytes(AttentionFn f, std::int64_t b, std::int64_t t) {
  const Tensor q = random({b, t, 2, 16}, DType::float32, 1).set_requires_grad(true);
  const Tensor k = random({b, t, 2, 16}, DType::float32, 2).set_requires_grad(true);
  const Tensor v = random({b, t, 2, 16}, DType::float32, 3).set_requires_grad(true);
  const Tensor w = random({b, t, 2, 16}, DType::float32, 4);
  reset_peak_memory_stats();
  const std::int64_t base = memory_stats().current_bytes;
  {
    const Tensor y = f(q, k, v, {.causal = true});
    const auto g = grad(sum(mul(y, w)), {q, k, v});
  }
  return memory_stats().peak_bytes - base;
}

TEST(Attention, FusedBackwardMemoryDoesNotGrowAsTSquared) {
  FusionOverride fused(true);
  const std::int64_t fused_short = peak_bytes(scaled_dot_product_attention, 4, 256);
  const std::int64_t fused_long = peak_bytes(scaled_dot_product_attention, 1, 1024);
  EXPECT_LT(static_cast<double>(fused_long), 1.25 * static_cast<double>(fused_short))
      << fused_short << " -> " << fused_long;
  // The measurement sees the quadratic composition (so it can fail).
  const std::int64_t ref_short = peak_bytes(attention_reference, 4, 256);
  const std::int64_t ref_long = peak_bytes(attention_reference, 1, 1024);
  EXPECT_GT(static_cast<double>(ref_long), 2.5 * static_cast<double>(ref_short))
      << ref_short << " -> " << ref_long;
  EXPECT_LT(fused_long * 4, ref_long);
}

// attention_scores is the probabilities the output is made of: scores x v (permuted) is the
// reference's output, the masked entries and fully masked rows are 0, the rest of each row sums to
// 1; dropout is ignored (no key drawn); float32 for 16-bit inputs.
TEST(Attention, ScoresAreTheProbabilitiesOfTheOutput) {
  for (const Case& c :
       std::vector<Case>{{"causal_kv_cache", 2, 3, 6, 2, 4, 3, true},
                         {"padding_mask", 2, 5, 5, 2, 4, 3, false, 1},
                         {"fully_masked_row_dropout", 1, 4, 5, 2, 4, 3, true, 3, 0.5}}) {
    SCOPED_TRACE(c.name);
    const Tensor q = random({c.b, c.tq, c.h, c.d}, DType::float64, 11);
    const Tensor k = random({c.b, c.tk, c.h, c.d}, DType::float64, 12);
    const Tensor v = random({c.b, c.tk, c.h, c.dv}, DType::float64, 13);
    AttentionOptions o = options_for(c);
    o.seed.reset();  // a draw from default_generator() would show in its state
    const auto before = default_generator().state().words;
    const Tensor p = attention_scores(q, k, o);
    EXPECT_EQ(default_generator().state().words, before);
    ASSERT_EQ(p.shape(), Shape({c.b, c.h, c.tq, c.tk}));
    EXPECT_EQ(p.dtype(), DType::float64);
    AttentionOptions no_dropout = o;
    no_dropout.dropout_rate = 0.0;
    const Tensor want = attention_reference(q, k, v, no_dropout);
    const Tensor got = permute(matmul(p, permute(v, {0, 2, 1, 3})), {0, 2, 1, 3});
    EXPECT_TRUE(all_close(got, want, {1e-12, 1e-12}));
    const std::vector<double> probs = p.to_vector<double>();
    for (std::int64_t row = 0; row < c.b * c.h * c.tq; ++row) {
      const std::int64_t i = row % c.tq;
      double total = 0;
      for (std::int64_t j = 0; j < c.tk; ++j) {
        const double x = probs[static_cast<std::size_t>(row * c.tk + j)];
        EXPECT_GE(x, 0.0);
        if (c.causal && j > i + (c.tk - c.tq)) EXPECT_EQ(x, 0.0) << "row " << row << " key " << j;
        total += x;
      }
      const bool fully_masked = c.mask == 3 && i == 1;
      EXPECT_NEAR(total, fully_masked ? 0.0 : 1.0, 1e-12) << "row " << row;
    }
  }
  // The hand case of ReferenceMatchesAHandComputedCausalCase: (1, 0) and (1, e^2) / (1 + e^2).
  const Tensor q = from_vector(std::vector<double>{1, 2}, {1, 2, 1, 1}, {.dtype = DType::float64});
  const Tensor k = from_vector(std::vector<double>{0, 1}, {1, 2, 1, 1}, {.dtype = DType::float64});
  const double e2 = std::exp(2.0);
  const std::vector<double> p =
      attention_scores(q, k, {.scale = 1.0, .causal = true}).to_vector<double>();
  const std::vector<double> want{1.0, 0.0, 1.0 / (1.0 + e2), e2 / (1.0 + e2)};
  ASSERT_EQ(p.size(), want.size());
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], want[i], 1e-15) << i;
  // 16-bit inputs: float32 scores (the float32 island), close to float64's.
  const Tensor q16 = random({1, 4, 2, 8}, DType::bfloat16, 14);
  const Tensor k16 = random({1, 6, 2, 8}, DType::bfloat16, 15);
  const Tensor p32 = attention_scores(q16, k16);
  EXPECT_EQ(p32.dtype(), DType::float32);
  EXPECT_TRUE(all_close(p32, attention_scores(q16.to(DType::float64), k16.to(DType::float64)),
                        {1e-5, 1e-6}));
}

TEST(Attention, ScoresGradcheckFloat64) {
  const Case c{"causal_masked", 2, 3, 4, 2, 3, 3, true, 1};
  const AttentionOptions o = options_for(c);
  const auto f = [&](const std::vector<Tensor>& in) { return attention_scores(in[0], in[1], o); };
  EXPECT_TRUE(gradcheck(f, {random({c.b, c.tq, c.h, c.d}, DType::float64, 16),
                            random({c.b, c.tk, c.h, c.d}, DType::float64, 17)}));
}

TEST(Attention, ErrorsNameTheShapesAndTheFix) {
  const Tensor q = random({2, 3, 2, 4}, DType::float32, 1);
  const Tensor k = random({2, 5, 2, 4}, DType::float32, 2);
  const Tensor v = random({2, 5, 2, 6}, DType::float32, 3);
  expect_error<ShapeError>(
      [&] {
        scaled_dot_product_attention(reshape(q, {2, 3, 8}), k, v);
      },
      {"scaled_dot_product_attention", "q must have rank 4", "(2, 3, 8)", "reshape"});
  expect_error<ShapeError>([&] { scaled_dot_product_attention(q, k, v.slice(1, 0, 4)); },
                           {"must agree", "(2, 5, 2, 4)", "(2, 4, 2, 6)"});
  expect_error<ShapeError>(
      [&] {
        scaled_dot_product_attention(q, random({2, 5, 2, 3}, DType::float32, 4), v);
      },
      {"must agree"});
  expect_error<DTypeError>([&] { scaled_dot_product_attention(q, k.to(DType::float16), v); },
                           {"dtype mismatch"});
  expect_error<DTypeError>(
      [&] {
        scaled_dot_product_attention(q, k, v, {.mask = ones({2, 3, 5})});
      },
      {"mask must be bool", "float32 (2, 3, 5)"});
  expect_error<ShapeError>(
      [&] {
        scaled_dot_product_attention(q, k, v, {.mask = greater(ones({2, 3, 4}), full({}, 0.5))});
      },
      {"does not broadcast", "(2, 2, 3, 5)"});
  expect_error<ValueError>(
      [&] { scaled_dot_product_attention(q, k, v, {.dropout_rate = 1.0, .training = true}); },
      {"dropout_rate must be in [0, 1)", "1.0"});
}

}  // namespace
}  // namespace mixprec
