// LayerNormalization and RMSNormalization layers: output and variable dtypes under float32,
// mixed_float16, mixed_bfloat16 (and pure float16: float32 parameters), the computation equal to
// the ops, mixed-vs-float32 parity (DESIGN §4: 2e-3), the config round trip (model_from_json),
// gradients reaching float32 variables, and the errors (rank, axis, floating input, epsilon).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/op_test_helpers.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using layers::LayerNormalization;
using layers::RMSNormalization;
using testing::all_close;
using testing::expect_error;
using testing::normal;
using testing::PolicyGuard;

// sqrt(sum (a - b)^2 / sum b^2).
double relative_rms(const Tensor& a, const Tensor& b) {
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    err += (av[i] - bv[i]) * (av[i] - bv[i]);
    norm += bv[i] * bv[i];
  }
  return std::sqrt(err / norm);
}

class NormPolicies : public ::testing::TestWithParam<const char*> {};

TEST_P(NormPolicies, DtypesOfOutputAndVariables) {
  PolicyGuard guard(GetParam());
  const DType compute = mixed_precision::Policy(GetParam()).compute_dtype();
  const Tensor x = normal(Shape{2, 3, 8}, 1);
  LayerNormalization ln;
  const Tensor y = ln(x);
  EXPECT_EQ(y.dtype(), compute);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_EQ(ln.gamma().dtype(), DType::float32);
  EXPECT_EQ(ln.beta().dtype(), DType::float32);
  EXPECT_EQ(ln.gamma().shape(), (Shape{8}));
  RMSNormalization rms;
  const Tensor z = rms(x);
  EXPECT_EQ(z.dtype(), compute);
  EXPECT_EQ(rms.scale().dtype(), DType::float32);
  ASSERT_EQ(rms.named_variables().size(), 1u);
  EXPECT_EQ(rms.named_variables()[0].name, rms.name() + "/scale");
}

TEST_P(NormPolicies, MixedMatchesFloat32) {
  const Tensor x = normal(Shape{4, 5, 16}, 2, 0.5, 2.0);
  Tensor ref_ln, ref_rms;
  {
    PolicyGuard guard("float32");
    ref_ln = LayerNormalization()(x);
    ref_rms = RMSNormalization()(x);
  }
  PolicyGuard guard(GetParam());
  // DESIGN §4's 2e-3 as a relative RMS error (as the Conv2D layer test); bfloat16 gets 1e-2 like
  // there: one rounding to an 8-bit significand alone is ~2^-8 / sqrt(3) = 2.3e-3 RMS.
  const double bound = std::string(GetParam()) == "mixed_bfloat16" ? 1e-2 : 2e-3;
  EXPECT_LE(relative_rms(LayerNormalization()(x), ref_ln), bound) << GetParam();
  EXPECT_LE(relative_rms(RMSNormalization()(x), ref_rms), bound) << GetParam();
  if (std::string(GetParam()) != "mixed_bfloat16") {
    EXPECT_TRUE(all_close(LayerNormalization()(x), ref_ln, {2e-3, 2e-3})) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, NormPolicies,
                         ::testing::Values("float32", "mixed_float16", "mixed_bfloat16"));

TEST(LayerNormalizationLayer, PureSixteenBitPolicyKeepsFloat32Parameters) {
  PolicyGuard guard("float16");
  LayerNormalization ln;
  EXPECT_EQ(ln(normal(Shape{2, 4}, 3)).dtype(), DType::float16);
  EXPECT_EQ(ln.gamma().dtype(), DType::float32);
}

TEST(LayerNormalizationLayer, EqualsTheOpAndTrainsFloat32Variables) {
  PolicyGuard guard("mixed_bfloat16");
  const Tensor x = normal(Shape{3, 6}, 4);
  LayerNormalization ln({.epsilon = 1e-5, .gamma_initializer = "random_normal"});
  const Tensor y = ln(x);
  const Tensor expected = layer_norm(x.to(DType::bfloat16), ln.gamma(), ln.beta(), 1e-5);
  EXPECT_EQ(y.to_vector<float>(), expected.to_vector<float>());
  sum(y.to(DType::float32)).backward();
  EXPECT_EQ(ln.gamma().grad().dtype(), DType::float32);
  EXPECT_EQ(ln.beta().grad().dtype(), DType::float32);
  // No center / no scale: no variables.
  LayerNormalization bare({.center = false, .scale = false});
  bare(x);
  EXPECT_TRUE(bare.named_variables().empty());
  EXPECT_FALSE(bare.gamma().defined());
}

TEST(LayerNormalizationLayer, ConfigRoundTrip) {
  PolicyGuard guard("mixed_float16");
  auto in = Input({5, 12});
  auto h = LayerNormalization({.axis = 2, .epsilon = 1e-5, .center = false, .name = "ln"})(in);
  auto out = RMSNormalization({.epsilon = 1e-4, .name = "rms"})(h);
  Model m(in, out);
  const std::string json = m.to_json();
  Model again = model_from_json(json);
  EXPECT_EQ(again.to_json(), json);
  const LayerNormalization ln(again.get_layer("ln"));
  EXPECT_EQ(ln.axis(), 2);
  EXPECT_DOUBLE_EQ(ln.epsilon(), 1e-5);
  EXPECT_FALSE(ln.center());
  EXPECT_TRUE(ln.scale());
  EXPECT_DOUBLE_EQ(RMSNormalization(again.get_layer("rms")).epsilon(), 1e-4);
  // The same weights give the same bits.
  again.set_weights(m.get_weights());
  const Tensor x = normal(Shape{2, 5, 12}, 5);
  EXPECT_EQ(again(x).to_vector<float>(), m(x).to_vector<float>());
}

TEST(LayerNormalizationLayer, Errors) {
  expect_error<ValueError>([] { LayerNormalization({.epsilon = 0.0}); }, {"epsilon", "positive"});
  expect_error<ValueError>([] { RMSNormalization({.epsilon = -1.0}); }, {"epsilon"});
  expect_error<ValueError>(
      [] {
        LayerNormalization({.axis = 1})(zeros(Shape{2, 3, 4}));
      },
      {"trailing-axis", "axis = 1", "-1 or 2"});
  expect_error<ShapeError>([] { RMSNormalization()(zeros(Shape{4})); }, {"(batch, ..., features)"});
  expect_error<DTypeError>(
      [] {
        LayerNormalization()(zeros(Shape{2, 3}, {.dtype = DType::int32}));
      },
      {"floating", "int32"});
  LayerNormalization ln;
  ln(zeros(Shape{2, 3}));
  expect_error<ShapeError>([&] { ln(zeros(Shape{2, 4})); }, {"3 features", "(2, 4)"});
}

}  // namespace
}  // namespace mixprec
