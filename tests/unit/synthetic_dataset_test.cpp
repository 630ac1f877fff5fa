// Synthetic images: the spec parser (valid forms and each malformed one), the bounded pool, the
// cyclic sample -> pool mapping through the pipeline, seeding, and memory that does not grow with
// the sample count.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mixprec/data/synthetic.h"
#include "mixprec/mixprec.h"
#include "support/expect_error.h"

namespace mixprec::data {
namespace {

using testing::expect_error;

TEST(SyntheticSpecTest, ParsesSizeClassesAndSamples) {
  const SyntheticSpec a = parse_synthetic_spec("synthetic:224x200x3:100");
  EXPECT_EQ(a.height, 224);
  EXPECT_EQ(a.width, 200);
  EXPECT_EQ(a.channels, 3);
  EXPECT_EQ(a.classes, 100);
  EXPECT_EQ(a.samples, kSyntheticDefaultSamples);
  const SyntheticSpec b = parse_synthetic_spec("synthetic:32x32x1:10:5000");
  EXPECT_EQ(b.channels, 1);
  EXPECT_EQ(b.classes, 10);
  EXPECT_EQ(b.samples, 5000);
}

TEST(SyntheticSpecTest, MalformedSpecsSayWhatIsWrong) {
  const std::string form = "synthetic:HxWxC:CLASSES[:SAMPLES]";
  expect_error<ValueError>([] { parse_synthetic_spec("synth:32x32x3:10"); },
                           {"does not start with 'synthetic:'", form});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic"); }, {"got 0", form});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:32x32x3"); }, {"got 1", form});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:32x32x3:10:5:7"); },
                           {"got 4", form});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:32x32:10"); },
                           {"'32x32' is not HxWxC", form});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:32xAx3:10"); },
                           {"width 'A' is not a positive whole number"});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:32x32x-3:10"); },
                           {"channel count '-3'"});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:0x32x3:10"); },
                           {"height must be in [1, ", "got 0"});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:32x32x3:1"); },
                           {"at least 2 classes", "got 1"});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:32x32x3:10:0"); },
                           {"sample count must be in [1, ", "got 0"});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:32x32x3:"); },
                           {"class count '' is not a positive whole number"});
  expect_error<ValueError>([] { parse_synthetic_spec("synthetic:99999999999x32x3:10"); },
                           {"height '99999999999'"});
}

TEST(SyntheticImagesTest, DefaultPoolFitsTheByteBudget) {
  // 224x224x3 float32 = 602,112 bytes; 64 MiB holds 111 of them.
  const SyntheticImages big({.height = 224, .width = 224, .channels = 3, .classes = 100});
  EXPECT_EQ(big.pool_size(), (std::int64_t{64} << 20) / (224 * 224 * 3 * 4));
  EXPECT_EQ(big.pool_size(), 111);
  // Small images hit the count cap instead.
  const SyntheticImages small({.height = 4, .width = 4, .channels = 1, .classes = 3});
  EXPECT_EQ(small.pool_size(), kSyntheticMaxPool);
}

TEST(SyntheticImagesTest, SampleIIsPoolImageIModP) {
  const SyntheticImages data(
      {.height = 3, .width = 2, .channels = 2, .classes = 3, .pool_samples = 5, .seed = 7});
  ASSERT_EQ(data.pool_size(), 5);
  const Tensor pool = data.pool_images();
  ASSERT_EQ(pool.shape(), (Shape{5, 3, 2, 2}));
  EXPECT_EQ(data.pool_labels().to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{0, 1, 2, 0, 1}));
  const std::vector<float> pool_values = pool.to_vector<float>();
  for (float v : pool_values) {
    EXPECT_GE(v, 0.0f);
    EXPECT_LE(v, 1.0f);
  }

  const Pipeline p = data.pipeline(12);
  EXPECT_EQ(p.size(), 12);
  // The dataset holds indices, not images.
  EXPECT_EQ(p.dataset().features().dtype(), DType::int64);
  EXPECT_EQ(p.dataset().features().shape(), (Shape{12}));
  const Batch b = p.batch(0, 12);
  ASSERT_EQ(b.x.shape(), (Shape{12, 3, 2, 2}));
  ASSERT_EQ(b.x.dtype(), DType::float32);
  const std::vector<float> x = b.x.to_vector<float>();
  const std::vector<std::int64_t> y = b.y.to_vector<std::int64_t>();
  constexpr std::size_t kImage = 3 * 2 * 2;
  for (std::size_t i = 0; i < 12; ++i) {
    const std::size_t p_index = i % 5;
    EXPECT_EQ(std::memcmp(x.data() + i * kImage, pool_values.data() + p_index * kImage,
                          kImage * sizeof(float)),
              0)
        << "sample " << i;
    EXPECT_EQ(y[i], static_cast<std::int64_t>(p_index % 3)) << "sample " << i;
  }
  // Distinct pool images differ.
  EXPECT_NE(std::memcmp(pool_values.data(), pool_values.data() + kImage, kImage * sizeof(float)),
            0);
}

