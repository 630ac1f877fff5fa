// The Layer base class: handles, automatic names, policies, autocasting (every floating input,
// never integer ones), float32 variables under mixed policies, the trainable flag, symbolic calls
// and build-time validation, get/set_weights, and LayerImpl as the extension point. Dense, Add and
// Flatten stand in for "a layer" here; their own numerics are tested in their files.
#include "mixprec/layers/layer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/layers/dense.h"
#include "mixprec/layers/flatten.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/layers/merge.h"
#include "mixprec/logging.h"
#include "mixprec/mixed_precision/device_compatibility.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

using mixed_precision::Policy;
using testing::all_close;

using testing::PolicyGuard;

// Expects `f` to throw E with a message containing every one of `parts`.
using testing::expect_error;

Tensor values(const std::vector<double>& v, const Shape& shape, DType dtype = kFloat32) {
  return from_vector(v, shape, {.dtype = dtype});
}

TEST(LayerTest, AutomaticNamesAreUniquePerClassAndSkipGivenNames) {
  clear_session();
  layers::Dense a(2), b(2);
  layers::Dense c(2, {.name = "dense_2"});
  layers::Dense d(2);
  layers::Flatten f;
  layers::InputLayer in({3});
  EXPECT_EQ(a.name(), "dense");
  EXPECT_EQ(b.name(), "dense_1");
  EXPECT_EQ(c.name(), "dense_2");
  EXPECT_EQ(d.name(), "dense_3");  // never repeats a name given explicitly
  EXPECT_EQ(f.name(), "flatten");
  EXPECT_EQ(in.name(), "input_layer");
  EXPECT_EQ(a.class_name(), "Dense");
  EXPECT_EQ(in.class_name(), "InputLayer");
  clear_session();
  EXPECT_EQ(layers::Dense(2).name(), "dense");
}

TEST(LayerTest, NameWithSlashIsRejected) {
  expect_error<ValueError>([] { layers::Dense(2, {.name = "a/b"}); }, {"a/b", "'/'"});
}

TEST(LayerTest, PolicyIsTheGlobalOneAtConstructionUnlessGiven) {
  PolicyGuard guard("mixed_float16");
  layers::Dense mixed(2);
  layers::Dense f32(2, {.dtype = "float32"});
  layers::Dense bf16(2, {.dtype = Policy("mixed_bfloat16")});
  mixed_precision::set_global_policy("float32");  // later changes do not affect existing layers
  EXPECT_EQ(mixed.dtype_policy().name(), "mixed_float16");
  EXPECT_EQ(mixed.compute_dtype(), kFloat16);
  EXPECT_EQ(mixed.variable_dtype(), kFloat32);
  EXPECT_EQ(f32.dtype_policy().name(), "float32");
  EXPECT_EQ(f32.compute_dtype(), kFloat32);
  EXPECT_EQ(bf16.compute_dtype(), kBFloat16);
  EXPECT_EQ(bf16.variable_dtype(), kFloat32);
  EXPECT_EQ(layers::Dense(2).dtype_policy().name(), "float32");
}

TEST(LayerTest, PerLayerDtypeRunsTheCompatibilityCheck) {
  // The warning depends on the machine; what it should be here is computed independently.
  const std::string expected = mixed_precision::policy_compatibility_warning(
      Policy("mixed_float16"), list_physical_devices());
  reset_warn_once_for_testing();
  std::vector<std::string> logged;
  LogHandler previous =
      set_log_handler([&](LogLevel, std::string_view m) { logged.emplace_back(m); });
  layers::Dense d(2, {.dtype = "mixed_float16"});
  set_log_handler(previous);
  reset_warn_once_for_testing();
  if (expected.empty()) {
    EXPECT_TRUE(logged.empty());
  } else {
    ASSERT_EQ(logged.size(), 1u);
    EXPECT_NE(logged[0].find("mixed_float16"), std::string::npos) << logged[0];
  }
}

