// applications::vit: the graph (shapes, dtypes, parameter count), option errors, training that
// learns a visual rule under three policies, and save/load of the whole model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/applications.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/policy_guard.h"
#include "support/temp_dir.h"

namespace mixprec {
namespace {

namespace app = applications;
using testing::expect_error;
using testing::PolicyGuard;
using testing::TempDir;

// (n, 8, 8, 1) images whose bright quadrant (0..3) is the label.
std::pair<Tensor, Tensor> quadrant_images(std::int64_t n) {
  std::vector<float> x(static_cast<std::size_t>(n * 64), 0.1f);
  std::vector<std::int32_t> y;
  Generator gen(17);
  for (std::int64_t s = 0; s < n; ++s) {
    const auto q = static_cast<std::int32_t>(gen.below(4));
    y.push_back(q);
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 4; ++c) {
        const int row = r + 4 * (q / 2), col = c + 4 * (q % 2);
        x[static_cast<std::size_t>(s * 64 + row * 8 + col)] =
            0.6f + 0.4f * static_cast<float>(gen.uniform());
      }
    }
  }
  return {from_vector(x, {n, 8, 8, 1}), from_vector(y, {n})};
}

TEST(VitTest, GraphShapesAndParameters) {
  PolicyGuard guard(mixed_precision::Policy("mixed_float16"));
  const app::VitConfig c{.image_size = 8,
                         .channels = 1,
                         .patch_size = 2,
                         .width = 16,
                         .layers = 2,
                         .heads = 2,
                         .mlp_dim = 32,
                         .classes = 4};
  Model m = app::vit(c);
  EXPECT_EQ(m.inputs()[0].shape(), (PartialShape{-1, 8, 8, 1}));
  EXPECT_EQ(m.outputs()[0].shape(), (PartialShape{-1, 4}));
  EXPECT_EQ(m.outputs()[0].dtype(), DType::float32);  // the float32 softmax
  const std::int64_t W = 16, N = 16;
  const std::int64_t patch = 2 * 2 * 1 * W + W;
  const std::int64_t block = 4 * W + 4 * (W * W + W) + (W * 32 + 32) + (32 * W + W);
  EXPECT_EQ(m.count_params(), patch + N * W + 2 * block + 2 * W + (W * 4 + 4));
  const Tensor p = m(quadrant_images(3).first);
  EXPECT_EQ(p.shape(), (Shape{3, 4}));
  EXPECT_NEAR(sum(p).item(), 3.0, 1e-4);  // rows of probabilities
  expect_error<ValueError>([] { app::vit({.image_size = 10, .patch_size = 4}); },
                           {"image_size", "patch_size"});
  expect_error<ValueError>([] { app::vit({.width = 10, .heads = 4}); }, {"width", "heads"});
  expect_error<ValueError>([] { app::vit({.classes = 1}); }, {"classes"});
}

// pooling "token": a learned class token before the position embedding (N + 1 rows), read back
// after the final norm; the parameters add the token's width.
TEST(VitTest, ClassTokenPooling) {
  PolicyGuard guard(mixed_precision::Policy("mixed_bfloat16"));
  const app::VitConfig c{.image_size = 8,
                         .channels = 1,
                         .patch_size = 2,
                         .width = 16,
                         .layers = 1,
                         .heads = 2,
                         .mlp_dim = 32,
                         .classes = 4,
                         .pooling = "token"};
  Model m = app::vit(c);
  EXPECT_EQ(m.outputs()[0].shape(), (PartialShape{-1, 4}));
  EXPECT_EQ(m.get_layer("class_token").class_name(), "ClassToken");
  EXPECT_EQ(m.get_layer("class_token_row").class_name(), "Cropping1D");
  const std::int64_t W = 16, N = 16;
  const std::int64_t block = 4 * W + 4 * (W * W + W) + (W * 32 + 32) + (32 * W + W);
  EXPECT_EQ(m.count_params(), (4 * W + W) + W + (N + 1) * W + block + 2 * W + (W * 4 + 4));
  EXPECT_EQ(m(quadrant_images(3).first).shape(), (Shape{3, 4}));
  expect_error<ValueError>([] { app::vit({.pooling = "max"}); }, {"pooling", "max"});
}

