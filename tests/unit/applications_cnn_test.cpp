// The convolutional model zoo: cnn (shapes, parameter count, dtypes),
// EfficientNet (B0 forward and backward at 32x32, the compound-scaling table
// applied to widths and depths, parameter count of seed 002's structure
// computed here, include_top=false, a frozen base keeping its
// BatchNormalization in inference mode), ResNet-50 (torchvision's 25,557,032
// parameters) and the option errors.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/applications.h"
#include "mixprec/layers/batch_normalization.h"
#include "mixprec/layers/conv2d.h"
#include "mixprec/layers/depthwise_conv2d.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

namespace app = applications;
using testing::expect_error;
using testing::PolicyGuard;

std::string summary_of(const Model& m) {
  std::ostringstream os;
  m.summary(os);
  return os.str();
}

std::int64_t count_of_class(const Model& m, const std::string& class_name) {
  std::int64_t n = 0;
  for (const layers::Layer& l : m.layers()) n += l.class_name() == class_name;
  return n;
}

// ---- cnn ----

TEST(ApplicationsCnnTest, CnnShapesAndParameters) {
  Model m = app::cnn();
  EXPECT_EQ(m.name(), "cnn");
  EXPECT_EQ(m.inputs()[0].shape(), (PartialShape{-1, 28, 28, 1}));
  EXPECT_EQ(m.outputs()[0].shape(), (PartialShape{-1, 10}));
  // Conv2D 3x3 without bias + BatchNormalization (4 per channel): 1->32,
  // 32->32, 32->64, 64->64; Dense 7*7*64 -> 128 -> 10.
  const std::int64_t convs = 9 * (1 * 32 + 32 * 32 + 32 * 64 + 64 * 64);
  const std::int64_t bns = 4 * (32 + 32 + 64 + 64);
  const std::int64_t dense = (7 * 7 * 64 * 128 + 128) + (128 * 10 + 10);
  EXPECT_EQ(m.count_params(), convs + bns + dense);
  EXPECT_EQ(count_of_class(m, "Conv2D"), 4);
  EXPECT_EQ(count_of_class(m, "BatchNormalization"), 4);
  const std::string s = summary_of(m);
  EXPECT_NE(s.find("(None, 28, 28, 1)"), std::string::npos) << s;
  EXPECT_NE(s.find("(None, 7, 7, 64)"), std::string::npos) << s;
  EXPECT_NE(s.find("(None, 10)"), std::string::npos) << s;
}

