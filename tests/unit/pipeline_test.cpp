// data::Pipeline: each ready-made step against values computed here (bilinear resize from its
// formula in double), step bookkeeping (map, describe, sample_shape, the sample-count check), and
// Model::fit/evaluate/predict on a pipeline against the same calls on tensors transformed up
// front: bit for bit with the same seed, since batching and shuffling must be identical.
#include "mixprec/data/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/expect_error.h"
#include "support/gradcheck.h"
#include "support/policy_guard.h"

namespace mixprec::data {
namespace {

using testing::expect_error;
using testing::PolicyGuard;

// Values 0, 1, 2, ... / denominator as float32 in `shape`.
Tensor ramp(const Shape& shape, float denominator = 1.0f) {
  std::vector<float> v(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) / denominator;
  return from_vector(v, shape);
}

Batch run(const Step& step, const Tensor& x, const Tensor& y = Tensor()) {
  return Pipeline(x, y).map(step).batch(0, x.dim(0));
}

TEST(PipelineStepsTest, GrayscaleToRgbRepeatsTheChannel) {
  const Tensor x = ramp({2, 3, 2, 1});
  const Batch b = run(grayscale_to_rgb(), x);
  ASSERT_EQ(b.x.shape(), (Shape{2, 3, 2, 3}));
  const auto in = x.to_vector<float>();
  const auto out = b.x.to_vector<float>();
  for (std::size_t p = 0; p < in.size(); ++p) {
    for (std::size_t c = 0; c < 3; ++c) EXPECT_EQ(out[3 * p + c], in[p]) << p << ", " << c;
  }
  expect_error<ShapeError>(
      [] {
        run(grayscale_to_rgb(), ramp({2, 3, 2, 3}));
      },
      {"grayscale_to_rgb", "(2, 3, 2, 3)", "already have 3 channels"});
  expect_error<ShapeError>(
      [] {
        run(grayscale_to_rgb(), ramp({2, 6}));
      },
      {"(N, H, W, C)", "(2, 6)", "reshape_images"});
}

// tf.image.resize(method="bilinear") with half-pixel centers, in double: source coordinate
// (dst + 0.5) * in / out - 0.5, clamped at the borders.
std::vector<double> bilinear_reference(const std::vector<float>& x, std::int64_t n, std::int64_t h,
                                       std::int64_t w, std::int64_t c, std::int64_t oh,
                                       std::int64_t ow) {
  std::vector<double> out(static_cast<std::size_t>(n * oh * ow * c));
  auto at = [&](std::int64_t b, std::int64_t i, std::int64_t j, std::int64_t k) {
    return static_cast<double>(x[static_cast<std::size_t>(((b * h + i) * w + j) * c + k)]);
  };
  auto source = [](std::int64_t dst, std::int64_t in, std::int64_t out_size, std::int64_t& lo,
                   std::int64_t& hi, double& frac) {
    const double s =
        (static_cast<double>(dst) + 0.5) * static_cast<double>(in) / static_cast<double>(out_size) -
        0.5;
    const double f = std::floor(s);
    lo = std::max<std::int64_t>(static_cast<std::int64_t>(f), 0);
    hi = std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(s)), in - 1);
    frac = s - f;
  };
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t i = 0; i < oh; ++i) {
      std::int64_t y0, y1;
      double fy;
      source(i, h, oh, y0, y1, fy);
      for (std::int64_t j = 0; j < ow; ++j) {
        std::int64_t x0, x1;
        double fx;
        source(j, w, ow, x0, x1, fx);
        for (std::int64_t k = 0; k < c; ++k) {
          const double top = at(b, y0, x0, k) + (at(b, y0, x1, k) - at(b, y0, x0, k)) * fx;
          const double bottom = at(b, y1, x0, k) + (at(b, y1, x1, k) - at(b, y1, x0, k)) * fx;
          out[static_cast<std::size_t>(((b * oh + i) * ow + j) * c + k)] =
              top + (bottom - top) * fy;
        }
      }
    }
  }
  return out;
}

TEST(PipelineStepsTest, ResizeIsHalfPixelBilinear) {
  const Tensor x = ramp({2, 3, 4, 2}, 7.0f);
  for (auto [oh, ow] : {std::pair<std::int64_t, std::int64_t>{7, 5}, {2, 2}, {3, 9}}) {
    SCOPED_TRACE(std::to_string(oh) + "x" + std::to_string(ow));
    const Batch b = run(resize(oh, ow), x);
    ASSERT_EQ(b.x.shape(), (Shape{2, oh, ow, 2}));
    const auto expected = bilinear_reference(x.to_vector<float>(), 2, 3, 4, 2, oh, ow);
    const auto got = b.x.to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], expected[i], 1e-6) << i;
    }
  }
}