TEST(SyntheticImagesTest, TheSeedFixesThePool) {
  const SyntheticImageOptions o{
      .height = 4, .width = 4, .channels = 3, .classes = 2, .pool_samples = 3, .seed = 11};
  SyntheticImageOptions other = o;
  other.seed = 12;
  const auto a = SyntheticImages(o).pool_images().to_vector<float>();
  const auto b = SyntheticImages(o).pool_images().to_vector<float>();
  const auto c = SyntheticImages(other).pool_images().to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(SyntheticImagesTest, MemoryDoesNotGrowWithTheSampleCount) {
  const SyntheticImages data({.height = 224, .width = 224, .channels = 3, .classes = 100});
  const std::int64_t before = memory_stats(Device::cpu()).current_bytes;
  const Pipeline p = data.pipeline(100000);
  const std::int64_t after = memory_stats(Device::cpu()).current_bytes;
  // Index and label per sample: 16 bytes each (100,000 images would be 60 GB).
  EXPECT_LE(after - before, 100000 * 16 + 4096);
  EXPECT_EQ(p.sample_shape(), (Shape{224, 224, 3}));
  const Batch b = p.batch(99990, 100000);
  EXPECT_EQ(b.x.shape(), (Shape{10, 224, 224, 3}));
  // Sample 99990 is pool image 99990 mod 111.
  EXPECT_EQ(b.y.to_vector<std::int64_t>()[0], (99990 % 111) % 100);
}

TEST(SyntheticImagesTest, BadOptionsAreValueErrors) {
  expect_error<ValueError>([] { SyntheticImages({.height = 0}); }, {"height must be >= 1"});
  expect_error<ValueError>([] { SyntheticImages({.classes = 1}); }, {"classes must be >= 2"});
  expect_error<ValueError>([] { SyntheticImages({.pool_samples = -1}); },
                           {"pool_samples must be >= 0"});
  expect_error<ValueError>(
      [] { SyntheticImages({.height = 100000, .width = 100000, .channels = 3}); },
      {"100000x100000x3", "larger than the 64 MiB"});
  const SyntheticImages data({.height = 2, .width = 2, .channels = 1, .classes = 2});
  expect_error<ValueError>([&] { data.pipeline(0); }, {"samples must be >= 1, got 0"});
}

TEST(SyntheticImagesTest, AModelFitsThePool) {
  // 10 pool images, 10 classes, 4x4x1: a softmax regression memorises them.
  set_seed(3);
  clear_session();
  const SyntheticImages data(
      {.height = 4, .width = 4, .channels = 1, .classes = 10, .pool_samples = 10, .seed = 5});
  auto in = Input({4, 4, 1});
  auto x = layers::Flatten()(in);
  x = layers::Dense(10)(x);
  Model model(in, layers::Activation("softmax")(x));
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 0.05}),
                 .metrics = {std::string("accuracy")}});
  const History h = model.fit(
      data.pipeline(200), {.batch_size = 20, .epochs = 8, .verbose = Verbosity::silent, .seed = 1});
  EXPECT_LT(h.history.at("loss").back(), 0.5 * h.history.at("loss").front());
  EXPECT_GE(model.evaluate(data.pipeline(10), {.verbose = Verbosity::silent}).at("accuracy"), 0.9);
}

}  // namespace
}  // namespace mixprec::data
