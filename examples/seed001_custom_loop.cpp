// Seed 001 (the TensorFlow mixed-precision guide), second half, in C++: the same model trained by
// a custom loop. Under mixed_float16 the loop scales the loss before the backward pass and
// unscales the gradients after it with a LossScaleOptimizer, which also skips steps whose
// gradients overflowed. As in the guide, the model is first trained with fit, then reset to its
// initial weights with set_weights and retrained from scratch by the custom loop.
//
//   seed001_custom_loop [policy=mixed_float16] [epochs=5] [batch_size=8192] [data_dir]
#include <mixprec/mixprec.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace mp = mixprec;

int main(int argc, char** argv) try {
  const std::string policy_name = argc > 1 ? argv[1] : "mixed_float16";
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::int64_t batch_size = argc > 3 ? std::atoll(argv[3]) : 8192;
  const std::string data_dir = argc > 4 ? argv[4] : mp::data::default_fashion_mnist_dir();

  mp::mixed_precision::set_global_policy(policy_name);
  const std::int64_t num_units = mp::list_physical_devices("GPU").empty() ? 64 : 4096;
  auto inputs = mp::Input({784}, {.name = "digits"});
  auto x = mp::layers::Dense(num_units, {.activation = "relu", .name = "dense_1"})(inputs);
  x = mp::layers::Dense(num_units, {.activation = "relu", .name = "dense_2"})(x);
  x = mp::layers::Dense(10, {.name = "dense_logits"})(x);
  auto outputs = mp::layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  mp::Model model(inputs, outputs);
  model.compile({.optimizer = mp::optimizers::RMSprop(),
                 .loss = "sparse_categorical_crossentropy",
                 .metrics = {"accuracy"}});
  const auto data = mp::data::load_fashion_mnist(data_dir);

  // The guide's first half, briefly: keep the initial weights, train one epoch with fit.
  const auto initial_weights = model.get_weights();
  model.fit(data.x_train, data.y_train, {.batch_size = batch_size, .epochs = 1});

  // The custom loop: a LossScaleOptimizer around RMSprop, the loss object and the data sets
  // (the guide's .shuffle(10000).batch(8192): a fresh permutation each epoch).
  auto optimizer = mp::mixed_precision::LossScaleOptimizer(mp::optimizers::RMSprop());
  const mp::losses::SparseCategoricalCrossentropy loss_object;
  mp::data::BatchLoader train_dataset(mp::data::Dataset(data.x_train, data.y_train),
                                      {.batch_size = batch_size, .seed = 0});
  const mp::data::Dataset test_dataset(data.x_test, data.y_test);
  const auto variables = model.trainable_variables();

  auto train_step = [&](const mp::Tensor& x, const mp::Tensor& y) {
    mp::GradientTape tape;
    auto predictions = model(x, {.training = true});
    auto loss = loss_object(y, predictions);
    auto scaled_loss = optimizer.get_scaled_loss(loss);
    auto scaled_gradients = tape.gradient(scaled_loss, variables);
    auto gradients = optimizer.get_unscaled_gradients(scaled_gradients);
    optimizer.apply_gradients(gradients, variables);  // skipped when a gradient is Inf/NaN
    return loss;
  };
  auto test_step = [&](const mp::Tensor& x) {
    mp::NoGradScope no_grad;
    return model(x, {.training = false});
  };

  // Load the initial weights of the model, so that it retrains from scratch.
  model.set_weights(initial_weights);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    mp::metrics::Mean epoch_loss_avg;
    mp::metrics::SparseCategoricalAccuracy test_accuracy({.name = "test_accuracy"});
    for (const auto& batch : train_dataset.next_epoch()) {
      epoch_loss_avg.update_state(train_step(batch.x, batch.y).item());
    }
    for (const auto& batch : test_dataset.batches(batch_size)) {
      test_accuracy.update_state(batch.y, test_step(batch.x));
    }
    std::printf("Epoch %d: loss=%.4f, test accuracy=%.4f, loss scale=%g, skipped steps=%lld\n",
                epoch, epoch_loss_avg.result(), test_accuracy.result(), optimizer.loss_scale(),
                static_cast<long long>(optimizer.skipped_steps()));
  }
  return 0;
} catch (const mp::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