TEST(PipelineStepsTest, ResizeToTheSameSizeIsTheIdentityAndChecksItsInput) {
  const Tensor x = ramp({1, 3, 4, 1});
  EXPECT_EQ(run(resize(3, 4), x).x.to_vector<float>(), x.to_vector<float>());
  expect_error<ValueError>([] { resize(0, 4); }, {"resize", "height must be >= 1, got 0"});
  expect_error<DTypeError>(
      [] {
        run(resize(2, 2), zeros({1, 3, 3, 1}, {.dtype = DType::uint8}));
      },
      {"floating-point", "uint8", "rescale"});
}

TEST(PipelineStepsTest, ReshapeImagesAndFlatten) {
  const Tensor x = ramp({3, 12});
  const Batch b = run(reshape_images(2, 3, 2), x);
  EXPECT_EQ(b.x.shape(), (Shape{3, 2, 3, 2}));
  EXPECT_EQ(b.x.to_vector<float>(), x.to_vector<float>());  // row-major order is kept
  const Batch flat = run(flatten(), b.x);
  EXPECT_EQ(flat.x.shape(), (Shape{3, 12}));
  EXPECT_EQ(flat.x.to_vector<float>(), x.to_vector<float>());
  expect_error<ShapeError>([&] { run(reshape_images(28, 28, 1), x); },
                           {"reshape_images(28, 28, 1)", "784 elements per sample", "(3, 12)"});
  expect_error<ValueError>([] { reshape_images(2, 0, 1); }, {"width must be >= 1, got 0"});
}

TEST(PipelineStepsTest, RescaleMakesIntegersFloat32AndKeepsFloatDtypes) {
  const Tensor pixels =
      from_vector(std::vector<std::int32_t>{0, 51, 255, 128}, {4, 1}, {.dtype = DType::int32})
          .to(DType::uint8);
  const Batch b = run(rescale(1.0 / 255), pixels);
  ASSERT_EQ(b.x.dtype(), DType::float32);
  const auto got = b.x.to_vector<float>();
  const std::vector<int> raw = {0, 51, 255, 128};
  for (std::size_t i = 0; i < raw.size(); ++i) {
    EXPECT_FLOAT_EQ(got[i], static_cast<float>(raw[i] / 255.0));
  }
  const Tensor half = from_vector(std::vector<float>{1.0f, -2.0f}, {2, 1}).to(DType::float16);
  const Batch h = run(rescale(0.5, 1.0), half);
  EXPECT_EQ(h.x.dtype(), DType::float16);
  EXPECT_EQ(h.x.to_vector<float>(), (std::vector<float>{1.5f, 0.0f}));
}

TEST(PipelineTest, StepsRunInOrderWithoutAutogradAndKeepTargets) {
  const Tensor x = ramp({4, 4}, 10.0f);
  Tensor leaf = x.detach();
  leaf.set_requires_grad(true);
  const Tensor y = from_vector(std::vector<std::int64_t>{3, 1, 2, 0}, {4});
  const Pipeline base(leaf, y);
  const Pipeline p = base.map(reshape_images(2, 2, 1)).map(rescale(2.0)).map(resize(3, 3));
  EXPECT_TRUE(base.steps().empty());  // map returns a new pipeline
  EXPECT_EQ(p.describe(), "reshape_images(2, 2, 1) -> rescale(2) -> resize(3, 3)");
  EXPECT_EQ(p.sample_shape(), (Shape{3, 3, 1}));
  const Batch b = p.batch(1, 3);
  EXPECT_EQ(b.x.shape(), (Shape{2, 3, 3, 1}));
  EXPECT_FALSE(b.x.requires_grad());
  EXPECT_EQ(b.y.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2}));
  // Rows 1 and 2, doubled then resized: each output is a convex mix of the doubled inputs.
  const auto v = b.x.to_vector<float>();
  EXPECT_FLOAT_EQ(v[0], 2.0f * 0.4f);   // corner pixel of row 1 (values 0.4 .. 0.7)
  EXPECT_FLOAT_EQ(v[17], 2.0f * 1.1f);  // last pixel of row 2 (values 0.8 .. 1.1)
}

