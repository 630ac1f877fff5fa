// Training end to end on CUDA against the CPU (label gpu; SKIPPED without a GPU). A small MLP
// (784-64-10, the seed's shape at a test's size) learns a rule the test makes: 10 class centres
// in [0, 1)^784, each sample its class's centre scaled by 0.15 plus uniform [0, 1) noise, so that
// accuracy lands well above chance and well below 100% and a broken step shows. (Synthetic data
// keeps the test fast and independent of the Fashion-MNIST package; tests/e2e has the real-data
// run on the CPU.)
//  - The same seed on CPU and CUDA, float32 and mixed_float16: final test accuracy within 0.5
//    points, and both above 90% (chance is 10%; the CPU reaches 96.75% under both policies).
//  - fit() on CUDA (batches prefetched by a producer thread, loss and accuracy accumulated on the
//    device) against a loop of train_on_batch over the same batches, moved synchronously: the
//    per-epoch loss (weighted by batch size in the test, on the host) agrees.
//  - evaluate() on CUDA (metrics counted on the device) against the accuracy the test computes on
//    the host from predict(); each metric's device count against its host count.
//  - The prefetcher's overlapped copies under load: every batch arrives exactly, and GPU work
//    queued on it right away sees the copied values (the compute stream waited for the copy),
//    while the GPU allocates and frees blocks of the batch's size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "data/prefetch.h"
#include "gpu_support.h"
#include "mixprec/applications.h"
#include "mixprec/mixprec.h"
#include "support/policy_guard.h"

namespace mixprec::testing {
namespace {

constexpr std::int64_t kFeatures = 784, kClasses = 10;
constexpr std::int64_t kTrain = 6144, kTest = 4096;
constexpr std::int64_t kBatch = 256;
constexpr int kEpochs = 20;  // converged: CPU float32 and mixed_float16 agree
constexpr std::uint64_t kShuffleSeed = 11;

struct Split {
  Tensor x, y;  // (n, 784) float32 on the CPU, (n,) int64
};

// n samples of the rule: x = 0.15 * centre[label] + noise, noise uniform in [0, 1).
Split make_split(std::int64_t n, const std::vector<float>& centres, std::uint64_t seed) {
  Generator gen(seed);
  std::vector<float> x(static_cast<std::size_t>(n * kFeatures));
  std::vector<std::int64_t> y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto label = static_cast<std::int64_t>(gen.below(static_cast<std::uint64_t>(kClasses)));
    y[static_cast<std::size_t>(i)] = label;
    for (std::int64_t j = 0; j < kFeatures; ++j) {
      x[static_cast<std::size_t>(i * kFeatures + j)] =
          0.15f * centres[static_cast<std::size_t>(label * kFeatures + j)] +
          static_cast<float>(gen.uniform());
    }
  }
  return {from_vector(x, {n, kFeatures}, {.device = Device::cpu()}),
          from_vector(y, {n}, {.dtype = DType::int64, .device = Device::cpu()})};
}

struct Data {
  Split train, test;
};

const Data& data() {
  static const Data d = [] {
    Generator gen(2026);
    std::vector<float> centres(static_cast<std::size_t>(kClasses * kFeatures));
    for (float& c : centres) c = static_cast<float>(gen.uniform());
    return Data{make_split(kTrain, centres, 1), make_split(kTest, centres, 2)};
  }();
  return d;
}

// A fresh 784-64-10 MLP on `device` under `policy`, the same initial weights for the same seed on
// either device (initializers sample on the host).
Model build(Device device, const std::string& policy) {
  mixed_precision::set_global_policy(mixed_precision::Policy(policy));
  set_seed(7);
  clear_session();
  DeviceScope on(device);
  Model model = applications::mlp(
      {.units = 64, .hidden_layers = 1, .input_features = kFeatures, .classes = kClasses});
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 1e-3}),
                 .loss = std::string("sparse_categorical_crossentropy"),
                 .metrics = {std::string("accuracy")}});
  return model;
}

struct Outcome {
  double accuracy = 0.0;
  double final_loss = 0.0;
};

Outcome train_and_test(Device device, const std::string& policy) {
  Model model = build(device, policy);
  const History h = model.fit(data().train.x, data().train.y,
                              {.batch_size = kBatch,
                               .epochs = kEpochs,
                               .verbose = Verbosity::silent,
                               .seed = kShuffleSeed});
  const Scores s = model.evaluate(data().test.x, data().test.y,
                                  {.batch_size = 1024, .verbose = Verbosity::silent});
  return {s.at("accuracy"), h.history.at("loss").back()};
}

