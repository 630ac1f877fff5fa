// Initializers: bounds and moments of each distribution against the Keras formulas (computed here),
// truncation at two standard deviations, fans, repeatability under set_seed, names and errors.
#include "mixprec/initializers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mixprec/layers/dense.h"
#include "mixprec/layers/input_layer.h"
#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

struct Moments {
  double mean = 0, stddev = 0, min = 1e300, max = -1e300;
};

Moments moments(const Tensor& t) {
  const auto v = t.to_vector<double>();
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.stddev += (x - m.mean) * (x - m.mean);
  m.stddev = std::sqrt(m.stddev / static_cast<double>(v.size()));
  return m;
}

// (in, out) = (200, 300): 60000 samples, so moments are within ~1% (stddev of a stddev estimate
// is stddev / sqrt(2n) ~ 0.3%).
const Shape kShape{200, 300};

TEST(InitializersTest, Fans) {
  auto f = initializers::compute_fans(Shape{200, 300});
  EXPECT_EQ(f.fan_in, 200);
  EXPECT_EQ(f.fan_out, 300);
  f = initializers::compute_fans(Shape{3, 3, 16, 32});  // a conv kernel: receptive field 9
  EXPECT_EQ(f.fan_in, 144);
  EXPECT_EQ(f.fan_out, 288);
  f = initializers::compute_fans(Shape{7});
  EXPECT_EQ(f.fan_in, 7);
  EXPECT_EQ(f.fan_out, 7);
  f = initializers::compute_fans(Shape{});
  EXPECT_EQ(f.fan_in, 1);
}

TEST(InitializersTest, UniformVarianceScalingLimits) {
  struct Case {
    const char* name;
    double limit;
  };
  for (const Case& c :
       {Case{"glorot_uniform", std::sqrt(6.0 / 500)}, Case{"he_uniform", std::sqrt(6.0 / 200)},
        Case{"lecun_uniform", std::sqrt(3.0 / 200)}}) {
    const Moments m = moments(initializers::Initializer(c.name)(kShape));
    EXPECT_GE(m.min, -c.limit) << c.name;
    EXPECT_LE(m.max, c.limit) << c.name;
    EXPECT_GT(m.max, 0.99 * c.limit) << c.name;
    EXPECT_NEAR(m.mean, 0, 0.01 * c.limit) << c.name;
    EXPECT_NEAR(m.stddev, c.limit / std::sqrt(3.0), 0.01 * c.limit) << c.name;
  }
}

TEST(InitializersTest, TruncatedNormalVarianceScaling) {
  struct Case {
    const char* name;
    double stddev;
  };
  for (const Case& c :
       {Case{"glorot_normal", std::sqrt(2.0 / 500)}, Case{"he_normal", std::sqrt(2.0 / 200)},
        Case{"lecun_normal", std::sqrt(1.0 / 200)}}) {
    const Moments m = moments(initializers::Initializer(c.name)(kShape));
    // The drawn stddev is the target (the truncation is compensated); samples stop at 2 sigma of
    // the underlying normal, whose stddev is target / 0.8796.
    EXPECT_NEAR(m.stddev, c.stddev, 0.015 * c.stddev) << c.name;
    EXPECT_NEAR(m.mean, 0, 0.02 * c.stddev) << c.name;
    const double cut = 2 * c.stddev / 0.87962566103423978;
    EXPECT_LE(m.max, cut * (1 + 1e-6)) << c.name;
    EXPECT_GE(m.min, -cut * (1 + 1e-6)) << c.name;
    EXPECT_GT(m.max, 0.95 * cut) << c.name;
  }
}

TEST(InitializersTest, ConstantsAndPlainRandom) {
  for (double v : initializers::Initializer("zeros")({3, 4}).to_vector<double>()) EXPECT_EQ(v, 0);
  for (double v : initializers::Initializer("ones")({3, 4}).to_vector<double>()) EXPECT_EQ(v, 1);
  for (double v : initializers::constant(2.5)({5}).to_vector<double>()) EXPECT_EQ(v, 2.5);
  const Moments n = moments(initializers::Initializer("random_normal")(kShape));
  EXPECT_NEAR(n.stddev, 0.05, 0.001);
  EXPECT_NEAR(n.mean, 0, 0.001);
  EXPECT_GT(n.max, 0.2);  // not truncated: 4 sigma appears among 60000 draws
  const Moments u = moments(initializers::Initializer("random_uniform")(kShape));
  EXPECT_GE(u.min, -0.05);
  EXPECT_LE(u.max, 0.05);
  EXPECT_GT(u.max, 0.049);
  const Moments shifted = moments(initializers::random_normal(3.0, 0.5)(kShape));
  EXPECT_NEAR(shifted.mean, 3.0, 0.01);
  EXPECT_NEAR(shifted.stddev, 0.5, 0.01);
}

TEST(InitializersTest, DtypeIsTheRequestedOne) {
  EXPECT_EQ(initializers::glorot_uniform()({4, 4}, kFloat16).dtype(), kFloat16);
  EXPECT_EQ(initializers::he_normal()({4, 4}, kFloat64).dtype(), kFloat64);
  EXPECT_THROW(initializers::zeros()({2}, kInt32), DTypeError);
}

TEST(InitializersTest, SetSeedMakesInitialWeightsRepeatable) {
  set_seed(42);
  const auto a = initializers::glorot_uniform()({8, 8}).to_vector<double>();
  const auto b = initializers::glorot_uniform()({8, 8}).to_vector<double>();
  set_seed(42);
  EXPECT_EQ(initializers::glorot_uniform()({8, 8}).to_vector<double>(), a);
  EXPECT_NE(a, b);
  // The same through a layer's build.
  set_seed(7);
  layers::Dense d1(5, {.kernel_initializer = "he_normal"});
  d1(Input({6}));
  set_seed(7);
  layers::Dense d2(5, {.kernel_initializer = "he_normal"});
  d2(Input({6}));
  EXPECT_EQ(d1.kernel().to_vector<double>(), d2.kernel().to_vector<double>());
  Generator gen(1), gen2(1);
  EXPECT_EQ(initializers::lecun_normal()({3, 3}, kFloat32, gen).to_vector<double>(),
            initializers::lecun_normal()({3, 3}, kFloat32, gen2).to_vector<double>());
}

TEST(InitializersTest, UnknownNameListsValidNames) {
  try {
    initializers::Initializer bad("xavier");
    ADD_FAILURE() << "accepted";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("xavier"), std::string::npos);
    for (const std::string& n : initializers::Initializer::valid_names()) {
      EXPECT_NE(msg.find(n), std::string::npos) << n;
      EXPECT_EQ(initializers::Initializer(n).name(), n);  // and every listed name works
    }
  }
}

TEST(InitializersTest, CustomInitializerResultIsCopiedAndChecked) {
  const Tensor shared = full({2, 2}, 3.0);
  initializers::Initializer same("same", [&](const Shape&, DType, Generator&) { return shared; });
  const Tensor a = same({2, 2});
  EXPECT_NE(a.data_ptr(), shared.data_ptr());  // a variable never aliases the function's tensor
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{3, 3, 3, 3}));
  EXPECT_THROW(same({3}), ShapeError);
  EXPECT_THROW(initializers::Initializer("empty", nullptr), ValueError);
}

}  // namespace
}  // namespace mixprec
