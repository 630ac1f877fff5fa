// SparseCategoricalCrossentropy from logits as the fused op (ops/sparse_crossentropy.h) on
// (batch, time, vocab) logits: values and gradients against the plain composition
// (log_softmax + one-hot gather + mean) and a long-double oracle, finite differences in float64,
// 16-bit logits against float32, ignore_class (Keras 3 masking: the mean over the positions not
// ignored; everything ignored gives 0 and zero gradients), label checks, and the memory the op
// holds (no float32 copy of 16-bit logits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/gradcheck.h"

namespace mixprec {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::tolerance_for;

Tensor random_logits(const Shape& shape, DType dtype, std::uint64_t seed, double scale = 3.0) {
  Generator gen(seed);
  return random_uniform(shape, -scale, scale, {.dtype = DType::float32}, gen).to(dtype);
}

// Labels in [0, classes), deterministic.
Tensor make_labels(const Shape& shape, std::int64_t classes, std::uint64_t seed) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(shape.numel()));
  std::uint64_t s = seed;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<std::int64_t>((s >> 33) % static_cast<std::uint64_t>(classes));
  }
  return from_vector(v, shape);
}

// The plain composition the fused op replaces: mean over positions of -log_softmax[label], with
// Keras's masking when ignore_class is set (sum over the kept positions / their count).
Tensor composed_loss(const Tensor& labels, const Tensor& logits,
                     std::optional<std::int64_t> ignore) {
  const Tensor x = logits.dtype() == kFloat64 ? logits : logits.to(kFloat32);
  const std::int64_t classes = x.shape()[x.rank() - 1];
  const Tensor log_p = log_softmax(x, -1);
  if (!ignore) return neg(mean(sum(one_hot(labels, classes, x.dtype()) * log_p, {-1})));
  std::vector<std::int64_t> y = labels.to_vector<std::int64_t>();
  std::vector<double> keep(y.size());
  double count = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    keep[i] = y[i] == *ignore ? 0.0 : 1.0;
    count += keep[i];
    if (y[i] == *ignore) y[i] = 0;
  }
  const Tensor w = from_vector(keep, labels.shape(), {.dtype = x.dtype()});
  const Tensor picked =
      sum(one_hot(from_vector(y, labels.shape()), classes, x.dtype()) * log_p, {-1});
  return neg(sum(picked * w)) / std::max(count, 1.0);
}

// The Keras formula in long double: sum over the kept positions of lse(x) - x[label], / count.
double oracle(const Tensor& labels, const Tensor& logits, std::optional<std::int64_t> ignore) {
  const std::vector<double> x = logits.to_vector<double>();
  const std::vector<std::int64_t> y = labels.to_vector<std::int64_t>();
  const std::size_t classes = static_cast<std::size_t>(logits.shape()[logits.rank() - 1]);
  long double total = 0;
  std::int64_t count = 0;
  for (std::size_t r = 0; r < y.size(); ++r) {
    if (ignore && y[r] == *ignore) continue;
    long double m = -INFINITY;
    for (std::size_t c = 0; c < classes; ++c) m = std::max<long double>(m, x[r * classes + c]);
    long double s = 0;
    for (std::size_t c = 0; c < classes; ++c) s += std::exp(x[r * classes + c] - m);
    total += m + std::log(s) - x[r * classes + static_cast<std::size_t>(y[r])];
    ++count;
  }
  return count == 0 ? 0.0 : static_cast<double>(total / count);
}

Tensor leaf(const Tensor& t) {
  Tensor l = t.detach();
  l.set_requires_grad(true);
  return l;
}

const losses::SparseCategoricalCrossentropy kLoss({.from_logits = true});

TEST(SparseCrossentropyTest, ThreeDimensionalLogitsMatchTheCompositionAndTheOracle) {
  const Shape shape{3, 5, 37};  // (batch, time, vocab)
  const Tensor x = random_logits(shape, kFloat32, 11);
  const Tensor y = make_labels({3, 5}, 37, 12);
  const Tensor xa = leaf(x), xb = leaf(x);
  const Tensor fused = kLoss(y, xa);
  const Tensor plain = composed_loss(y, xb, std::nullopt);
  EXPECT_EQ(fused.rank(), 0);
  EXPECT_EQ(fused.dtype(), kFloat32);
  // Each position's float32 term has the composition's bits; the mean adds them in double (the
  // composition's mean adds float partials in double): within float32 rounding.
  EXPECT_NEAR(fused.item(), plain.item(), 2e-6 * std::abs(plain.item()));
  EXPECT_NEAR(fused.item(), oracle(y, x, std::nullopt), 2e-6 * std::abs(plain.item()));
  const Tensor ga = grad(fused, {xa})[0], gb = grad(plain, {xb})[0];
  EXPECT_EQ(ga.shape(), shape);
  EXPECT_EQ(ga.dtype(), kFloat32);
  EXPECT_TRUE(all_close(ga, gb, tolerance_for(kFloat32)));
}

