// The per-step host syncs that one_hot, sparse labels and Dropout used to cost on CUDA are gone;
// the device versions must give the CPU's results: one_hot for every index and output dtype (bit
// for bit), NaN rows for out-of-range indices (the CPU throws instead), the Dropout mask bit for
// bit for a seed (forward and backward), and sparse categorical crossentropy within float32
// tolerance.
// The count of host waits, cuda::host_synchronizations(): cuda::synchronize() is exactly one,
// queued elementwise work and an upload after the GPU finished its work are none, a readback at
// least one per staging chunk; a fit epoch's waits do not grow with its steps beyond the
// prefetcher's one per batch (its producer thread waits for a staging buffer to be free).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/dropout.h"
#include "backend/cuda/transfer.h"
#include "core/counter_hash.h"
#include "gpu/gpu_support.h"
#include "mixprec/applications.h"
#include "support/policy_guard.h"

namespace mixprec::testing {
namespace {

const std::vector<DType> kIndexDtypes = {DType::int32, DType::int64, DType::uint8};
const std::vector<DType> kOutputDtypes = {DType::float32, DType::float16, DType::bfloat16,
                                          DType::float64, DType::int32,   DType::int64,
                                          DType::uint8,   DType::bool_};

// The GPU tensor's bytes equal the CPU tensor's (same dtype and shape).
::testing::AssertionResult same_bits(const Tensor& gpu, const Tensor& cpu) {
  if (!(gpu.device() == kGpu)) return ::testing::AssertionFailure() << "result not on cuda:0";
  if (gpu.dtype() != cpu.dtype() || gpu.shape() != cpu.shape()) {
    return ::testing::AssertionFailure()
           << dtype_name(gpu.dtype()) << " " << gpu.shape().to_string() << " vs "
           << dtype_name(cpu.dtype()) << " " << cpu.shape().to_string();
  }
  const Tensor a = on_cpu(gpu).contiguous(), b = cpu.detach().contiguous();
  const auto* pa = static_cast<const unsigned char*>(a.data_ptr());
  const auto* pb = static_cast<const unsigned char*>(b.data_ptr());
  const std::size_t size = dtype_size(a.dtype());
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + i * size, pb + i * size, size) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i
             << " differs: " << a.to_vector<double>()[static_cast<std::size_t>(i)] << " vs "
             << b.to_vector<double>()[static_cast<std::size_t>(i)];
    }
  }
  return ::testing::AssertionSuccess();
}

// Class indices in [0, depth) as int64 values, deterministic.
std::vector<std::int64_t> labels(std::size_t n, std::int64_t depth) {
  std::vector<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::int64_t>((i * 7 + 3) % depth);
  return v;
}

TEST(SyncsGpuTest, OneHotMatchesTheCpuForEveryIndexAndOutputDtype) {
  MIXPREC_REQUIRE_GPU();
  const std::int64_t depth = 11;
  const Tensor values = from_vector(labels(6 * 35, depth), {6, 35});  // int64 on the CPU
  for (DType index_dtype : kIndexDtypes) {
    const Tensor indices = values.to(index_dtype);
    for (DType out_dtype : kOutputDtypes) {
      SCOPED_TRACE(std::string(dtype_name(index_dtype)) + " -> " +
                   std::string(dtype_name(out_dtype)));
      const Tensor cpu = one_hot(indices, depth, out_dtype);
      EXPECT_TRUE(same_bits(one_hot(on_gpu(indices), depth, out_dtype), cpu));
      // Strided indices (a transposed view) read in row-major order of the view.
      const Tensor cpu_t = one_hot(indices.transpose(0, 1), depth, out_dtype);
      EXPECT_TRUE(same_bits(one_hot(on_gpu(indices).transpose(0, 1), depth, out_dtype), cpu_t));
    }
  }
  // A large one: more elements than one grid covers in a single pass.
  const Tensor big = from_vector(labels(300000, 10), {300000}).to(DType::int32);
  EXPECT_TRUE(same_bits(one_hot(on_gpu(big), 10, kFloat16), one_hot(big, 10, kFloat16)));
}

