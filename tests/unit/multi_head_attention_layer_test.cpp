// MultiHeadAttention: Keras weight names and shapes, the forward against the same computation
// written with plain ops from the layer's weights, a hand-computed causal case, dtypes and
// gradients under three policies, mixed-vs-float32 parity (DESIGN §4: 2e-3), the attention scores
// (call_with_scores), dropout only in training, the functional API with the config, save/load and
// summary, and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/layers/multi_head_attention.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"

namespace mixprec {
namespace {

using layers::MultiHeadAttention;
using testing::all_close;
using testing::expect_error;
using testing::PolicyGuard;

Tensor random(const Shape& shape, std::uint64_t seed, DType dtype = kFloat32) {
  Generator gen(seed);
  return random_normal(shape, 0.0, 1.0, {.dtype = dtype}, gen);
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

TEST(MultiHeadAttentionTest, KerasWeightNamesAndShapes) {
  MultiHeadAttention mha(2, 4, {.name = "mha"});
  const Tensor y = mha(random({2, 3, 5}, 1), random({2, 4, 6}, 2), {.key = random({2, 4, 3}, 3)});
  EXPECT_EQ(y.shape(), Shape({2, 3, 5}));
  const std::vector<std::pair<std::string, Shape>> want{{"mha/query/kernel", {5, 2, 4}},
                                                        {"mha/query/bias", {2, 4}},
                                                        {"mha/key/kernel", {3, 2, 4}},
                                                        {"mha/key/bias", {2, 4}},
                                                        {"mha/value/kernel", {6, 2, 4}},
                                                        {"mha/value/bias", {2, 4}},
                                                        {"mha/attention_output/kernel", {2, 4, 5}},
                                                        {"mha/attention_output/bias", {5}}};
  const auto vars = mha.named_variables();
  ASSERT_EQ(vars.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(vars[i].name, want[i].first);
    EXPECT_EQ(vars[i].value.shape(), want[i].second) << want[i].first;
  }
  MultiHeadAttention other(3, 2, {.value_dim = 5, .use_bias = false, .output_shape = 7});
  EXPECT_EQ(other(random({2, 3, 5}, 1), random({2, 4, 6}, 2)).shape(), Shape({2, 3, 7}));
  EXPECT_EQ(other.named_variables().size(), 4u);
  EXPECT_EQ(other.named_variables()[2].value.shape(), Shape({6, 3, 5}));
  EXPECT_EQ(other.named_variables()[3].value.shape(), Shape({3, 5, 7}));
}

// The layer's computation written out with plain ops from its weights, in float64; `scores`,
// when given, receives the softmax probabilities (B, H, Tq, Tv).
Tensor by_hand(const MultiHeadAttention& mha, const Tensor& query, const Tensor& value,
               const Tensor& mask, bool causal, Tensor* scores = nullptr) {
  const auto w = mha.get_weights();
  auto d = [](const Tensor& t) { return t.to(kFloat64); };
  const std::int64_t h = mha.num_heads(), kd = mha.key_dim(), vd = mha.value_dim();
  const std::int64_t b = query.dim(0), tq = query.dim(1), tv = value.dim(1);
  auto project = [&](const Tensor& x, const Tensor& k, const Tensor& bias, std::int64_t dim) {
    const Tensor y =
        add(matmul(d(x), reshape(d(k), {k.dim(0), h * dim})), reshape(d(bias), {h * dim}));
    return permute(reshape(y, {x.dim(0), x.dim(1), h, dim}), {0, 2, 1, 3});  // (B, H, T, dim)
  };
  const Tensor q = project(query, w[0], w[1], kd), k = project(value, w[2], w[3], kd),
               v = project(value, w[4], w[5], vd);
  Tensor s = mul(matmul(q, k, Transpose::no, Transpose::yes), 1.0 / std::sqrt(double(kd)));
  std::vector<double> bias(static_cast<std::size_t>(b * tq * tv), 0.0);
  const auto m = mask.defined() ? mask.to(kFloat64).to_vector<double>() : std::vector<double>{};
  for (std::int64_t n = 0; n < b; ++n)
    for (std::int64_t i = 0; i < tq; ++i)
      for (std::int64_t j = 0; j < tv; ++j) {
        const auto at = static_cast<std::size_t>((n * tq + i) * tv + j);
        if ((causal && j > i) || (!m.empty() && m[at] == 0.0)) bias[at] = -1e300;
      }
  s = add(s, reshape(from_vector(bias, {b, tq, tv}, {.dtype = kFloat64}), {b, 1, tq, tv}));
  const Tensor p = softmax(s, -1);
  if (scores != nullptr) *scores = p;
  const Tensor o = permute(matmul(p, v), {0, 2, 1, 3});  // (B, Tq, H, vd)
  return add(matmul(reshape(o, {b, tq, h * vd}), reshape(d(w[6]), {h * vd, w[6].dim(2)})), d(w[7]));
}

TEST(MultiHeadAttentionTest, ForwardMatchesTheOpsWrittenOut) {
  MultiHeadAttention mha(3, 4, {.value_dim = 2});
  const Tensor q = random({2, 5, 6}, 1), v = random({2, 7, 6}, 2);
  const Tensor mask = greater(random({2, 5, 7}, 3), full({}, -0.8));
  const Tensor y = mha(q, v, {.attention_mask = mask});
  EXPECT_TRUE(all_close(y, by_hand(mha, q, v, mask, false), {1e-5, 1e-5}));
  const Tensor c = mha(q, q, {.use_causal_mask = true});
  EXPECT_TRUE(all_close(c, by_hand(mha, q, q, Tensor(), true), {1e-5, 1e-5}));
}

// Keras' return_attention_scores: the same output, and the softmax probabilities (B, H, Tq, Tv)
// in float32 whatever the policy, with the padding mask and the top-left causal rule of
// Tq != Tv applied, taken before dropout.
TEST(MultiHeadAttentionTest, CallWithScoresReturnsTheAttentionScores) {
  MultiHeadAttention mha(3, 4, {.value_dim = 2});
  const Tensor q = random({2, 5, 6}, 1), v = random({2, 7, 6}, 2);
  const Tensor mask = greater(random({2, 5, 7}, 3), full({}, -0.8));
  const auto r = mha.call_with_scores(q, v, {.attention_mask = mask});
  EXPECT_TRUE(bit_identical(r.output, mha(q, v, {.attention_mask = mask})));
  ASSERT_EQ(r.scores.shape(), Shape({2, 3, 5, 7}));
  EXPECT_EQ(r.scores.dtype(), kFloat32);
  Tensor want;
  by_hand(mha, q, v, mask, false, &want);
  EXPECT_TRUE(all_close(r.scores, want, {1e-5, 1e-6}));

  const Tensor short_q = random({2, 4, 6}, 4);  // Tq = 4 < Tv = 7: key j visible when j <= i
  const auto causal = mha.call_with_scores(short_q, v, {.use_causal_mask = true});
  by_hand(mha, short_q, v, Tensor(), true, &want);
  EXPECT_TRUE(all_close(causal.scores, want, {1e-5, 1e-6}));

  PolicyGuard guard("mixed_bfloat16");
  MultiHeadAttention dropped(2, 4, {.dropout = 0.5, .seed = 3});
  const Tensor x = random({1, 8, 8}, 5);
  const auto trained = dropped.call_with_scores(x, x, {.training = true});
  EXPECT_EQ(trained.output.dtype(), DType::bfloat16);
  EXPECT_EQ(trained.scores.dtype(), kFloat32);
  const Tensor rows = sum(trained.scores, {-1});  // before dropout: every row sums to 1
  EXPECT_TRUE(all_close(rows, ones_like(rows), {1e-6, 1e-6}));
  EXPECT_FALSE(all_close(trained.output, dropped(x, x), {1e-3, 1e-3}));
}

TEST(MultiHeadAttentionTest, CausalMaskMatchesAHandComputedCase) {
  // One head, key_dim 1, every kernel 1 and bias 0: q = k = v = x, scale 1, out_i =
  // sum_{j <= i} exp(x_i x_j) x_j / sum_{j <= i} exp(x_i x_j).
  MultiHeadAttention mha(1, 1, {.kernel_initializer = "ones", .dtype = "float64"});
  const std::vector<double> x{1.0, 2.0, -0.5};
  const Tensor t = from_vector(x, {1, 3, 1}, {.dtype = kFloat64});
  const auto y = mha(t, t, {.use_causal_mask = true}).to_vector<double>();
  ASSERT_EQ(y.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    double num = 0, den = 0;
    for (int j = 0; j <= i; ++j) {
      num += std::exp(x[i] * x[j]) * x[j];
      den += std::exp(x[i] * x[j]);
    }
    EXPECT_NEAR(y[static_cast<std::size_t>(i)], num / den, 1e-12) << "query " << i;
  }
  // Without the mask the first query sees the later keys.
  EXPECT_GT(std::abs(mha(t, t).to_vector<double>()[0] - 1.0), 0.1);
}

class MhaPolicies : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(MultiHeadAttention, MhaPolicies,
                         ::testing::Values("float32", "mixed_float16", "mixed_bfloat16"));

TEST_P(MhaPolicies, OutputInTheComputeDtypeAndGradientsInFloat32) {
  PolicyGuard guard(GetParam());
  MultiHeadAttention mha(2, 8);
  const Tensor y = mha(random({2, 6, 16}, 1), random({2, 6, 16}, 2), {.use_causal_mask = true});
  const mixed_precision::Policy p(GetParam());
  EXPECT_EQ(y.dtype(), p.compute_dtype());
  const auto vars = mha.trainable_variables();
  const auto g = grad(sum(y.to(kFloat32)), vars);
  for (std::size_t i = 0; i < vars.size(); ++i) {
    EXPECT_EQ(vars[i].dtype(), kFloat32);
    EXPECT_EQ(g[i].dtype(), kFloat32);
    EXPECT_TRUE(all_finite(g[i]));
  }
}

class MhaMixedPolicies : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(MultiHeadAttention, MhaMixedPolicies,
                         ::testing::Values("mixed_float16", "mixed_bfloat16"));

TEST_P(MhaMixedPolicies, MixedMatchesFloat32Within2e3) {
  set_seed(5);
  MultiHeadAttention f32(4, 16, {.dtype = "float32"});
  MultiHeadAttention mixed(4, 16, {.dtype = mixed_precision::Policy(GetParam())});
  const Tensor q = random({2, 20, 32}, 1), v = random({2, 20, 32}, 2);
  f32(q, v);
  mixed(q, v);
  mixed.set_weights(f32.get_weights());
  const Tensor a = f32(q, v, {.use_causal_mask = true});
  const Tensor b = mixed(q, v, {.use_causal_mask = true});
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    err += (av[i] - bv[i]) * (av[i] - bv[i]);
    norm += av[i] * av[i];
  }
  // bfloat16 keeps 8 bits: its parity bound is its unit roundoff scaled as for float16.
  const double bound = std::string(GetParam()) == "mixed_float16" ? 2e-3 : 1.6e-2;
  EXPECT_LE(std::sqrt(err / norm), bound);
}

TEST(MultiHeadAttentionTest, DropoutOnlyInTraining) {
  MultiHeadAttention mha(2, 4, {.dropout = 0.5, .seed = 3});
  const Tensor q = random({1, 8, 8}, 1);
  const Tensor inference = mha(q, q);
  EXPECT_TRUE(bit_identical(inference, mha(q, q)));
  EXPECT_FALSE(all_close(mha(q, q, {.training = true}), inference, {1e-3, 1e-3}));
}

TEST(MultiHeadAttentionTest, FunctionalModelSavesLoadsAndSummarises) {
  set_seed(2);
  auto in = Input({6, 8});
  MultiHeadAttention mha(2, 4, {.dropout = 0.1, .output_shape = 3, .seed = 9, .name = "attn"});
  Model m(in, mha(in, in, {.use_causal_mask = true}));
  const Tensor x = random({2, 6, 8}, 4);
  const Tensor y = m.predict(x);
  EXPECT_EQ(y.shape(), Shape({2, 6, 3}));

  const auto j = nlohmann::json::parse(m.to_json());
  bool found = false;
  for (const auto& l : j["config"]["layers"]) {
    if (l["config"]["name"] != "attn") continue;
    found = true;
    EXPECT_EQ(l["class_name"], "MultiHeadAttention");
    EXPECT_EQ(l["config"]["num_heads"], 2);
    EXPECT_EQ(l["config"]["output_shape"], 3);
    EXPECT_EQ(l["config"]["use_causal_mask"], true);
  }
  EXPECT_TRUE(found);

  testing::TempDir dir;
  m.save(dir.path() / "model");
  Model again = load_model(dir.path() / "model");
  EXPECT_EQ(again.to_json(), m.to_json());
  EXPECT_TRUE(bit_identical(again.predict(x), y));
  EXPECT_TRUE(MultiHeadAttention(again.get_layer("attn")).use_causal_mask());

  std::ostringstream summary;
  m.summary(summary);
  EXPECT_NE(summary.str().find("attn (MultiHeadAttention)"), std::string::npos) << summary.str();
  EXPECT_NE(summary.str().find(std::to_string(mha.count_params())), std::string::npos);
}

TEST(MultiHeadAttentionTest, ErrorsNameTheShapesAndTheFix) {
  MultiHeadAttention mha(2, 4, {.name = "mha"});
  expect_error<ShapeError>(
      [&] {
        mha(random({2, 5}, 1), random({2, 4, 6}, 2));
      },
      {"mha", "query of rank 3", "(2, 5)"});
  expect_error<ShapeError>(
      [&] {
        mha(random({2, 3, 5}, 1), random({3, 4, 6}, 2));
      },
      {"same batch size", "(2, 3, 5), (3, 4, 6)"});
  const Tensor q = random({2, 3, 5}, 1), v = random({2, 4, 6}, 2);
  expect_error<ShapeError>(
      [&] {
        mha(q, v, {.attention_mask = greater(random({2, 3, 3}, 3), full({}, 0.0))});
      },
      {"attention_mask must be (batch, query length, value length) = (2, 3, 4)", "(2, 3, 3)"});
  mha(q, v);
  expect_error<ShapeError>(
      [&] {
        mha(random({2, 3, 7}, 1), v);
      },
      {"built for the query with 5 features, got 7"});
  expect_error<ValueError>([] { MultiHeadAttention(0, 4); }, {"positive num_heads"});
  expect_error<ValueError>([] { MultiHeadAttention(2, 4, {.dropout = 1.0}); },
                           {"dropout must be in [0, 1)"});
  auto in = Input({3, 5});
  MultiHeadAttention sym(2, 4, {.name = "sym"});
  sym(in, in, {.use_causal_mask = true});
  expect_error<ValueError>([&] { sym(in, in); }, {"sym", "use_causal_mask = true", "second"});
}

}  // namespace
}  // namespace mixprec