TEST(ApplicationsCnnTest, CnnOptionsAndMixedOutputIsFloat32) {
  set_seed(61);
  Model m = app::cnn({.input_size = 32,
                      .channels = 3,
                      .classes = 5,
                      .dtype = mixed_precision::Policy("mixed_float16"),
                      .name = "small"});
  EXPECT_EQ(m.name(), "small");
  EXPECT_EQ(m.get_layer("conv1_conv").compute_dtype(), kFloat16);
  EXPECT_EQ(m.get_layer("conv1_bn").variables()[0].dtype(), kFloat32);
  const Tensor y = m(random_uniform({2, 32, 32, 3}), {.training = true});
  ASSERT_EQ(y.shape(), (Shape{2, 5}));
  EXPECT_EQ(y.dtype(), kFloat32);
  const auto p = y.to_vector<double>();
  for (int r = 0; r < 2; ++r) {
    double total = 0;
    for (int c = 0; c < 5; ++c) total += p[static_cast<std::size_t>(r * 5 + c)];
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
  expect_error<ValueError>([] { app::cnn({.classes = 1}); }, {"cnn", "classes", ">= 2", "1"});
  expect_error<ValueError>([] { app::cnn({.input_size = 2}); }, {"input_size", ">= 4"});
}

// ---- EfficientNet ----

// The paper's round_filters / round_repeats, as the test's own oracle.
std::int64_t round_filters(std::int64_t f, double w) {
  const double scaled = static_cast<double>(f) * w;
  std::int64_t r = std::max<std::int64_t>(8, static_cast<std::int64_t>(scaled + 4) / 8 * 8);
  if (static_cast<double>(r) < 0.9 * scaled) r += 8;
  return r;
}

struct Stage {
  std::int64_t filters;
  int kernel, repeats, stride, expansion;
};
const std::vector<Stage> kB0 = {{16, 3, 1, 1, 1}, {24, 3, 2, 2, 6},  {40, 5, 2, 2, 6},
                                {80, 3, 3, 2, 6}, {112, 5, 3, 1, 6}, {192, 5, 4, 2, 6},
                                {320, 3, 1, 1, 6}};

// Parameters of seed 002's network (biased convolutions, BatchNormalization
// with 4 values per channel, SE with reduction 24 or 4), counted block by
// block.
std::int64_t seed_efficientnet_params(double width, double depth, std::int64_t channels,
                                      std::int64_t classes) {
  auto conv = [](std::int64_t k, std::int64_t in, std::int64_t out) {
    return k * k * in * out + out;
  };
  const std::int64_t stem = round_filters(32, width), top = round_filters(1280, width);
  std::int64_t n = conv(3, channels, stem) + 4 * stem;
  std::int64_t in = stem;
  for (const Stage& s : kB0) {
    const std::int64_t out = round_filters(s.filters, width);
    const int repeats = static_cast<int>(std::ceil(depth * s.repeats));
    for (int r = 0; r < repeats; ++r) {
      const std::int64_t e = in * s.expansion;
      const std::int64_t sq = e / (e % 24 == 0 ? 24 : 4);
      n += conv(1, in, e) + 4 * e;               // expand
      n += s.kernel * s.kernel * e + e + 4 * e;  // depthwise
      n += conv(1, e, sq) + conv(1, sq, e);      // squeeze-and-excitation
      n += conv(1, e, out) + 4 * out;            // project
      in = out;
    }
  }
  n += conv(1, in, top) + 4 * top;
  if (classes > 0) n += top * classes + classes;
  return n;
}

TEST(ApplicationsCnnTest, EfficientNetB0ForwardAndBackwardAt32) {
  set_seed(62);
  Model m = app::efficientnet(0, {.input_size = 32, .classes = 10});
  EXPECT_EQ(m.name(), "efficientnet-b0");
  EXPECT_EQ(m.count_params(), seed_efficientnet_params(1.0, 1.0, 3, 10));
  const Tensor x = random_uniform({2, 32, 32, 3});
  const Tensor y0 = m(x);  // inference
  const Tensor labels = from_vector(std::vector<std::int64_t>{3, 7}, {2});
  GradientTape tape;
  const Tensor y = m(x, {.training = true});
  ASSERT_EQ(y.shape(), (Shape{2, 10}));
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TRUE(all_finite(y));
  const Tensor loss = losses::SparseCategoricalCrossentropy()(labels, y);
  const std::vector<Tensor> vars = m.trainable_variables();
  const std::vector<Tensor> grads = tape.gradient(loss, vars);
  ASSERT_EQ(grads.size(), vars.size());
  double norm = 0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    ASSERT_TRUE(grads[i].defined()) << i;
    EXPECT_EQ(grads[i].dtype(), kFloat32);
    EXPECT_TRUE(all_finite(grads[i]));
    for (double g : grads[i].to_vector<double>()) norm += g * g;
  }
  EXPECT_GT(norm, 0.0);
  // The training call moved the stem's moving mean away from its zeros.
  double moved = 0;
  for (double v :
       layers::BatchNormalization(m.get_layer("stem_bn")).moving_mean().to_vector<double>())
    moved += std::abs(v);
  EXPECT_GT(moved, 0.0);
  EXPECT_EQ(y0.shape(), (Shape{2, 10}));
}