TEST(LayerTest, CopiesShareTheSameLayer) {
  layers::Dense a(3);
  layers::Layer b = a;
  EXPECT_TRUE(b.same(a));
  EXPECT_FALSE(a.built());
  b(ones({2, 4}));
  EXPECT_TRUE(a.built());
  ASSERT_EQ(b.variables().size(), 2u);
  EXPECT_TRUE(a.kernel().same(b.variables()[0]));
  EXPECT_EQ(a.count_params(), 4 * 3 + 3);
}

TEST(LayerTest, TemporaryLayerStaysAliveInTheGraph) {
  const KerasTensor y = layers::Dense(3, {.activation = "relu"})(Input({4}));
  const layers::Layer producer = y.layer();
  ASSERT_TRUE(producer.defined());
  EXPECT_EQ(producer.class_name(), "Dense");
  EXPECT_TRUE(producer.built());
  EXPECT_EQ(producer.variables().size(), 2u);
  EXPECT_EQ(layers::Dense(producer).activation(), "relu");
}

TEST(LayerTest, VariablesAreFloat32LeavesNamedAfterTheLayerUnderMixed) {
  PolicyGuard guard("mixed_float16");
  layers::Dense d(3, {.name = "probe"});
  d(Input({5}));
  const auto vars = d.named_variables();
  ASSERT_EQ(vars.size(), 2u);
  EXPECT_EQ(vars[0].name, "probe/kernel");
  EXPECT_EQ(vars[1].name, "probe/bias");
  for (const auto& v : vars) {
    EXPECT_EQ(v.value.dtype(), kFloat32);
    EXPECT_TRUE(v.value.is_leaf());
    EXPECT_TRUE(v.value.requires_grad());
    EXPECT_TRUE(v.trainable);
  }
  EXPECT_EQ(vars[0].value.shape(), (Shape{5, 3}));
  EXPECT_EQ(vars[1].value.shape(), (Shape{3}));
}

TEST(LayerTest, AutocastsEveryFloatingInput) {
  PolicyGuard guard("mixed_float16");
  layers::Add add;
  // A float32 first input and a float64 second: both go to float16 (Keras would cast the first
  // only).
  const Tensor a = values({1.5, -2, 4}, {1, 3}, kFloat32);
  const Tensor b = values({0.25, 8, -1}, {1, 3}, kFloat64);
  const Tensor y = add({a, b})[0];
  EXPECT_EQ(y.dtype(), kFloat16);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1.75, 6, 3}));
  // The same rule on symbolic tensors.
  const KerasTensor s = layers::Add()({Input({3}), Input({3}, {.dtype = kFloat64})});
  EXPECT_EQ(s.dtype(), kFloat16);
}

TEST(LayerTest, NeverCastsIntegerInputs) {
  PolicyGuard guard("mixed_float16");
  layers::Flatten flatten;
  const Tensor y = flatten(from_vector(std::vector<std::int32_t>{1, 2, 3, 4}, {1, 2, 2}));
  EXPECT_EQ(y.dtype(), kInt32);
  EXPECT_EQ(y.shape(), (Shape{1, 4}));
  EXPECT_EQ(layers::Flatten()(Input({2, 2}, {.dtype = kInt32})).dtype(), kInt32);
}

TEST(LayerTest, Float64InputIsCastToFloat32UnderFloat32) {
  layers::Flatten flatten({.dtype = "float32"});
  EXPECT_EQ(flatten(values({1, 2}, {1, 2}, kFloat64)).dtype(), kFloat32);
}

TEST(LayerTest, GradientOfAnAutocastInputComesBackInTheCallersDtype) {
  PolicyGuard guard("mixed_float16");
  layers::Dense d(2, {.kernel_initializer = "ones"});
  Tensor x = values({1, 2, 3}, {1, 3});
  x.set_requires_grad(true);
  const Tensor y = d(x);
  ASSERT_EQ(y.dtype(), kFloat16);
  const Tensor gx = grad(sum(y.to(kFloat32)), {x})[0];
  EXPECT_EQ(gx.dtype(), kFloat32);
  // y_j = sum_i x_i * 1 + 0, so dsum(y)/dx_i = number of units = 2.
  EXPECT_EQ(gx.to_vector<double>(), (std::vector<double>{2, 2, 2}));
}

