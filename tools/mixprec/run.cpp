// One training run (see run.h).
#include "run.h"

#include <chrono>
#include <cmath>

#include "custom_loop.h"
#include "mixprec/applications.h"

namespace mixprec::cli {

namespace {

// Restores the global policy when a run ends, also by an exception.
class GlobalPolicyScope {
 public:
  explicit GlobalPolicyScope(const mixed_precision::Policy& policy)
      : previous_(mixed_precision::global_policy()) {
    mixed_precision::set_global_policy(policy);
  }
  ~GlobalPolicyScope() { mixed_precision::set_global_policy(previous_); }
  GlobalPolicyScope(const GlobalPolicyScope&) = delete;
  GlobalPolicyScope& operator=(const GlobalPolicyScope&) = delete;

 private:
  mixed_precision::Policy previous_;
};

}  // namespace

RunConfig resolve_config(const TrainOptions& options, const std::string& command) {
  RunConfig config;
  config.options = options;
  config.device = resolve_device(device_choice(options.device));
  config.policy = options.policy;
  config.units = options.units.value_or(default_units(config.device));
  config.batch_size = options.batch_size.value_or(default_batch_size(config.device));
  config.dataset = parse_dataset(options.dataset);
  config.verbose = parse_verbosity(options.verbose);
  config.command = command;
  return config;
}

data::FashionMnist load_dataset(const DatasetSpec& dataset) {
  return data::load_fashion_mnist(dataset.dir);
}

RunResult run_training(const RunConfig& config, const data::FashionMnist& data) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const TrainOptions& o = config.options;
  RunResult result;
  result.config = config;

  // Memory of this run: the peak above what is alive now (the data set, shared by every run).
  reset_peak_memory_stats(Device::cpu());
  result.data_memory_bytes = memory_stats(Device::cpu()).current_bytes;

  const std::int64_t n = data.x_train.dim(0);
  result.train_samples = n;
  if (o.validation_split > 0.0) {
    // Keras's split point (data::Dataset::split_validation): the last samples validate.
    result.train_samples =
        static_cast<std::int64_t>(std::floor(static_cast<double>(n) * (1.0 - o.validation_split)));
  }
  result.validation_samples = n - result.train_samples;
  result.test_samples = data.x_test.dim(0);

  {
    const mixed_precision::Policy policy(config.policy);
    GlobalPolicyScope policy_scope(policy);
    // Same seed, same initial weights and batch order for every policy of a compare.
    set_seed(o.seed);
    clear_session();
    Model model = applications::mlp({.units = config.units,
                                     .hidden_layers = o.hidden_layers,
                                     .input_features = data.x_train.dim(1),
                                     .classes = data::kFashionMnistClasses});
    result.params = model.count_params();
    optimizers::Optimizer optimizer = make_optimizer(o.optimizer, o.learning_rate);
    result.learning_rate = optimizer.learning_rate();

    if (loop_choice(o.loop) == Loop::fit) {
      model.compile({.optimizer = optimizer,
                     .loss = std::string("sparse_categorical_crossentropy"),
                     .metrics = {std::string("accuracy")}});
      result.history = model.fit(data.x_train, data.y_train,
                                 {.batch_size = config.batch_size,
                                  .epochs = o.epochs,
                                  .verbose = config.verbose,
                                  .validation_split = o.validation_split,
                                  .seed = o.seed});
      const Scores scores =
          model.evaluate(data.x_test, data.y_test,
                         {.batch_size = config.batch_size, .verbose = Verbosity::silent});
      result.test_loss = scores[0];
      result.test_accuracy = scores.at("accuracy");
      optimizer = model.optimizer();
    } else {
      // As compile() does: dynamic loss scaling exactly when the policy computes in float16.
      if (policy.compute_dtype() == DType::float16) {
        optimizer = mixed_precision::LossScaleOptimizer(optimizer);
      }
      const Verbosity verbose =
          config.verbose == Verbosity::silent ? Verbosity::silent : Verbosity::one_line_per_epoch;
      result.history = custom_training_loop(model, optimizer, data.x_train, data.y_train,
                                            {.batch_size = config.batch_size,
                                             .epochs = o.epochs,
                                             .validation_split = o.validation_split,
                                             .seed = o.seed,
                                             .verbose = verbose});
      const auto test = evaluate_in_batches(model, data.x_test, data.y_test, config.batch_size);
      result.test_loss = test.loss;
      result.test_accuracy = test.accuracy;
    }
    if (const auto scaler = mixed_precision::as_loss_scale_optimizer(optimizer)) {
      result.final_loss_scale = scaler->loss_scale();
      result.skipped_steps = scaler->skipped_steps();
    }
  }
  result.peak_memory_bytes = memory_stats(Device::cpu()).peak_bytes;
  result.total_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace mixprec::cli