TEST(ApplicationsCnnTest, EfficientNetCompoundScalingTable) {
  // (width, depth, resolution) of the paper / keras.applications.
  const double width[] = {1.0, 1.0, 1.1, 1.2, 1.4, 1.6, 1.8, 2.0};
  const double depth[] = {1.0, 1.1, 1.2, 1.4, 1.8, 2.2, 2.6, 3.1};
  const std::int64_t resolution[] = {224, 240, 260, 300, 380, 456, 528, 600};
  for (int v = 0; v < 8; ++v) {
    EXPECT_EQ(app::efficientnet_coefficients(v).width, width[v]);
    EXPECT_EQ(app::efficientnet_coefficients(v).depth, depth[v]);
    EXPECT_EQ(app::efficientnet_default_input_size(v), resolution[v]);
  }
  expect_error<ValueError>([] { app::efficientnet(8); }, {"variant", "0..7", "8"});
  expect_error<ValueError>([] { app::efficientnet(-1); }, {"variant", "-1"});
}

TEST(ApplicationsCnnTest, EfficientNetVariantsScaleWidthAndDepth) {
  // Known keras.applications widths: B3 stem 40, top 1536; B7 stem 64, top
  // 2560, 55 blocks.
  struct Known {
    int variant;
    std::int64_t stem, top, blocks;
  };
  for (const Known& k : {Known{3, 40, 1536, 26}, Known{7, 64, 2560, 55}}) {
    SCOPED_TRACE(k.variant);
    const double w = app::efficientnet_coefficients(k.variant).width;
    const double d = app::efficientnet_coefficients(k.variant).depth;
    Model m = app::efficientnet(k.variant, {.input_size = 32, .include_top = false});
    EXPECT_EQ(layers::Conv2D(m.get_layer("stem_conv")).filters(), k.stem);
    EXPECT_EQ(layers::Conv2D(m.get_layer("top_conv")).filters(), k.top);
    EXPECT_EQ(count_of_class(m, "DepthwiseConv2D"), k.blocks);
    for (std::size_t s = 0; s < kB0.size(); ++s) {
      const int repeats = static_cast<int>(std::ceil(d * kB0[s].repeats));
      const std::string stage = "block" + std::to_string(s + 1);
      const std::string last = stage + std::string(1, static_cast<char>('a' + repeats - 1));
      EXPECT_EQ(layers::Conv2D(m.get_layer(last + "_project_conv")).filters(),
                round_filters(kB0[s].filters, w))
          << last;
      EXPECT_EQ(layers::DepthwiseConv2D(m.get_layer(stage + "a_dwconv")).kernel_size(),
                layers::Size2d(kB0[s].kernel));
      EXPECT_EQ(layers::DepthwiseConv2D(m.get_layer(stage + "a_dwconv")).strides(),
                layers::Size2d(kB0[s].stride));
      // One block more would be past the stage.
      const std::string past = stage + std::string(1, static_cast<char>('a' + repeats));
      EXPECT_THROW(m.get_layer(past + "_dwconv"), ValueError) << past;
    }
    EXPECT_EQ(m.count_params(), seed_efficientnet_params(w, d, 3, 0));
    EXPECT_EQ(m.outputs()[0].shape(), (PartialShape{-1, 1, 1, k.top}));
  }
}

TEST(ApplicationsCnnTest, EfficientNetWithoutTopIsAFrozenBaseInInferenceMode) {
  // Seed 000: a frozen base, then GlobalAveragePooling2D + Dense + float32
  // softmax.
  PolicyGuard guard("mixed_float16");
  set_seed(63);
  Model base = app::efficientnet(0, {.input_size = 64, .include_top = false});
  EXPECT_EQ(base.outputs()[0].shape(), (PartialShape{-1, 2, 2, 1280}));
  EXPECT_EQ(base.outputs()[0].dtype(), kFloat16);
  base.set_trainable(false);
  auto in = Input({64, 64, 3});
  auto x = layers::GlobalAveragePooling2D()(base(in));
  x = layers::Dense(4)(x);
  auto out = layers::Activation("softmax", {.dtype = "float32"})(x);
  Model model(in, out);
  EXPECT_EQ(model.trainable_variables().size(),
            2u);  // the head's kernel and bias
  const layers::BatchNormalization bn(base.get_layer("block3b_bn"));
  const auto before = bn.moving_variance().to_vector<double>();
  const Tensor y = model(random_uniform({2, 64, 64, 3}), {.training = true});
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(bn.moving_variance().to_vector<double>(), before);
  EXPECT_FALSE(bn.trainable());
}