TEST(LayerTest, FrozenLayerHasNoTrainableVariables) {
  layers::Dense d(3, {.trainable = false});
  d(ones({1, 2}));
  EXPECT_FALSE(d.trainable());
  EXPECT_TRUE(d.trainable_variables().empty());
  ASSERT_EQ(d.non_trainable_variables().size(), 2u);
  EXPECT_FALSE(d.kernel().requires_grad());
  d.set_trainable(true);
  EXPECT_EQ(d.trainable_variables().size(), 2u);
  EXPECT_TRUE(d.non_trainable_variables().empty());
  EXPECT_TRUE(d.kernel().requires_grad());
  d.set_trainable(false);
  EXPECT_FALSE(d.kernel().requires_grad());
  EXPECT_EQ(d.variables().size(), 2u);
}

TEST(LayerTest, AccumulationDtypeFollowsTheSwitchOnlyForMatmulLayers) {
  const bool saved = mixed_precision::fp16_matmul_use_fp32_compute();
  PolicyGuard guard("mixed_float16");
  layers::Dense dense(2);
  layers::Flatten flatten;
  layers::Dense f64(2, {.dtype = "float64"});
  mixed_precision::set_fp16_matmul_use_fp32_compute(false);
  EXPECT_EQ(dense.accumulation_dtype(), kFloat16);
  EXPECT_EQ(flatten.accumulation_dtype(), kFloat32);
  EXPECT_EQ(f64.accumulation_dtype(), kFloat64);
  mixed_precision::set_fp16_matmul_use_fp32_compute(true);
  EXPECT_EQ(dense.accumulation_dtype(), kFloat32);  // read at call time, not at construction
  EXPECT_EQ(flatten.accumulation_dtype(), kFloat32);
  mixed_precision::set_fp16_matmul_use_fp32_compute(saved);
}

TEST(LayerTest, SymbolicCallInfersTheShapeAndBuilds) {
  const KerasTensor x = Input({3, 4}, {.name = "seq_in"});
  EXPECT_EQ(x.shape(), (PartialShape{-1, 3, 4}));
  EXPECT_EQ(x.dtype(), kFloat32);
  EXPECT_EQ(x.layer().class_name(), "InputLayer");
  EXPECT_EQ(x.name(), "seq_in");
  layers::Dense d(5);
  const KerasTensor y = d(x);
  EXPECT_TRUE(d.built());
  EXPECT_EQ(d.kernel().shape(), (Shape{4, 5}));
  EXPECT_EQ(y.shape(), (PartialShape{-1, 3, 5}));
  EXPECT_EQ(partial_shape_to_string(y.shape()), "(None, 3, 5)");
  EXPECT_TRUE(y.layer().same(d));
  const KerasTensor fixed = Input({7}, {.batch_size = 16});
  EXPECT_EQ(fixed.shape(), (PartialShape{16, 7}));
}

TEST(LayerTest, CallingABuiltLayerWithAnotherShapeNamesTheLayerAndBothShapes) {
  layers::Dense d(2, {.name = "dense_check"});
  d(Input({784}));
  expect_error<ShapeError>(
      [&] {
        d(zeros({32, 100}));
      },
      {"dense_check: expected an input with 784 features (last axis), got "
       "shape (32, 100)"});
  expect_error<ShapeError>([&] { d(Input({100})); }, {"dense_check", "784", "(None, 100)"});
}

TEST(LayerTest, WrongNumberOfInputsIsAValueError) {
  layers::Dense d(2);
  expect_error<ValueError>(
      [&] {
        d({ones({1, 2}), ones({1, 2})});
      },
      {d.name(), "one input", "got 2"});
  expect_error<ValueError>([] { layers::Add()({Input({2})}); }, {"at least 2 inputs", "got 1"});
}