class TrainingParity : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainingParity, CudaAccuracyMatchesTheCpuWithinHalfAPoint) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard restore_policy;
  const Outcome cpu = train_and_test(Device::cpu(), GetParam());
  const Outcome gpu = train_and_test(kGpu, GetParam());
  EXPECT_GT(cpu.accuracy, 0.9) << "the CPU run did not learn the rule";
  EXPECT_GT(gpu.accuracy, 0.9) << "the CUDA run did not learn the rule";
  // 0.5 points of 4096 test samples: 20 samples. A guess to confirm on the first GPU run
  // (tests/gpu/TOLERANCES.md): the two backends' float32 sums differ in order (cuBLASLt vs
  // oneDNN), so the weights drift apart over the steps and samples near a decision boundary may
  // flip; under mixed_float16 the 16-bit roundings add to that. If the measured gap is larger but
  // both runs learn (> 90%), widen this with the measurement, do not tune the training.
  EXPECT_NEAR(gpu.accuracy, cpu.accuracy, 0.005)
      << GetParam() << ": CPU " << cpu.accuracy << ", CUDA " << gpu.accuracy;
  // The loss still moves at the end (CPU float32 0.216, mixed_float16 0.205): 10%.
  EXPECT_NEAR(gpu.final_loss, cpu.final_loss, 0.1 * cpu.final_loss)
      << GetParam() << ": last-epoch loss CPU " << cpu.final_loss << ", CUDA " << gpu.final_loss;
}

INSTANTIATE_TEST_SUITE_P(Policies, TrainingParity,
                         ::testing::Values(std::string("float32"), std::string("mixed_float16")),
                         [](const auto& info) { return info.param; });

TEST(TrainingOnCuda, FitWithPrefetchingSeesTheSameBatchesAsTrainOnBatch) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard restore_policy;
  constexpr int kFitEpochs = 2;
  Model fitted = build(kGpu, "float32");
  const History h = fitted.fit(data().train.x, data().train.y,
                               {.batch_size = kBatch,
                                .epochs = kFitEpochs,
                                .verbose = Verbosity::silent,
                                .seed = kShuffleSeed});
  ASSERT_EQ(h.epochs.size(), static_cast<std::size_t>(kFitEpochs));
  EXPECT_EQ(h.epochs[0].step_ms.size(), static_cast<std::size_t>(kTrain / kBatch));
  for (double ms : h.epochs[0].step_ms) EXPECT_GT(ms, 0.0);

  // The same model and batches, stepped one at a time with the batches moved on this thread:
  // fit's shuffle is BatchLoader's with the same seed.
  Model stepped = build(kGpu, "float32");
  data::BatchLoader loader(
      data::Dataset(data().train.x, data().train.y),
      {.batch_size = kBatch, .shuffle = data::Shuffle::yes, .seed = kShuffleSeed});
  for (int e = 0; e < kFitEpochs; ++e) {
    double weighted = 0.0, samples = 0.0;
    for (const data::Batch& b : loader.next_epoch()) {
      const Scores s = stepped.train_on_batch(b.x.to(kGpu), b.y.to(kGpu));
      weighted += s[0] * static_cast<double>(b.x.dim(0));
      samples += static_cast<double>(b.x.dim(0));
    }
    const double expected = weighted / samples;
    // Same kernels on the same inputs: only the order of the float64 loss sums differs.
    EXPECT_NEAR(h.history.at("loss")[static_cast<std::size_t>(e)], expected, 1e-5 * expected)
        << "epoch " << e + 1;
  }
}

TEST(TrainingOnCuda, EvaluateCountsOnTheDeviceWhatPredictShows) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard restore_policy;
  Model model = build(kGpu, "float32");
  model.fit(
      data().train.x, data().train.y,
      {.batch_size = kBatch, .epochs = 1, .verbose = Verbosity::silent, .seed = kShuffleSeed});
  const Scores s = model.evaluate(data().test.x, data().test.y,
                                  {.batch_size = 1000, .verbose = Verbosity::silent});
  const Tensor probs = model.predict(data().test.x, {.batch_size = 1000});
  ASSERT_EQ(probs.device(), kGpu);
  const std::vector<float> p = on_cpu(probs).to_vector<float>();
  const std::vector<std::int64_t> labels = data().test.y.to_vector<std::int64_t>();
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < kTest; ++i) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < kClasses; ++c) {
      if (p[static_cast<std::size_t>(i * kClasses + c)] >
          p[static_cast<std::size_t>(i * kClasses + best)]) {
        best = c;
      }
    }
    correct += best == labels[static_cast<std::size_t>(i)] ? 1 : 0;
  }
  EXPECT_DOUBLE_EQ(s.at("accuracy"), static_cast<double>(correct) / static_cast<double>(kTest));
}