// The float32 values keep today's bits where the computation is the same: one row's loss (its
// mean is the value itself) and the gradient entries (softmax * g/N; at the label softmax * g/N
// - g/N).
TEST(SparseCrossentropyTest, Float32KeepsTheCompositionsBits) {
  for (const Shape& shape : {Shape{1, 1000}, Shape{2, 3, 37}}) {
    SCOPED_TRACE(shape.to_string());
    const Tensor x = random_logits(shape, kFloat32, 13, 8.0);
    const Shape label_shape(std::vector<std::int64_t>(shape.begin(), shape.end() - 1));
    const Tensor y = make_labels(label_shape, shape[shape.rank() - 1], 14);
    const Tensor xa = leaf(x), xb = leaf(x);
    const Tensor fused = kLoss(y, xa), plain = composed_loss(y, xb, std::nullopt);
    if (shape.numel() == 1000) EXPECT_EQ(fused.item(), plain.item());
    const std::vector<float> ga = grad(fused, {xa})[0].to_vector<float>();
    const std::vector<float> gb = grad(plain, {xb})[0].to_vector<float>();
    std::size_t differ = 0;
    for (std::size_t i = 0; i < ga.size(); ++i) differ += ga[i] != gb[i] ? 1 : 0;
    EXPECT_EQ(differ, 0u) << "of " << ga.size() << " gradient entries";
  }
}

TEST(SparseCrossentropyTest, Float64GradientsMatchFiniteDifferences) {
  const Tensor x = random_logits({2, 3, 6}, kFloat64, 21);
  const std::vector<std::int64_t> y = {0, 5, 2, -1, 3, -1};  // -1: ignored positions
  const Tensor labels = from_vector(y, {2, 3});
  const losses::SparseCategoricalCrossentropy plain({.from_logits = true});
  const losses::SparseCategoricalCrossentropy ignoring({.from_logits = true, .ignore_class = -1});
  const Tensor kept = from_vector(std::vector<std::int64_t>{0, 5, 2, 1, 3, 4}, {2, 3});
  EXPECT_EQ(plain(kept, x).dtype(), kFloat64);
  EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return plain(kept, in[0]); }, {x}));
  EXPECT_TRUE(
      gradcheck([&](const std::vector<Tensor>& in) { return ignoring(labels, in[0]); }, {x}));
  EXPECT_NEAR(ignoring(labels, x).item(), oracle(labels, x, -1), 1e-12);
}

// 16-bit logits against float32 logits holding the same (rounded) values: the loss is computed
// in float32 from the same numbers, so it is the same float32 value; the gradient is the float32
// gradient rounded once to the 16-bit dtype (so within tolerance_for(dtype), in fact bit for bit).
TEST(SparseCrossentropyTest, SixteenBitLogitsMatchFloat32) {
  const Tensor y = make_labels({2, 4}, 50, 32);
  for (DType dtype : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x16 = leaf(random_logits({2, 4, 50}, dtype, 31));
    const Tensor x32 = leaf(x16.to(kFloat32));
    const Tensor l16 = kLoss(y, x16), l32 = kLoss(y, x32);
    EXPECT_EQ(l16.dtype(), kFloat32);
    EXPECT_EQ(l16.item(), l32.item());
    const Tensor g16 = grad(l16, {x16})[0], g32 = grad(l32, {x32})[0];
    EXPECT_EQ(g16.dtype(), dtype);  // written once in the logits' dtype by the fused backward
    EXPECT_TRUE(all_close(g16, g32, tolerance_for(dtype)));
    EXPECT_EQ(g16.to_vector<double>(), g32.to(dtype).to_vector<double>());
    // And against the float32 composition on the same values.
    const Tensor xc = leaf(x16.to(kFloat32));
    const Tensor gc = grad(composed_loss(y, xc, std::nullopt), {xc})[0];
    EXPECT_TRUE(all_close(g16, gc, tolerance_for(dtype)));
  }
}

