// tensor_core_advice: the seed's multiple-of-8 rule over a model's 16-bit layers.
#include "mixprec/models/tensor_core_advice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

namespace mpl = mixprec::layers;

// 784 -> Dense(4095) -> Dense(10) -> float32 softmax under `policy`.
Model seed_like_model(const std::string& policy) {
  testing::PolicyGuard guard{mixed_precision::Policy(policy)};
  KerasTensor x = Input({784});
  KerasTensor h = mpl::Dense(4095, {.activation = "relu", .name = "hidden"})(x);
  KerasTensor logits = mpl::Dense(10, {.name = "logits"})(h);
  KerasTensor y = mpl::Activation("softmax", {.dtype = mixed_precision::Policy("float32")})(logits);
  return Model(x, y);
}

std::vector<std::string> lines(const std::vector<TensorCoreAdvice>& advice) {
  std::vector<std::string> out;
  for (const TensorCoreAdvice& a : advice) {
    out.push_back(a.layer + " " + a.what + " " + std::to_string(a.size) + "->" +
                  std::to_string(a.padded));
  }
  return out;
}

TEST(TensorCoreAdvice, NamesEvery16BitDimensionThatIsNotAMultipleOf8) {
  const Model model = seed_like_model("mixed_float16");
  const std::vector<std::string> want = {"hidden units 4095->4096",
                                         "logits input features 4095->4096", "logits units 10->16",
                                         "batch batch size 100->104"};
  EXPECT_EQ(lines(tensor_core_advice(model, 100)), want);
  const std::vector<std::string> without_batch(want.begin(), want.end() - 1);
  EXPECT_EQ(lines(tensor_core_advice(model)), without_batch);
  EXPECT_EQ(lines(tensor_core_advice(seed_like_model("mixed_bfloat16"), 256)), without_batch);
}

TEST(TensorCoreAdvice, Float32LayersAndMultiplesOf8AreNotListed) {
  EXPECT_TRUE(tensor_core_advice(seed_like_model("float32"), 100).empty());
  testing::PolicyGuard guard{mixed_precision::Policy("mixed_float16")};
  KerasTensor x = Input({64});
  const Model model(x, mpl::Dense(128)(x));
  EXPECT_TRUE(tensor_core_advice(model, 256).empty());
}

TEST(TensorCoreAdvice, LooksIntoNestedModels) {
  testing::PolicyGuard guard{mixed_precision::Policy("mixed_float16")};
  KerasTensor a = Input({12});
  const Model inner(a, mpl::Dense(8, {.name = "inner_dense"})(a), {.name = "inner"});
  KerasTensor x = Input({12});
  const Model outer(x, inner(x));
  EXPECT_EQ(lines(tensor_core_advice(outer)),
            std::vector<std::string>{"inner_dense input features 12->16"});
}

TEST(TensorCoreAdvice, ReadsAsAdvice) {
  const TensorCoreAdvice a{"dense_1", "units", 4095, 4096};
  EXPECT_EQ(a.to_string(),
            "dense_1: units 4095 is not a multiple of 8, so tensor cores cannot run at full "
            "speed; use 4096");
}

}  // namespace
}  // namespace mixprec