TEST(PipelineTest, AStepMustKeepTheSampleCount) {
  const Pipeline p = Pipeline(ramp({4, 2}), zeros({4}, {.dtype = DType::int64}))
                         .map(Step("drop_first", [](Batch b) {
                           b.x = b.x.slice(0, 1, b.x.dim(0));
                           return b;
                         }));
  expect_error<ValueError>([&] { p.batch(0, 4); },
                           {"'drop_first'", "4 samples", "(4, 2)", "(3, 2)"});
  // A lambda converts to a step named "map".
  const Pipeline q = Pipeline(ramp({2, 2})).map([](Batch b) { return b; });
  EXPECT_EQ(q.describe(), "map");
  expect_error<ValueError>([] { Step("empty", Step::Function()); }, {"'empty'", "empty"});
}

TEST(PipelineTest, SplitsKeepTheSteps) {
  const Pipeline p =
      Pipeline(ramp({10, 4}), zeros({10}, {.dtype = DType::int64})).map(reshape_images(2, 2, 1));
  const PipelineSplit s = p.split_validation(0.2);
  EXPECT_EQ(s.train.size(), 8);
  EXPECT_EQ(s.validation.size(), 2);
  EXPECT_EQ(s.validation.describe(), "reshape_images(2, 2, 1)");
  EXPECT_EQ(s.validation.batch(0, 2).x.to_vector<float>(),
            ramp({10, 4}).slice(0, 8, 10).contiguous().to_vector<float>());
  EXPECT_EQ(p.take({9, 0}).batch(0, 2).x.shape(), (Shape{2, 2, 2, 1}));
  EXPECT_EQ(p.slice(3, 5).size(), 2);
}

// ---- Model::fit / evaluate / predict on a pipeline ----

constexpr std::int64_t kSamples = 60, kSide = 4, kOut = 5, kClasses = 3;

// Grayscale 4x4 images stored flat (60, 16), values in [0, 1]; the label is the brightest of the
// first three rows (a pattern a convolution can learn).
struct Data {
  Tensor x, y;
};
Data make_data() {
  Generator gen(17);
  const Tensor x = random_uniform({kSamples, kSide * kSide}, 0.0, 1.0, {}, gen);
  const auto v = x.to_vector<float>();
  std::vector<std::int64_t> labels;
  for (std::size_t i = 0; i < static_cast<std::size_t>(kSamples); ++i) {
    double row[kClasses] = {0.0, 0.0, 0.0};
    for (std::size_t r = 0; r < static_cast<std::size_t>(kClasses); ++r) {
      for (std::size_t c = 0; c < static_cast<std::size_t>(kSide); ++c)
        row[r] += v[i * 16 + r * 4 + c];
    }
    labels.push_back(std::max_element(row, row + kClasses) - row);
  }
  return {x, from_vector(labels, {kSamples})};
}

Pipeline image_pipeline(const Tensor& x, const Tensor& y) {
  return Pipeline(x, y)
      .map(reshape_images(kSide, kSide, 1))
      .map(grayscale_to_rgb())
      .map(resize(kOut, kOut))
      .map(rescale(2.0, -1.0));
}

// The same transformation applied to the whole tensor at once with the public ops.
Tensor transform_all(const Tensor& x) {
  const std::int64_t n = x.dim(0);
  Tensor t = x.reshape({n, kSide, kSide, 1});
  t = broadcast_to(t, {n, kSide, kSide, 3}).contiguous();
  t = resize_bilinear(t, kOut, kOut);
  return add(mul(t, 2.0), -1.0);
}

Model small_cnn() {
  set_seed(123);
  clear_session();
  auto in = Input({kOut, kOut, 3});
  auto h = layers::Conv2D(4, 3, {.activation = "relu"})(in);
  h = layers::Flatten()(h);
  h = layers::Dense(kClasses)(h);
  Model model(in, layers::Activation("softmax", {.dtype = "float32"})(h));
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.01}),
                 .metrics = {std::string("accuracy")}});
  return model;
}

void expect_same_weights(const Model& a, const Model& b) {
  const auto wa = a.get_weights(), wb = b.get_weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (std::size_t i = 0; i < wa.size(); ++i) {
    const auto va = wa[i].to_vector<float>(), vb = wb[i].to_vector<float>();
    ASSERT_EQ(va.size(), vb.size());
    EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0) << "weight " << i;
  }
}

