// A program outside the mixprec tree: seed 001's model (Dense-relu x2, float32 softmax) trained
// one epoch (of 32 batches) under mixed_float16, on Fashion-MNIST when installed, else on random
// data.
#include <mixprec/mixprec.h>

#include <cstdio>
#include <filesystem>

namespace mp = mixprec;

int main() try {
  std::printf("mixprec %s (headers %s)\n", mp::version(), MIXPREC_VERSION);
  mp::mixed_precision::set_global_policy("mixed_float16");
  auto inputs = mp::Input({784}, {.name = "digits"});
  auto x = mp::layers::Dense(64, {.activation = "relu", .name = "dense_1"})(inputs);
  x = mp::layers::Dense(64, {.activation = "relu", .name = "dense_2"})(x);
  x = mp::layers::Dense(10, {.name = "dense_logits"})(x);
  auto outputs = mp::layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  mp::Model model(inputs, outputs);
  model.compile({.optimizer = mp::optimizers::RMSprop(),
                 .loss = "sparse_categorical_crossentropy",
                 .metrics = {"accuracy"}});

  mp::Tensor x_train, y_train, x_test, y_test;
  if (std::filesystem::exists(mp::data::default_fashion_mnist_dir())) {
    auto data = mp::data::load_fashion_mnist();
    x_train = data.x_train, y_train = data.y_train, x_test = data.x_test, y_test = data.y_test;
  } else {  // random pixels and labels in [0, 10)
    x_train = x_test = mp::random_uniform({8192, 784});
    y_train = y_test = mp::random_uniform({8192}, 0.0, 10.0).to(mp::DType::int64);
  }
  // One epoch of 32 batches (8192 samples): a smoke test of the installed library, kept short.
  model.fit(x_train, y_train,
            {.batch_size = 256,
             .epochs = 1,
             .verbose = mp::Verbosity::one_line_per_epoch,
             .steps_per_epoch = 32});
  auto scores =
      model.evaluate(x_test, y_test, {.batch_size = 1024, .verbose = mp::Verbosity::silent});
  std::printf("trained 1 epoch: test loss %.4f, test accuracy %.4f\n", scores[0], scores[1]);
  return 0;
} catch (const mp::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