TEST(VitTest, LearnsTheBrightQuadrantUnderEachPolicy) {
  const auto [x, y] = quadrant_images(128);
  for (const char* policy : {"float32", "mixed_bfloat16", "mixed_float16"}) {
    PolicyGuard guard{mixed_precision::Policy(policy)};
    set_seed(21);
    Model m = app::vit({.image_size = 8,
                        .channels = 1,
                        .patch_size = 2,
                        .width = 16,
                        .layers = 1,
                        .heads = 2,
                        .mlp_dim = 32,
                        .classes = 4});
    // The guard is in force: the layers take the policy (the final softmax stays float32).
    ASSERT_EQ(m.get_layer("logits").dtype_policy().name(), policy);
    m.compile({.optimizer = optimizers::Adam({.learning_rate = 3e-3}),
               .loss = std::string("sparse_categorical_crossentropy"),
               .metrics = {std::string("accuracy")}});
    const Scores before = m.evaluate(x, y, {.verbose = Verbosity::silent});
    m.fit(x, y, {.batch_size = 16, .epochs = 8, .verbose = Verbosity::silent, .seed = 2});
    const Scores after = m.evaluate(x, y, {.verbose = Verbosity::silent});
    EXPECT_LT(after.at("loss"), 0.5 * before.at("loss")) << policy;
    EXPECT_GT(after.at("accuracy"), 0.9) << policy;
  }
}

// A checkpoint taken after two epochs and loaded into a fresh model continues to the same weights,
// bit for bit, as the run that was never interrupted (mixed_float16 with its loss scale, AdamW,
// class-token pooling).
TEST(VitTest, CheckpointContinuesTrainingExactly) {
  PolicyGuard guard(mixed_precision::Policy("mixed_float16"));
  const auto [x, y] = quadrant_images(32);
  auto make = [] {
    set_seed(8);
    Model m = app::vit({.image_size = 8,
                        .channels = 1,
                        .patch_size = 4,
                        .width = 8,
                        .layers = 1,
                        .heads = 2,
                        .mlp_dim = 16,
                        .classes = 4,
                        .pooling = "token"});
    m.compile({.optimizer = optimizers::AdamW({.learning_rate = 1e-3}),
               .loss = std::string("sparse_categorical_crossentropy")});
    return m;
  };
  const FitOptions fit{
      .batch_size = 8, .epochs = 2, .verbose = Verbosity::silent, .shuffle = false};
  Model straight = make();
  straight.fit(x, y, fit);
  TempDir dir;
  io::save_checkpoint(straight, dir.file("half.safetensors"));
  straight.fit(x, y, fit);
  Model resumed = make();
  io::load_checkpoint(resumed, dir.file("half.safetensors"));
  resumed.fit(x, y, fit);
  const auto a = straight.named_variables(), b = resumed.named_variables();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(max(abs(sub(a[i].value, b[i].value))).item(), 0.0) << a[i].name;
  }
}

TEST(VitTest, SavedModelLoadsBack) {
  PolicyGuard guard(mixed_precision::Policy("mixed_bfloat16"));
  set_seed(6);
  Model m = app::vit({.image_size = 8,
                      .channels = 1,
                      .patch_size = 4,
                      .width = 8,
                      .layers = 1,
                      .heads = 2,
                      .mlp_dim = 16,
                      .classes = 3});
  TempDir dir;
  m.save(dir.path() / "vit");
  Model again = load_model(dir.path() / "vit");
  const Tensor x = quadrant_images(2).first;
  const Tensor a = m(x), b = again(x);
  EXPECT_EQ(max(abs(sub(a, b))).item(), 0.0);
}

}  // namespace
}  // namespace mixprec