// Each metric counted on the device (no read per batch) gives exactly the host count: the same
// comparisons in float64 over two batches, float16 predictions included.
TEST(MetricsOnCuda, CountOnTheDeviceExactlyAsOnTheHost) {
  MIXPREC_REQUIRE_GPU();
  constexpr std::int64_t kRows = 300, kCols = 7;
  struct Case {
    std::string what;
    metrics::Metric host, device;
    Tensor y_true, y_pred;  // on the CPU
  };
  std::vector<Case> cases;
  for (int batch = 0; batch < 2; ++batch) {
    const auto seed = static_cast<std::uint64_t>(100 + batch);
    const Tensor scores = sample({kRows, kCols}, 0.0, 1.0, DType::float16, seed);
    const Tensor labels = argmax(sample({kRows, kCols}, 0.0, 1.0, DType::float32, seed + 10), -1);
    const Tensor one_hot_targets = one_hot(labels, kCols);
    const Tensor binary_targets =
        greater(sample({kRows, kCols}, 0.0, 1.0, DType::float32, seed + 20),
                full({}, 0.5, {.device = Device::cpu()}))
            .to(DType::float32);
    const Tensor rounded =
        greater(scores.to(DType::float32), full({}, 0.5, {.device = Device::cpu()}))
            .to(DType::float32);
    if (batch == 0) {
      cases.push_back({"sparse", metrics::SparseCategoricalAccuracy(),
                       metrics::SparseCategoricalAccuracy(), labels, scores});
      cases.push_back({"categorical", metrics::CategoricalAccuracy(),
                       metrics::CategoricalAccuracy(), one_hot_targets, scores});
      cases.push_back(
          {"binary", metrics::BinaryAccuracy(), metrics::BinaryAccuracy(), binary_targets, scores});
      cases.push_back(
          {"accuracy", metrics::Accuracy(), metrics::Accuracy(), binary_targets, rounded});
    } else {
      cases[0].y_true = labels, cases[0].y_pred = scores;
      cases[1].y_true = one_hot_targets, cases[1].y_pred = scores;
      cases[2].y_true = binary_targets, cases[2].y_pred = scores;
      cases[3].y_true = binary_targets, cases[3].y_pred = rounded;
    }
    for (Case& c : cases) {
      c.host.update_state(c.y_true, c.y_pred);
      c.device.update_state(on_gpu(c.y_true), on_gpu(c.y_pred));
    }
  }
  for (const Case& c : cases) {
    EXPECT_GT(c.host.result(), 0.0) << c.what;
    EXPECT_EQ(c.device.result(), c.host.result()) << c.what;
  }
  metrics::Mean host_mean, device_mean;
  const Tensor values = sample({kRows}, -1.0, 3.0, DType::float32, 7);
  host_mean.update_state(values);
  device_mean.update_state(on_gpu(values));
  EXPECT_NEAR(device_mean.result(), host_mean.result(), 1e-12);
}

TEST(PrefetchOnCuda, CopiedBatchesArriveExactlyWhileTheGpuIsBusy) {
  MIXPREC_REQUIRE_GPU();
  const data::Dataset dataset(data().train.x, data().train.y);
  data::BatchLoader loader(dataset, {.batch_size = 512, .shuffle = data::Shuffle::yes, .seed = 3});
  const data::Epoch epoch = loader.next_epoch();
  const data::Pipeline pipeline(dataset);
  const Tensor w = on_gpu(sample({kFeatures, kFeatures}, -0.05, 0.05, DType::float32, 9));
  for (data::DeviceCopy copy : {data::DeviceCopy::overlapped, data::DeviceCopy::ordered}) {
    SCOPED_TRACE(copy == data::DeviceCopy::overlapped ? "overlapped" : "ordered");
    data::Prefetcher batches(
        pipeline, epoch,
        {.device = kGpu, .mode = data::PrefetchMode::background, .depth = 2, .copy = copy});
    for (std::int64_t i = 0; i < batches.size(); ++i) {
      const data::Batch b = batches.next();
      ASSERT_EQ(b.x.device(), kGpu);
      ASSERT_EQ(b.y.device(), kGpu);
      // Queued at once: reads the batch only if the compute stream waited for its copy.
      const Tensor gpu_sum = sum(b.x);
      // Busy work of the batch's size: blocks are freed and reused while later copies run.
      Tensor busy = b.x;
      for (int r = 0; r < 6; ++r) busy = relu(matmul(busy, w));
      const data::Batch expected = epoch.batch(i);
      // Read after the busy work: a later copy written into this batch's blocks would show.
      EXPECT_TRUE(all_close(on_cpu(b.x), expected.x, {0.0, 0.0})) << "batch " << i;
      EXPECT_EQ(on_cpu(b.y).to_vector<std::int64_t>(), expected.y.to_vector<std::int64_t>())
          << "batch " << i;
      const double host_sum = sum(expected.x).item();
      EXPECT_NEAR(gpu_sum.item(), host_sum, 1e-4 * std::abs(host_sum)) << "batch " << i;
      EXPECT_TRUE(busy.defined());
    }
  }
}

}  // namespace
}  // namespace mixprec::testing
