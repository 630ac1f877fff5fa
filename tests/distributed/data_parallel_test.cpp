// Data-parallel fit(), evaluate() and the custom-loop pieces (include/mixprec/distributed/
// data_parallel.h). Written to run under `mpirun -np 2` (and in a group of one, where the
// distributed run must equal the single-process one bitwise). Every rank trains the seed MLP
// data-parallel, then trains a copy alone on the whole global batch, and compares:
//
// Tolerance. Sharding changes only the order of the floating-point sums of a step's gradient: one
// process sums the n rows of the batch-mean gradient in one reduction, W ranks each sum their n/W
// rows (weighted by their share) and the all-reduce adds the W partial sums. In float32 that is a
// relative difference of a few units in the last place (~1e-7) of a gradient element per step;
// after the 12 SGD steps here (learning rate 0.05, momentum 0.5, weights moving by ~0.15 in all)
// the weights agree to 3e-8 (measured on 2 ranks), tolerance 1e-6. Under mixed_float16 and
// mixed_bfloat16 each rank's forward and backward round their results to the 16-bit compute dtype
// (a weight gradient is rounded once per partial sum of n/W rows instead of once for the n rows; a
// rounding that differs flips later 16-bit roundings, and ReLU boundaries amplify it over the
// steps): measured 1.7e-3 (float16) and 3.7e-4 (bfloat16), tolerances 5e-3 and 2e-3. Each is well
// below the weights' movement (checked > 20x the tolerance); a wrong weighting or a missing
// reduction is off by a sizable part of that movement. In a group of one the result is bitwise the
// single-process one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "optimizers/loss_scale_agreement.h"
#include "support/policy_guard.h"

