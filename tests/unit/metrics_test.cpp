// Metrics against counts worked out by hand, accumulation across batches, reset, name resolution
// of "accuracy" by the loss (Keras compile()), and argument errors.
#include "mixprec/metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/mixprec.h"

namespace mixprec {
namespace {

Tensor mat(const std::vector<double>& v, std::int64_t rows, std::int64_t cols,
           DType dtype = kFloat32) {
  return from_vector(v, {rows, cols}, {.dtype = dtype});
}
Tensor vec(const std::vector<double>& v, DType dtype = kFloat32) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())}, {.dtype = dtype});
}
Tensor labels(const std::vector<std::int64_t>& v) {
  return from_vector(v, {static_cast<std::int64_t>(v.size())});
}

// Rows' argmax: 1, 0, 2, 2.
const std::vector<double> kPred = {0.1, 0.7, 0.2,  //
                                   0.8, 0.1, 0.1,  //
                                   0.2, 0.3, 0.5,  //
                                   0.0, 0.4, 0.6};

TEST(MetricsTest, SparseCategoricalAccuracyAccumulatesAndResets) {
  metrics::SparseCategoricalAccuracy m;
  EXPECT_EQ(m.name(), "sparse_categorical_accuracy");
  EXPECT_EQ(m.result(), 0.0);
  m.update_state(labels({1, 0, 1, 2}), mat(kPred, 4, 3));  // 3 of 4
  EXPECT_DOUBLE_EQ(m.result(), 0.75);
  m.update_state(labels({0, 0}).reshape({2, 1}),
                 mat({0.9, 0.1, 0.0, 0.3, 0.3, 0.4}, 2, 3));  // 1 of 2
  EXPECT_DOUBLE_EQ(m.result(), 4.0 / 6.0);
  m.reset_state();
  EXPECT_EQ(m.result(), 0.0);
  m.update_state(labels({2, 2, 2, 2}), mat(kPred, 4, 3).to(kFloat16));  // 16-bit predictions
  EXPECT_DOUBLE_EQ(m.result(), 0.5);
}

TEST(MetricsTest, CategoricalAccuracy) {
  metrics::CategoricalAccuracy m;
  const std::vector<double> t = {0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0};  // classes 1, 2, 2, 0
  m.update_state(mat(t, 4, 3), mat(kPred, 4, 3));
  EXPECT_DOUBLE_EQ(m.result(), 0.5);
  EXPECT_THROW(m.update_state(labels({1, 2, 2, 0}), mat(kPred, 4, 3)), ShapeError);
}

TEST(MetricsTest, BinaryAccuracyWithThresholds) {
  const Tensor p = vec({0.2, 0.6, 0.5, 0.9, 0.45});
  const Tensor t = vec({0, 1, 1, 0, 1});
  metrics::BinaryAccuracy half;  // > 0.5: 0, 1, 0, 1, 0 -> matches at 0, 1
  half.update_state(t, p);
  EXPECT_DOUBLE_EQ(half.result(), 2.0 / 5.0);
  metrics::BinaryAccuracy low({.threshold = 0.4});  // 0, 1, 1, 1, 1 -> mismatch only at 3
  low.update_state(t.reshape({5, 1}), p);
  EXPECT_DOUBLE_EQ(low.result(), 4.0 / 5.0);
  EXPECT_EQ(low.name(), "binary_accuracy");
}

TEST(MetricsTest, AccuracyIsExactEquality) {
  metrics::Accuracy m;
  m.update_state(vec({1, 2, 3, 4}), vec({1, 2.5, 3, 0}));
  EXPECT_DOUBLE_EQ(m.result(), 0.5);
  EXPECT_THROW(m.update_state(vec({1, 2}), vec({1, 2, 3})), ShapeError);
}

TEST(MetricsTest, MeanOfValues) {
  metrics::Mean m;
  EXPECT_EQ(m.name(), "mean");
  m.update_state(vec({1, 2, 3}));
  m.update_state(10.0);
  EXPECT_DOUBLE_EQ(m.result(), 4.0);
  m.update_state(scalar(0.5, {.dtype = kFloat16}));
  EXPECT_DOUBLE_EQ(m.result(), 16.5 / 5.0);
  EXPECT_THROW(m.update_state(vec({1}), vec({1})), ValueError);
  metrics::SparseCategoricalAccuracy a;
  EXPECT_THROW(a.update_state(vec({1})), ValueError);
}

TEST(MetricsTest, CopiesShareState) {
  metrics::Mean m({.name = "loss"});
  metrics::Metric copy = m;
  copy.update_state(3.0);
  EXPECT_EQ(m.result(), 3.0);
  EXPECT_EQ(m.name(), "loss");
}

TEST(MetricsTest, AccuracyResolvesByLossLikeKeras) {
  // Labels (N,) vs (N, 3) predictions: only the sparse metric understands them; categorical
  // targets only the categorical one, and so on.
  metrics::Metric sparse = metrics::get("accuracy", "sparse_categorical_crossentropy");
  EXPECT_EQ(sparse.name(), "accuracy");
  sparse.update_state(labels({1, 0, 1, 2}), mat(kPred, 4, 3));
  EXPECT_DOUBLE_EQ(sparse.result(), 0.75);

  metrics::Metric categorical = metrics::get("acc", "categorical_crossentropy");
  EXPECT_EQ(categorical.name(), "acc");
  categorical.update_state(mat({0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0}, 4, 3), mat(kPred, 4, 3));
  EXPECT_DOUBLE_EQ(categorical.result(), 0.5);

  metrics::Metric binary = metrics::get("accuracy", "binary_crossentropy");
  binary.update_state(vec({0, 1, 1}), vec({0.2, 0.6, 0.4}));
  EXPECT_DOUBLE_EQ(binary.result(), 2.0 / 3.0);

  metrics::Metric plain = metrics::get("accuracy", "mse");
  plain.update_state(vec({0, 1, 1}), vec({0.2, 1.0, 1.0}));  // exact equality, not thresholding
  EXPECT_DOUBLE_EQ(plain.result(), 2.0 / 3.0);

  EXPECT_EQ(metrics::get("sparse_categorical_accuracy").name(), "sparse_categorical_accuracy");
  EXPECT_EQ(metrics::get("binary_accuracy").name(), "binary_accuracy");
  try {
    metrics::get("auc");
    FAIL() << "expected a ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("accuracy"), std::string::npos);
  }
}

TEST(MetricsTest, ArgumentErrors) {
  metrics::SparseCategoricalAccuracy m;
  try {
    m.update_state(labels({1, 0}), mat(kPred, 4, 3));
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("(2,)"), std::string::npos) << message;
    EXPECT_NE(message.find("(4, 3)"), std::string::npos) << message;
  }
  EXPECT_THROW(m.update_state(labels({1, 0, 1, 2}), labels({1, 0, 1, 2})), DTypeError);
  EXPECT_THROW(metrics::Metric().result(), ValueError);
}

TEST(MetricsTest, UpdatesRecordNoGraph) {
  Tensor p = mat(kPred, 4, 3);
  p.set_requires_grad(true);
  metrics::SparseCategoricalAccuracy m;
  m.update_state(labels({1, 0, 1, 2}), p * 2.0);
  EXPECT_DOUBLE_EQ(m.result(), 0.75);
  EXPECT_FALSE(p.grad().defined());
}

}  // namespace
}  // namespace mixprec