TEST(LayerTest, UndefinedHandlesAreErrors) {
  layers::Layer none;
  EXPECT_FALSE(none.defined());
  EXPECT_THROW(none.name(), ValueError);
  EXPECT_THROW(none(ones({1})), ValueError);
  KerasTensor k;
  EXPECT_THROW(layers::Dense(2)(k), ValueError);
}

TEST(LayerTest, GetWeightsAreDeepCopiesAndSetWeightsWritesInPlace) {
  layers::Dense d(2);
  d(ones({1, 3}));
  const Tensor kernel = d.kernel();
  std::vector<Tensor> w = d.get_weights();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_FALSE(w[0].requires_grad());
  EXPECT_NE(w[0].data_ptr(), kernel.data_ptr());
  const std::vector<double> k = {1, 2, 3, 4, 5, 6};
  const std::vector<double> b = {-1, 1};
  d.set_weights({values(k, {3, 2}, kFloat64), values(b, {2})});  // float64 is converted
  EXPECT_EQ(kernel.to_vector<double>(), k);                      // the same variable, new values
  EXPECT_EQ(kernel.dtype(), kFloat32);
  EXPECT_TRUE(kernel.requires_grad());
  EXPECT_NE(w[0].to_vector<double>(), k);  // the earlier copy is unaffected
  // y = [1, 1, 1] W + b = [1+3+5, 2+4+6] + [-1, 1].
  EXPECT_EQ(d(ones({1, 3})).to_vector<double>(), (std::vector<double>{8, 13}));
}

TEST(LayerTest, SetWeightsChecksCountAndShapesBeforeWriting) {
  layers::Dense d(2, {.name = "sw"});
  d(ones({1, 3}));
  const std::vector<double> before = d.kernel().to_vector<double>();
  expect_error<ValueError>(
      [&] {
        d.set_weights({ones({3, 2})});
      },
      {"sw", "expected 2 weights", "sw/kernel", "sw/bias", "got 1"});
  expect_error<ShapeError>(
      [&] {
        d.set_weights({ones({3, 2}), ones({3})});
      },
      {"sw/bias", "(2,)", "(3,)"});
  expect_error<ShapeError>(
      [&] {
        d.set_weights({full({2, 3}, 7.0), ones({2})});
      },
      {"sw/kernel", "(3, 2)", "(2, 3)"});
  EXPECT_EQ(d.kernel().to_vector<double>(), before);
}

// The extension point: a layer written outside the library, y = x * scale with a per-feature
// variable.
class ScaleImpl final : public layers::LayerImpl {
 public:
  explicit ScaleImpl(const layers::LayerOptions& o) : LayerImpl("Scale", o) {}
  void build(const std::vector<PartialShape>& shapes) override {
    scale = add_weight("scale", Shape{shapes[0].back()}, initializers::constant(0.5));
  }
  std::vector<PartialShape> compute_output_shape(
      const std::vector<PartialShape>& s) const override {
    return s;
  }
  std::vector<Tensor> call(const std::vector<Tensor>& in, const CallOptions&) override {
    return {in[0] * read(scale)};
  }
  Tensor scale;
};

TEST(LayerTest, CustomLayersGetPoliciesVariablesAndAutocasting) {
  PolicyGuard guard("mixed_float16");
  layers::Layer scale(std::make_shared<ScaleImpl>(layers::LayerOptions{}));
  EXPECT_EQ(scale.name().rfind("scale", 0), 0u) << scale.name();  // "scale" or "scale_<n>"
  EXPECT_EQ(scale.class_name(), "Scale");
  const Tensor x = values({2, 4, 6}, {1, 3});
  const Tensor y = scale(x);
  EXPECT_EQ(y.dtype(), kFloat16);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 2, 3}));
  const Tensor v = scale.variables().at(0);
  EXPECT_EQ(v.dtype(), kFloat32);
  const Tensor g = grad(sum(y.to(kFloat32)), {v})[0];
  EXPECT_EQ(g.dtype(), kFloat32);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{2, 4, 6}));  // d(x*s)/ds = x
}

}  // namespace
}  // namespace mixprec