namespace mixprec {
namespace {

namespace mp = mixprec;
using distributed::DataParallel;
using mixed_precision::LossScaleOptimizer;

constexpr std::int64_t kFeatures = 12;
constexpr std::int64_t kClasses = 4;

struct Data {
  Tensor x, y;
};

// Deterministic data, the same on every rank (drawn from a fixed generator).
Data make_data(std::int64_t n, std::uint64_t seed) {
  Generator gen(seed);
  Data d;
  d.x = random_normal(Shape{n, kFeatures}, 0.0, 1.0, {.device = Device::cpu()}, gen);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  for (auto& l : labels) l = static_cast<std::int64_t>(gen.next_u64() % kClasses);
  d.y = from_vector(labels, Shape{n});
  return d;
}

Model make_mlp(std::uint64_t seed) {
  set_seed(seed);
  return applications::mlp(
      {.units = 24, .hidden_layers = 2, .input_features = kFeatures, .classes = kClasses});
}

void compile_sgd(Model& m, double lr = 0.05) {
  m.compile({.optimizer = optimizers::SGD({.learning_rate = lr, .momentum = 0.5}),
             .loss = std::string("sparse_categorical_crossentropy"),
             .metrics = {std::string("accuracy")}});
}

std::vector<float> flat_weights(const Model& m) {
  std::vector<float> out;
  for (const Tensor& v : m.variables()) {
    const std::vector<float> values = v.to(DType::float32).to_vector<float>();
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

// Whether every rank holds exactly (bitwise) rank 0's values.
bool same_on_every_rank(const std::vector<float>& values) {
  if (distributed::world_size() == 1) return true;
  const Shape shape{static_cast<std::int64_t>(values.size())};
  const Tensor mine = from_vector(values, shape, {.device = Device::cpu()});
  Tensor root = from_vector(values, shape, {.device = Device::cpu()});
  distributed::broadcast(root, 0);
  const bool same =
      std::memcmp(root.data_ptr(), mine.data_ptr(), values.size() * sizeof(float)) == 0;
  return distributed::all_reduce(same ? 0.0 : 1.0, distributed::ReduceOp::max) == 0.0;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return d;
}

TEST(ShardRange, DisjointContiguousAndCoverTheBatch) {
  for (int world = 1; world <= 4; ++world) {
    for (std::int64_t rows = 0; rows <= 11; ++rows) {
      std::int64_t expected_start = 0;
      for (int r = 0; r < world; ++r) {
        const distributed::ShardRange s = distributed::shard_range(rows, r, world);
        EXPECT_EQ(s.start, expected_start) << rows << " rows, rank " << r << " of " << world;
        EXPECT_GE(s.size(), rows / world);
        EXPECT_LE(s.size(), rows / world + 1);
        expected_start = s.stop;
      }
      EXPECT_EQ(expected_start, rows);
    }
  }
  EXPECT_EQ(distributed::shard_range(5, 1, 2).start, 2);
  EXPECT_EQ(distributed::shard_range(5, 1, 2).stop, 5);
  EXPECT_THROW(distributed::shard_range(4, 2, 2), ValueError);
  EXPECT_THROW(distributed::shard_range(-1, 0, 2), ValueError);
  EXPECT_THROW(distributed::shard_range(4, 0, 0), ValueError);
}

TEST(DataParallel, ShardWeightsSumToOne) {
  DataParallel dp;
  dp.initialize();
  for (std::int64_t rows : {1, 5, 8, 33}) {
    const double sum = distributed::all_reduce(dp.shard_weight(rows));
    EXPECT_NEAR(sum, 1.0, 1e-15) << rows;
  }
  const Data d = make_data(7, 3);
  const data::Batch shard = dp.shard({d.x, d.y});
  const distributed::ShardRange r = dp.shard_range(7);
  ASSERT_EQ(shard.x.dim(0), r.size());
  EXPECT_EQ(shard.y.to_vector<std::int64_t>(),
            d.y.slice(0, r.start, r.stop).contiguous().to_vector<std::int64_t>());
  EXPECT_THROW(dp.shard_weight(0), ValueError);
}

// fit() with .distribute against fit() alone with the same global batch, under `policy`.
// overlap: the buckets reduced during the backward pass (DataParallel::overlap) or after it.
void expect_fit_matches_single_process(const char* policy, double tolerance, bool overlap) {
  SCOPED_TRACE(policy);
  testing::PolicyGuard guard{mixed_precision::Policy(policy)};
  // Several buckets, one gradient bigger than a bucket.
  DataParallel dp{.bucket_bytes = 1024, .overlap = overlap};
  dp.initialize();
  // 45 samples in global batches of 8: the last batch has 5 rows (shards of 2 and 3 on 2 ranks).
  const Data d = make_data(45, 11);
  FitOptions options{.batch_size = 8, .epochs = 2, .verbose = Verbosity::silent, .seed = 5};

  Model parallel = make_mlp(21);
  compile_sgd(parallel);
  options.distribute = dp;
  const History h_parallel = parallel.fit(d.x, d.y, options);

  Model alone = make_mlp(21);
  compile_sgd(alone);
  options.distribute.reset();
  const History h_alone = alone.fit(d.x, d.y, options);

  const std::vector<float> w_parallel = flat_weights(parallel);
  const std::vector<float> w_alone = flat_weights(alone);
  EXPECT_TRUE(same_on_every_rank(w_parallel)) << "the ranks' weights differ";
  const double diff = max_abs_diff(w_parallel, w_alone);
  // The update itself: the weights moved by far more than the tolerance.
  const double moved = max_abs_diff(w_alone, flat_weights(make_mlp(21)));
  EXPECT_GT(moved, 20 * tolerance);
  if (distributed::world_size() == 1) {
    EXPECT_EQ(diff, 0.0) << "a group of one must train exactly as one process";
  } else {
    EXPECT_LE(diff, tolerance);
  }
  if (std::getenv("MIXPREC_DP_VERBOSE")) {
    std::printf(
        "%s: max |w_parallel - w_alone| = %.3g (tolerance %.3g), weights moved %.3g, "
        "skipped %lld / %lld\n",
        policy, diff, tolerance, moved, static_cast<long long>(h_parallel.epochs[0].skipped_steps),
        static_cast<long long>(h_alone.epochs[0].skipped_steps));
  }
  // The epoch's loss and accuracy are over every rank's samples: the single process's values.
  ASSERT_EQ(h_parallel.history.at("loss").size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_NEAR(h_parallel.history.at("loss")[e], h_alone.history.at("loss")[e], 1e-3);
    EXPECT_NEAR(h_parallel.history.at("accuracy")[e], h_alone.history.at("accuracy")[e], 1e-9);
  }
  const std::vector<float> losses(h_parallel.history.at("loss").begin(),
                                  h_parallel.history.at("loss").end());
  EXPECT_TRUE(same_on_every_rank(losses));
}

// The fit() tests run with the gradients reduced during the backward pass and after it.
class DataParallelFitOverlap : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(, DataParallelFitOverlap, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "overlapped" : "after_backward";
                         });

TEST_P(DataParallelFitOverlap, Float32MatchesOneProcess) {
  expect_fit_matches_single_process("float32", 1e-6, GetParam());
}
TEST_P(DataParallelFitOverlap, MixedFloat16MatchesOneProcess) {
  expect_fit_matches_single_process("mixed_float16", 5e-3, GetParam());
}
TEST_P(DataParallelFitOverlap, MixedBfloat16MatchesOneProcess) {
  expect_fit_matches_single_process("mixed_bfloat16", 2e-3, GetParam());
}

TEST(DataParallelFit, EveryRankStartsFromRankZerosWeights) {
  DataParallel dp;
  dp.initialize();
  // Each rank draws different initial weights; fit() with distribute broadcasts rank 0's.
  Model m = make_mlp(100 + static_cast<std::uint64_t>(distributed::rank()));
  compile_sgd(m, 0.0);  // learning rate 0: the weights stay the broadcast ones
  const Data d = make_data(8, 2);
  m.fit(d.x, d.y, {.batch_size = 8, .verbose = Verbosity::silent, .distribute = dp});
  EXPECT_TRUE(same_on_every_rank(flat_weights(m)));
  EXPECT_EQ(max_abs_diff(flat_weights(m), flat_weights(make_mlp(100))), 0.0);
}

TEST(DataParallelFit, UnbuiltSequentialIsBuiltThenBroadcast) {
  DataParallel dp;
  dp.initialize();
  set_seed(200 + static_cast<std::uint64_t>(distributed::rank()));  // different draws per rank
  Sequential m({layers::Dense(8, {.activation = "relu"}), layers::Dense(kClasses)});
  m.compile({.optimizer = optimizers::SGD({.learning_rate = 0.05}),
             .loss = losses::SparseCategoricalCrossentropy({.from_logits = true})});
  const Data d = make_data(12, 12);
  m.fit(d.x, d.y, {.batch_size = 6, .verbose = Verbosity::silent, .distribute = dp});
  ASSERT_FALSE(m.variables().empty());
  EXPECT_TRUE(same_on_every_rank(flat_weights(m)));
}

// A Pipeline (a preprocessing step), validation_split and EarlyStopping: the validation loss is
// over every rank's shard, so every rank stops after the same epoch.
TEST_P(DataParallelFitOverlap, PipelineWithValidationMatchesOneProcess) {
  const Data d = make_data(40, 13);
  const data::Pipeline p = data::Pipeline(d.x, d.y).map(data::rescale(0.5));
  FitOptions options{.batch_size = 6,
                     .epochs = 3,
                     .verbose = Verbosity::silent,
                     .validation_split = 0.25,
                     .seed = 3};
  Model parallel = make_mlp(71);
  compile_sgd(parallel);
  options.distribute = DataParallel{.overlap = GetParam()};
  options.callbacks = {callbacks::EarlyStopping({.monitor = "val_loss", .patience = 0})};
  const History h_parallel = parallel.fit(p, options);
  Model alone = make_mlp(71);
  compile_sgd(alone);
  options.distribute.reset();
  options.callbacks = {callbacks::EarlyStopping({.monitor = "val_loss", .patience = 0})};
  const History h_alone = alone.fit(p, options);
  ASSERT_EQ(h_parallel.history.at("val_loss").size(), h_alone.history.at("val_loss").size());
  for (std::size_t e = 0; e < h_alone.history.at("val_loss").size(); ++e) {
    EXPECT_NEAR(h_parallel.history.at("val_loss")[e], h_alone.history.at("val_loss")[e], 1e-5);
  }
  EXPECT_LE(max_abs_diff(flat_weights(parallel), flat_weights(alone)), 1e-6);
  EXPECT_TRUE(same_on_every_rank(flat_weights(parallel)));
}

// An Inf only in the last rank's shard of the first batch: every rank skips that step and halves
// its loss scale, and the next step applies everywhere.
TEST_P(DataParallelFitOverlap, InfOnOneRankSkipsTheStepOnEveryRank) {
  testing::PolicyGuard guard{mixed_precision::Policy("mixed_float16")};
  DataParallel dp{.overlap = GetParam()};
  dp.initialize();
  const int world = distributed::world_size();
  Data d = make_data(16, 4);
  // Row 7 of the first batch of 8 is in the last rank's shard: [8 - 8/W, 8) when W divides 8.
  d.x.data<float>()[7 * kFeatures + 3] = std::numeric_limits<float>::infinity();
  const distributed::ShardRange last = distributed::shard_range(8, world - 1, world);
  ASSERT_TRUE(7 >= last.start && 7 < last.stop);
  if (world > 1) ASSERT_FALSE(7 < distributed::shard_range(8, 0, world).stop);

  Model m = make_mlp(31);
  m.compile({.optimizer = LossScaleOptimizer(optimizers::SGD({.learning_rate = 0.05}),
                                             {.initial_scale = 1024, .dynamic_growth_steps = 1000}),
             .loss = std::string("sparse_categorical_crossentropy")});
  const History h =
      m.fit(d.x, d.y,
            {.batch_size = 8, .verbose = Verbosity::silent, .shuffle = false, .distribute = dp});
  const LossScaleOptimizer lso = *mixed_precision::as_loss_scale_optimizer(m.optimizer());
  EXPECT_EQ(lso.skipped_steps(), 1);
  EXPECT_EQ(lso.loss_scale(), 512.0);
  EXPECT_EQ(lso.dynamic_counter(), 1);  // the second step applied
  EXPECT_EQ(h.epochs.at(0).skipped_steps, 1);
  const std::vector<float> w = flat_weights(m);
  EXPECT_TRUE(same_on_every_rank(w));
  for (float v : w) ASSERT_TRUE(std::isfinite(v));
  const std::vector<float> state{static_cast<float>(lso.loss_scale()),
                                 static_cast<float>(lso.skipped_steps())};
  EXPECT_TRUE(same_on_every_rank(state));
}

// The loss-scale hook alone: only the last rank's gradients hold an Inf, no gradient is reduced,
// and the flag agreed with max still skips the step on every rank.
TEST(DataParallelLossScale, FlagAgreedWithMaxSkipsEverywhere) {
  DataParallel dp;
  dp.initialize();
  const bool bad = distributed::rank() == distributed::world_size() - 1;
  Tensor var = full(Shape{3}, 1.0, {.device = Device::cpu(), .requires_grad = true});
  LossScaleOptimizer lso(optimizers::SGD({.learning_rate = 0.5}), {.initial_scale = 64});
  Tensor g = from_vector(std::vector<float>{1.0f, bad ? INFINITY : 2.0f, 3.0f}, Shape{3});
  const mixed_precision::UnscaledGradients grads = lso.get_unscaled_gradients({g});
  optimizers::detail::combine_found_inf(
      lso, [](Tensor& flag) { distributed::all_reduce(flag, distributed::ReduceOp::max); });
  lso.apply_gradients(grads, {var});
  EXPECT_EQ(lso.skipped_steps(), 1);
  EXPECT_EQ(lso.loss_scale(), 32.0);
  EXPECT_EQ(var.to_vector<float>(), (std::vector<float>{1.0f, 1.0f, 1.0f}));
}

// The custom loop of the header comment: shard, tape, unscale, all_reduce_gradients, apply.
TEST(DataParallelCustomLoop, MatchesOneProcessWithTheGlobalBatch) {
  testing::PolicyGuard guard{mixed_precision::Policy("float32")};
  DataParallel dp{.bucket_bytes = 512};
  dp.initialize();
  const Data d = make_data(10, 9);
  const losses::Loss loss_fn = losses::get("sparse_categorical_crossentropy");
  auto train = [&](Model& m, bool parallel) {
    LossScaleOptimizer opt(optimizers::SGD({.learning_rate = 0.1}));
    const std::vector<Tensor> vars = m.trainable_variables();
    if (parallel) dp.broadcast_variables(m.variables());
    for (int step = 0; step < 3; ++step) {
      const data::Batch b = parallel ? dp.shard({d.x, d.y}) : data::Batch{d.x, d.y};
      GradientTape tape;
      const Tensor loss = loss_fn(b.y, m(b.x, CallOptions{.training = true}));
      const auto grads = opt.get_unscaled_gradients(tape.gradient(opt.get_scaled_loss(loss), vars));
      if (parallel) dp.all_reduce_gradients(grads, dp.shard_weight(d.x.dim(0)), opt);
      opt.apply_gradients(grads, vars);
    }
  };
  Model parallel = make_mlp(41);
  train(parallel, true);
  Model alone = make_mlp(41);
  train(alone, false);
  EXPECT_TRUE(same_on_every_rank(flat_weights(parallel)));
  EXPECT_LE(max_abs_diff(flat_weights(parallel), flat_weights(alone)), 2e-6);
}

TEST(DataParallelEvaluate, ScoresOverEveryRanksSamples) {
  Model m = make_mlp(51);
  compile_sgd(m);
  const Data d = make_data(21, 6);  // batches of 4: the last has 1 row (rank 0's shard is empty)
  const Scores alone = m.evaluate(d.x, d.y, {.batch_size = 4, .verbose = Verbosity::silent});
  const Scores parallel = m.evaluate(
      d.x, d.y, {.batch_size = 4, .verbose = Verbosity::silent, .distribute = DataParallel{}});
  ASSERT_EQ(parallel.values.size(), alone.values.size());
  EXPECT_NEAR(parallel.at("loss"), alone.at("loss"), 1e-6);
  EXPECT_NEAR(parallel.at("accuracy"), alone.at("accuracy"), 1e-12);
  EXPECT_TRUE(same_on_every_rank({static_cast<float>(parallel.at("loss"))}));
}

TEST(DataParallelFit, OnlyRankZeroWritesFiles) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mixprec_dp_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string me = "rank" + std::to_string(distributed::rank());
  Model m = make_mlp(61);
  compile_sgd(m);
  const Data d = make_data(16, 8);
  m.fit(
      d.x, d.y,
      {.batch_size = 8,
       .epochs = 2,
       .verbose = Verbosity::silent,
       .callbacks = {callbacks::CSVLogger(dir / (me + ".csv")),
                     callbacks::ModelCheckpoint({.filepath = (dir / (me + ".safetensors")).string(),
                                                 .save_weights_only = true})},
       .distribute = DataParallel{}});
  const bool root = distributed::rank() == 0;
  EXPECT_EQ(std::filesystem::exists(dir / (me + ".csv")), root);
  EXPECT_EQ(std::filesystem::exists(dir / (me + ".safetensors")), root);
  std::filesystem::remove_all(dir);
}

// Stops fit() after batch `batch` of epoch `epoch` (0-based), as an interruption would.
struct StopAt : callbacks::Callback {
  int epoch;
  std::int64_t batch;
  int current = -1;
  StopAt(int e, std::int64_t b) : epoch(e), batch(b) {}
  void on_epoch_begin(int e, const callbacks::Logs&) override { current = e; }
  void on_train_batch_end(std::int64_t b, const callbacks::Logs&) override {
    if (current == epoch && b == batch) model().set_stop_training(true);
  }
};

// A checkpoint taken inside an epoch keeps the running sums of the whole group (every rank's
// shard), so that the resumed epoch reports the uninterrupted run's metrics. Before, each rank
// counted its own shard and rank 0's checkpoint kept none: the resumed epoch's loss and accuracy
// were those of its remaining batches only.
TEST(DataParallelFit, ResumeInsideAnEpochReportsTheUninterruptedMetrics) {
  // One directory for the group: rank 0's process id, shared by a collective.
  const double root_pid = distributed::all_reduce(
      distributed::rank() == 0 ? static_cast<double>(::getpid()) : 0.0, distributed::ReduceOp::max);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("mixprec_dp_resume_" + std::to_string(static_cast<long long>(root_pid)));
  const Data d = make_data(48, 9);  // batches of 8: 6 per epoch
  const FitOptions base{.batch_size = 8, .epochs = 2, .verbose = Verbosity::silent};

  Model whole = make_mlp(71);
  compile_sgd(whole);
  FitOptions o = base;
  o.distribute = DataParallel{};
  const History uninterrupted = whole.fit(d.x, d.y, o);

  Model first = make_mlp(71);
  compile_sgd(first);
  o.callbacks = {callbacks::BackupAndRestore(
                     {.backup_dir = dir, .save_freq = std::int64_t{3}, .delete_checkpoint = false}),
                 StopAt(1, 2)};  // the backup after batch 3 of epoch 2, then stop
  (void)first.fit(d.x, d.y, o);

  Model resumed = make_mlp(72);  // other weights: the checkpoint restores them
  compile_sgd(resumed);
  o.callbacks = {callbacks::BackupAndRestore({.backup_dir = dir})};
  const History after = resumed.fit(d.x, d.y, o);

  ASSERT_EQ(after.epochs.size(), 2u);
  ASSERT_EQ(uninterrupted.epochs.size(), 2u);
  for (const char* name : {"loss", "accuracy"}) {
    SCOPED_TRACE(name);
    const double want = uninterrupted.epochs[1].metrics.at(name);
    EXPECT_NEAR(after.epochs[1].metrics.at(name), want, 1e-9 * std::max(1.0, std::abs(want)));
    EXPECT_EQ(after.epochs[0].metrics.at(name), uninterrupted.epochs[0].metrics.at(name));
  }
  EXPECT_EQ(flat_weights(resumed), flat_weights(whole));
  if (distributed::rank() == 0) std::filesystem::remove_all(dir);
  (void)distributed::all_reduce(0.0, distributed::ReduceOp::max);  // no rank races the removal
}

}  // namespace
}  // namespace mixprec