// ---- ResNet-50 ----

TEST(ApplicationsCnnTest, ResNet50MatchesTorchvisionParameterCount) {
  Model m = app::resnet50();
  EXPECT_EQ(m.name(), "resnet50");
  std::int64_t trainable = 0;
  for (const Tensor& v : m.trainable_variables()) trainable += v.numel();
  // torchvision.models.resnet50(): sum(p.numel() for p in model.parameters()) =
  // 25,557,032; its BatchNorm running statistics are buffers: 2 * 26,560
  // channels = 53,120 more here.
  EXPECT_EQ(trainable, 25557032);
  EXPECT_EQ(m.count_params(), 25557032 + 53120);
  EXPECT_EQ(count_of_class(m, "Conv2D"),
            53);  // 1 + 16 blocks * 3 + 4 projections
  EXPECT_EQ(count_of_class(m, "Add"), 16);
  EXPECT_EQ(m.outputs()[0].shape(), (PartialShape{-1, 1000}));
  const std::string s = summary_of(m);
  EXPECT_NE(s.find("(None, 224, 224, 3)"), std::string::npos);
  EXPECT_NE(s.find("(None, 7, 7, 2048)"), std::string::npos);
  EXPECT_NE(s.find("25,610,152"), std::string::npos) << s.substr(s.size() - 300);
}

TEST(ApplicationsCnnTest, ResNet50ShapesWithoutTopAndTorchvisionPadding) {
  set_seed(64);
  Model m = app::resnet50({.input_size = 64, .classes = 10, .include_top = false});
  // torchvision: 64 -> conv1 32 -> pool 16 -> 16, 8, 4, 2.
  EXPECT_EQ(m.outputs()[0].shape(), (PartialShape{-1, 2, 2, 2048}));
  EXPECT_EQ(m.get_layer("pool1_pool").class_name(), "MaxPooling2D");
  EXPECT_EQ(m.get_layer("conv3_block1_2_pad").class_name(), "ZeroPadding2D");
  const Tensor y = m(random_uniform({1, 64, 64, 3}));
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 2048}));
  EXPECT_TRUE(all_finite(y));
  Model odd = app::resnet50({.input_size = 33, .include_top = false});
  // 33 -> (33 + 6 - 7) / 2 + 1 = 17 -> (17 + 2 - 3) / 2 + 1 = 9 -> 9, 5, 3, 2.
  EXPECT_EQ(odd.outputs()[0].shape(), (PartialShape{-1, 2, 2, 2048}));
  const layers::BatchNormalization bn(m.get_layer("conv2_block1_1_bn"));
  EXPECT_EQ(bn.epsilon(), 1e-5);
  EXPECT_EQ(bn.momentum(), 0.9);
  EXPECT_FALSE(layers::Conv2D(m.get_layer("conv3_block1_2_conv")).use_bias());
  EXPECT_EQ(layers::Conv2D(m.get_layer("conv3_block1_2_conv")).strides(), layers::Size2d(2));
  EXPECT_EQ(layers::Conv2D(m.get_layer("conv3_block1_1_conv")).strides(), layers::Size2d(1));
}

TEST(ApplicationsCnnTest, ImageModelOptionErrors) {
  expect_error<ValueError>([] { app::resnet50({.input_size = 16}); },
                           {"resnet50", "input_size", ">= 32", "16"});
  expect_error<ValueError>([] { app::efficientnet(1, {.classes = 1}); },
                           {"efficientnet-b1", "classes"});
  expect_error<ValueError>([] { app::efficientnet(0, {.channels = 0}); }, {"channels"});
  // Without the top, classes does not matter.
  EXPECT_NO_THROW(app::efficientnet(0, {.input_size = 32, .classes = 0, .include_top = false}));
}

}  // namespace
}  // namespace mixprec