TEST(SyncsGpuTest, OutOfRangeIndicesGiveNanRowsOnCuda) {
  MIXPREC_REQUIRE_GPU();
  const std::int64_t depth = 5;
  // Rows 1 and 3 are out of range (-1 cannot be a uint8: 200 instead).
  for (DType index_dtype : kIndexDtypes) {
    const std::int64_t low = index_dtype == DType::uint8 ? 200 : -1;
    const Tensor indices =
        from_vector(std::vector<std::int64_t>{2, low, 0, depth, 4}, {5}).to(index_dtype);
    for (DType out_dtype : kOutputDtypes) {
      SCOPED_TRACE(std::string(dtype_name(index_dtype)) + " -> " +
                   std::string(dtype_name(out_dtype)));
      const Tensor out = on_cpu(one_hot(on_gpu(indices), depth, out_dtype));
      const auto v = out.to_vector<double>();
      ASSERT_EQ(v.size(), 25u);
      const bool floating = is_floating(out_dtype);
      for (std::int64_t row = 0; row < 5; ++row) {
        for (std::int64_t c = 0; c < depth; ++c) {
          const double got = v[static_cast<std::size_t>(row * depth + c)];
          if (row == 1 || row == 3) {
            if (floating)
              EXPECT_TRUE(std::isnan(got)) << row << "," << c << ": " << got;
            else
              EXPECT_EQ(got, 0.0) << row << "," << c;
          } else {
            const std::int64_t hot = row == 0 ? 2 : (row == 2 ? 0 : 4);
            EXPECT_EQ(got, c == hot ? 1.0 : 0.0) << row << "," << c;
          }
        }
      }
    }
    // The CPU still refuses them; depth 0 (no valid index at all) is refused on both devices.
    EXPECT_THROW(one_hot(indices, depth), ValueError);
    EXPECT_THROW(one_hot(on_gpu(indices), 0), ValueError);
    EXPECT_EQ(one_hot(on_gpu(indices.slice(0, 0, 0)), 0).shape(), (Shape{0, 0}));
  }
}

TEST(SyncsGpuTest, DropoutMaskIsBitIdenticalToTheCpu) {
  MIXPREC_REQUIRE_GPU();
  for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dtype));
    // 100003 elements: not a multiple of any pack width, so the kernel's tail runs too.
    const Tensor x = sample({100003}, -2.0, 2.0, dtype, 41);
    for (double rate : {0.1, 0.5}) {
      // The cuda entry point against the CPU layer's rule computed here: the counter hash and
      // ceil(rate * 2^53), keep = 1 / (1 - rate) rounded to the dtype.
      const std::uint64_t base = 0xDEADBEEF12345ull;
      const std::uint64_t threshold = core::keep_threshold(rate);
      const double keep = scalar(1.0 / (1.0 - rate), {.dtype = dtype}).to_vector<double>()[0];
      const Tensor gpu = cuda::dropout_apply(on_gpu(x), base, threshold, keep);
      const auto xv = x.to_vector<double>();
      std::vector<double> expected(xv.size());
      for (std::size_t i = 0; i < xv.size(); ++i) {
        expected[i] = core::counter_keeps(base, i, threshold) ? xv[i] * keep : xv[i] * 0.0;
      }
      // x * keep rounded once to the dtype (exact products of two dtype values in double).
      const Tensor model = from_vector(expected, {100003}, {.dtype = DType::float64}).to(dtype);
      EXPECT_TRUE(same_bits(gpu, model)) << "rate " << rate;

      // The layer: the same seed on both devices gives the same output and gradient bits.
      PolicyGuard guard(dtype_name(dtype));
      layers::Dropout on_host(rate, {.seed = 606}), on_device(rate, {.seed = 606});
      Tensor xc = x.detach(), xg = on_gpu(x);
      xc.set_requires_grad(true);
      xg.set_requires_grad(true);
      const Tensor yc = on_host(xc, {.training = true});
      const Tensor yg = on_device(xg, {.training = true});
      EXPECT_TRUE(same_bits(yg, yc)) << "rate " << rate;
      const Tensor w = sample({100003}, 0.5, 1.5, dtype, 42);
      EXPECT_TRUE(same_bits(grad(yg, {xg}, on_gpu(w))[0], grad(yc, {xc}, w)[0])) << "rate " << rate;
    }
  }
}

TEST(SyncsGpuTest, SparseCategoricalCrossentropyMatchesTheCpu) {
  MIXPREC_REQUIRE_GPU();
  const std::int64_t batch = 257, classes = 10;
  for (bool from_logits : {false, true}) {
    SCOPED_TRACE(from_logits ? "from logits" : "probabilities");
    losses::SparseCategoricalCrossentropy loss({.from_logits = from_logits});
    const Tensor logits = sample({batch, classes}, -3.0, 3.0, kFloat32, 7);
    const Tensor pred_cpu = from_logits ? logits : softmax(logits, -1);
    for (DType label_dtype : kIndexDtypes) {
      SCOPED_TRACE(dtype_name(label_dtype));
      const Tensor y = from_vector(labels(batch, classes), {batch}).to(label_dtype);
      Tensor pc = pred_cpu.detach(), pg = on_gpu(pred_cpu);
      pc.set_requires_grad(true);
      pg.set_requires_grad(true);
      const Tensor lc = loss(y, pc), lg = loss(on_gpu(y), pg);
      EXPECT_TRUE(matches(lg, lc, tolerance_for(kFloat32)));
      EXPECT_TRUE(matches(grad(lg, {pg})[0], grad(lc, {pc})[0], tolerance_for(kFloat32)));
    }
  }
  // A bad label on CUDA: no exception (no host read), a NaN loss.
  const Tensor bad = from_vector(std::vector<std::int64_t>{1, 10, 3}, {3});
  const Tensor pred = on_gpu(softmax(sample({3, classes}, -1.0, 1.0, kFloat32, 9), -1));
  const double value =
      on_cpu(losses::SparseCategoricalCrossentropy()(on_gpu(bad), pred)).to_vector<double>()[0];
  EXPECT_TRUE(std::isnan(value)) << value;
}