TEST(SparseCrossentropyTest, IgnoreClassLeavesPositionsOutOfTheSumAndTheCount) {
  const Shape shape{2, 4, 9};
  const Tensor x = random_logits(shape, kFloat32, 41);
  // Sequence 1 is all padding (label 0 here, a real class: ignore_class may be one).
  const std::vector<std::int64_t> y = {3, 0, 8, 0, 0, 0, 0, 0};
  const Tensor labels = from_vector(y, {2, 4});
  const losses::SparseCategoricalCrossentropy loss({.from_logits = true, .ignore_class = 0});
  const Tensor xa = leaf(x), xb = leaf(x);
  const Tensor fused = loss(labels, xa);
  const Tensor plain = composed_loss(labels, xb, 0);
  // Mean over the 2 kept positions (not the 8 positions).
  EXPECT_NEAR(fused.item(), oracle(labels, x, 0), 2e-6 * std::abs(fused.item()));
  EXPECT_NEAR(fused.item(), plain.item(), 2e-6 * std::abs(fused.item()));
  const Tensor ga = grad(fused, {xa})[0], gb = grad(plain, {xb})[0];
  EXPECT_TRUE(all_close(ga, gb, tolerance_for(kFloat32)));
  // The ignored positions' gradient rows are exactly zero; a kept row sums to ~0 (softmax -
  // onehot).
  const std::vector<float> g = ga.to_vector<float>();
  for (std::size_t r = 0; r < y.size(); ++r) {
    double row = 0;
    for (std::size_t c = 0; c < 9; ++c) {
      if (y[r] == 0) {
        EXPECT_EQ(g[r * 9 + c], 0.0f) << "row " << r;
      }
      row += g[r * 9 + c];
    }
    EXPECT_NEAR(row, 0.0, 1e-6);
  }
  // The probabilities path masks the same way.
  const Tensor probs = softmax(x, -1);
  const losses::SparseCategoricalCrossentropy on_probs({.ignore_class = 0});
  EXPECT_NEAR(on_probs(labels, probs).item(), oracle(labels, x, 0), 2e-5 * fused.item());
}

TEST(SparseCrossentropyTest, EverythingIgnoredGivesZeroLossAndZeroGradientWithoutNaN) {
  const Tensor x = random_logits({2, 3, 5}, kFloat16, 51);
  const Tensor labels = from_vector(std::vector<std::int64_t>(6, -100), {2, 3});
  for (bool from_logits : {true, false}) {
    const losses::SparseCategoricalCrossentropy loss(
        {.from_logits = from_logits, .ignore_class = -100});
    const Tensor input = leaf(from_logits ? x : softmax(x.to(kFloat32), -1).detach());
    const Tensor l = loss(labels, input);
    EXPECT_EQ(l.item(), 0.0) << from_logits;
    const Tensor g = grad(l, {input})[0];
    EXPECT_TRUE(all_finite(g));
    for (double v : g.to_vector<double>()) EXPECT_EQ(v, 0.0);
  }
}

TEST(SparseCrossentropyTest, LabelsOutOfRangeOtherThanTheIgnoredClassAreErrors) {
  const Tensor x = random_logits({2, 3, 5}, kFloat32, 61);
  const losses::SparseCategoricalCrossentropy loss({.from_logits = true, .ignore_class = -100});
  EXPECT_NO_THROW(loss(from_vector(std::vector<std::int64_t>{1, -100, 4, 0, -100, 2}, {2, 3}), x));
  try {
    loss(from_vector(std::vector<std::int64_t>{1, -100, 5, 0, -100, 2}, {2, 3}), x);
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("label 5"), std::string::npos) << message;
    EXPECT_NE(message.find("ignore_class -100"), std::string::npos) << message;
  }
  EXPECT_THROW(kLoss(from_vector(std::vector<std::int64_t>{1, -100, 4, 0, 1, 2}, {2, 3}), x),
               ValueError);
  // int32 and uint8 labels, and a trailing extent-1 axis.
  const Tensor y = make_labels({2, 3}, 5, 62);
  const double expected = kLoss(y, x).item();
  EXPECT_EQ(kLoss(y.to(kInt32), x).item(), expected);
  EXPECT_EQ(kLoss(y.to(kUInt8), x).item(), expected);
  EXPECT_EQ(kLoss(y.reshape({2, 3, 1}), x).item(), expected);
}

TEST(SparseCrossentropyTest, PeakMemoryHoldsNoFloat32CopyOfTheLogits) {
  // float16 logits of 64 x 4096 (512 KiB): a float32 copy alone would be 1 MiB. Forward and
  // backward together allocate the float16 gradient (512 KiB) and per-row values (64 x 3 floats).
  const Tensor x = leaf(random_logits({4, 16, 4096}, kFloat16, 71));
  const Tensor y = make_labels({4, 16}, 4096, 72);
  const std::int64_t logits_bytes = x.nbytes();
  reset_peak_memory_stats();
  const std::int64_t before = memory_stats().current_bytes;
  const Tensor g = grad(kLoss(y, x), {x})[0];
  const std::int64_t peak = memory_stats().peak_bytes - before;
  EXPECT_EQ(g.dtype(), kFloat16);
  EXPECT_LT(peak, logits_bytes + logits_bytes / 4)
      << "peak " << peak << " bytes for " << logits_bytes << " bytes of logits";
}

}  // namespace
}  // namespace mixprec