TEST(PipelineFitTest, FitOnAPipelineEqualsFitOnPretransformedTensorsBitForBit) {
  PolicyGuard guard("float32");
  const Data d = make_data();
  const Tensor x_all = transform_all(d.x);
  // The pipeline's first batch equals the up-front transform of those rows.
  const Batch first = image_pipeline(d.x, d.y).batch(0, 8);
  EXPECT_EQ(first.x.to_vector<float>(), x_all.slice(0, 0, 8).contiguous().to_vector<float>());

  const FitOptions options{.batch_size = 7,
                           .epochs = 3,
                           .verbose = Verbosity::silent,
                           .validation_split = 0.25,
                           .seed = 99};
  Model a = small_cnn();
  const History ha = a.fit(image_pipeline(d.x, d.y), options);
  Model b = small_cnn();
  const History hb = b.fit(x_all, d.y, options);
  expect_same_weights(a, b);
  EXPECT_EQ(ha.history, hb.history);  // loss, accuracy, val_loss, val_accuracy per epoch
  ASSERT_EQ(ha.epochs.size(), 3u);
  // 45 training samples in batches of 7: 7 steps per epoch.
  EXPECT_EQ(ha.epochs[0].step_ms.size(), 7u);
  EXPECT_TRUE(ha.history.count("val_loss"));

  // evaluate and predict agree too.
  const Scores sa =
      a.evaluate(image_pipeline(d.x, d.y), {.batch_size = 16, .verbose = Verbosity::silent});
  const Scores sb = b.evaluate(x_all, d.y, {.batch_size = 16, .verbose = Verbosity::silent});
  EXPECT_EQ(sa.values, sb.values);
  const Tensor pa = a.predict(image_pipeline(d.x, Tensor()), {.batch_size = 16});
  const Tensor pb = b.predict(x_all, {.batch_size = 16});
  EXPECT_EQ(pa.shape(), (Shape{kSamples, kClasses}));
  EXPECT_EQ(pa.to_vector<float>(), pb.to_vector<float>());
}

TEST(PipelineFitTest, ValidationDataAsAPipeline) {
  PolicyGuard guard("float32");
  const Data d = make_data();
  const Tensor x_all = transform_all(d.x);
  const Tensor x_train = d.x.slice(0, 0, 40), y_train = d.y.slice(0, 0, 40);
  const Tensor x_val = d.x.slice(0, 40, kSamples), y_val = d.y.slice(0, 40, kSamples);
  Model a = small_cnn();
  const History ha =
      a.fit(image_pipeline(x_train, y_train), {.batch_size = 8,
                                               .epochs = 2,
                                               .verbose = Verbosity::silent,
                                               .validation_data = image_pipeline(x_val, y_val),
                                               .seed = 5});
  Model b = small_cnn();
  const History hb = b.fit(x_all.slice(0, 0, 40), y_train,
                           {.batch_size = 8,
                            .epochs = 2,
                            .verbose = Verbosity::silent,
                            .validation_data = std::pair{x_all.slice(0, 40, kSamples), y_val},
                            .seed = 5});
  EXPECT_EQ(ha.history, hb.history);
  EXPECT_EQ(ha.history.at("val_loss").size(), 2u);
  expect_same_weights(a, b);
}

TEST(PipelineFitTest, TrainingOnAPipelineLearns) {
  PolicyGuard guard("float32");
  const Data d = make_data();
  Model model = small_cnn();
  const History h =
      model.fit(image_pipeline(d.x, d.y),
                {.batch_size = 10, .epochs = 15, .verbose = Verbosity::silent, .seed = 1});
  EXPECT_LT(h.history.at("loss").back(), h.history.at("loss").front());
}

TEST(PipelineFitTest, PipelinesWithoutTargetsOrSamplesAreRejected) {
  PolicyGuard guard("float32");
  const Data d = make_data();
  Model model = small_cnn();
  expect_error<ValueError>([&] { model.fit(image_pipeline(d.x, Tensor())); },
                           {"fit", "without targets", "Pipeline(x, y)"});
  expect_error<ValueError>([&] { model.fit(Pipeline()); }, {"fit", "an empty one"});
  expect_error<ValueError>([&] { model.evaluate(image_pipeline(d.x, Tensor())); },
                           {"evaluate", "without targets"});
  expect_error<ValueError>(
      [&] {
        model.fit(image_pipeline(d.x, d.y),
                  {.validation_data = image_pipeline(d.x, Tensor()), .seed = 1});
      },
      {"fit (validation_data)", "without targets"});
  expect_error<ValueError>([&] { model.fit(image_pipeline(d.x, d.y), {.batch_size = 0}); },
                           {"batch_size must be positive"});
  expect_error<ValueError>([&] { model.fit(image_pipeline(d.x, d.y), {.validation_split = 1.0}); },
                           {"validation_split must be in [0, 1)"});
}

}  // namespace
}  // namespace mixprec::data