// ---- the count of host waits ----

// The host waits `work` makes, by the process-wide count.
template <typename Work>
std::int64_t waits_of(Work&& work) {
  const std::int64_t before = cuda::host_synchronizations();
  work();
  return cuda::host_synchronizations() - before;
}

TEST(HostSynchronizationsGpuTest, SynchronizeIsExactlyOneWait) {
  MIXPREC_REQUIRE_GPU();
  const Tensor x = on_gpu(sample({1 << 20}, -1.0, 1.0, kFloat32, 5));
  Tensor y;
  // Elementwise work is queued on the compute stream: no wait.
  EXPECT_EQ(waits_of([&] { y = x * x + x; }), 0);
  // One wait for both streams, with work queued and on an idle GPU.
  EXPECT_EQ(waits_of([] { cuda::synchronize(kGpu); }), 1);
  EXPECT_EQ(waits_of([] { cuda::synchronize(); }), 1);
  EXPECT_EQ(y.device(), kGpu);
}

TEST(HostSynchronizationsGpuTest, AReadbackWaitsAnUploadDoesNot) {
  MIXPREC_REQUIRE_GPU();
  const Tensor host = sample({1000}, -1.0, 1.0, kFloat32, 6);
  const Tensor gpu = on_gpu(host);
  Tensor back;
  EXPECT_GE(waits_of([&] { back = gpu.to(Device::cpu()); }), 1);
  EXPECT_EQ(back.to_vector<float>(), host.to_vector<float>());
  // 2.5 staging chunks: the host waits for each chunk before it copies it out.
  const auto n = static_cast<std::int64_t>(5 * cuda::detail::kStagingChunkBytes / 2 / 4);
  const Tensor big = zeros({n}, {.device = kGpu});
  EXPECT_GE(waits_of([&] { back = big.to(Device::cpu()); }), 3);
  // After the GPU finished its work every staging chunk is free: an upload queues its copy
  // without waiting.
  cuda::synchronize(kGpu);
  EXPECT_EQ(waits_of([&] { back = host.to(kGpu); }), 0);
}

constexpr std::int64_t kFitBatch = 32, kFitFeatures = 64, kFitClasses = 4;

// A 64-32-4 MLP on the GPU under the global policy, compiled with Adam.
Model tiny_mlp() {
  set_seed(3);
  clear_session();
  DeviceScope on(kGpu);
  Model model = applications::mlp(
      {.units = 32, .hidden_layers = 1, .input_features = kFitFeatures, .classes = kFitClasses});
  model.compile({.optimizer = optimizers::Adam({.learning_rate = 1e-3}),
                 .loss = std::string("sparse_categorical_crossentropy"),
                 .metrics = {std::string("accuracy")}});
  return model;
}

// The host waits of one silent, unshuffled fit epoch of `steps` batches of synthetic data (on the
// CPU, where datasets live: fit's producer thread stages each batch to the GPU).
std::int64_t fit_epoch_waits(Model& model, std::int64_t steps) {
  const std::int64_t n = steps * kFitBatch;
  const Tensor x = sample({n, kFitFeatures}, 0.0, 1.0, kFloat32, 8);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < labels.size(); ++i) {
    labels[i] = static_cast<std::int64_t>((i * 5 + 1) % kFitClasses);
  }
  const Tensor y = from_vector(labels, {n});
  return waits_of([&] {
    model.fit(
        x, y,
        {.batch_size = kFitBatch, .epochs = 1, .verbose = Verbosity::silent, .shuffle = false});
  });
}

// A training step queues its work and reads nothing back (loss, metrics and the loss scale stay on
// the device until the epoch ends), so an epoch of 16 steps waits no more than one of 4 steps,
// except for the prefetcher's producer thread: it refills a staging buffer only after the buffer's
// last copy finished, one wait per batch (data/prefetch.cpp), never on the training thread. So 12
// more steps make at most 12 more waits; the epoch-end reads are the same for both.
TEST(HostSynchronizationsGpuTest, AFitEpochDoesNotWaitPerStepBeyondItsProducer) {
  MIXPREC_REQUIRE_GPU();
  PolicyGuard restore_policy;
  for (const char* policy : {"float32", "mixed_float16"}) {
    SCOPED_TRACE(policy);
    mixed_precision::set_global_policy(mixed_precision::Policy(policy));
    Model model = tiny_mlp();
    (void)fit_epoch_waits(model, 16);  // first use: plans, staging buffers, allocations
    const std::int64_t four = fit_epoch_waits(model, 4);
    const std::int64_t sixteen = fit_epoch_waits(model, 16);
    std::printf("[ host waits ] %s fit epoch: 4 steps %lld, 16 steps %lld\n", policy,
                static_cast<long long>(four), static_cast<long long>(sixteen));
    EXPECT_GE(sixteen, four);
    EXPECT_LE(sixteen - four, 16 - 4)
        << policy << ": an epoch of 4 steps waits " << four << " times, one of 16 steps " << sixteen
        << ": the training step waits for the GPU";
  }
}

}  // namespace
}  // namespace mixprec::testing
