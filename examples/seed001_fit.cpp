// Seed 001 (the TensorFlow mixed-precision guide), first half, in C++: set a dtype policy, build
// the Dense model with a float32 softmax output, train it with Model::fit and evaluate it. The
// guide uses MNIST; this uses Fashion-MNIST (same format, Debian package dataset-fashion-mnist).
//
//   seed001_fit [policy=mixed_float16] [epochs=5] [batch_size=8192] [data_dir]
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

  const mp::mixed_precision::Policy policy(policy_name);
  mp::mixed_precision::set_global_policy(policy);
  std::printf("Compute dtype: %s\nVariable dtype: %s\n",
              std::string(mp::dtype_name(policy.compute_dtype())).c_str(),
              std::string(mp::dtype_name(policy.variable_dtype())).c_str());

  // As the guide: two 4096-unit layers on a GPU, fewer units on CPUs so that it finishes quickly.
  const bool gpu = !mp::list_physical_devices("GPU").empty();
  const std::int64_t num_units = gpu ? 4096 : 64;
  std::printf("The model will run with %lld units on a %s\n", static_cast<long long>(num_units),
              gpu ? "GPU" : "CPU");

  auto inputs = mp::Input({784}, {.name = "digits"});
  mp::layers::Dense dense1(num_units, {.activation = "relu", .name = "dense_1"});
  auto x = dense1(inputs);
  mp::layers::Dense dense2(num_units, {.activation = "relu", .name = "dense_2"});
  x = dense2(x);
  std::printf("x.dtype: %s\n", std::string(mp::dtype_name(x.dtype())).c_str());
  std::printf("dense1.kernel.dtype: %s\n",
              std::string(mp::dtype_name(dense1.kernel().dtype())).c_str());

  // CORRECT: the logits layer follows the policy, the softmax and the model output are float32.
  x = mp::layers::Dense(10, {.name = "dense_logits"})(x);
  auto outputs = mp::layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  std::printf("Outputs dtype: %s\n", std::string(mp::dtype_name(outputs.dtype())).c_str());

  mp::Model model(inputs, outputs);
  model.compile({.optimizer = mp::optimizers::RMSprop(),
                 .loss = "sparse_categorical_crossentropy",
                 .metrics = {"accuracy"}});
  // Pixels as float32 in [0, 1], flattened to (N, 784); the first layer casts them to float16.
  const auto data = mp::data::load_fashion_mnist(data_dir);

  auto history = model.fit(data.x_train, data.y_train,
                           {.batch_size = batch_size, .epochs = epochs, .validation_split = 0.2});
  auto test_scores =
      model.evaluate(data.x_test, data.y_test, {.verbose = mp::Verbosity::one_line_per_epoch});
  std::printf("Test loss: %.4f\nTest accuracy: %.4f\n", test_scores[0], test_scores[1]);
  return 0;
} catch (const mp::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
