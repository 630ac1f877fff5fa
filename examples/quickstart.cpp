// The README's quick start: the TensorFlow mixed-precision guide's model on Fashion-MNIST,
// trained with a checkpoint callback, saved, and loaded back twice (the saved model and the best
// checkpoint), in the current directory.
#include <mixprec/mixprec.h>

#include <iostream>

namespace mp = mixprec;

int main() {
  mp::mixed_precision::set_global_policy(mp::mixed_precision::pick_policy_for_device().policy);
  auto inputs = mp::Input({784}, {.name = "digits"});
  auto x = mp::layers::Dense(256, {.activation = "relu", .name = "dense_1"})(inputs);
  x = mp::layers::Dense(256, {.activation = "relu", .name = "dense_2"})(x);
  x = mp::layers::Dense(10, {.name = "dense_logits"})(x);
  auto outputs = mp::layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  mp::Model model(inputs, outputs);
  model.compile({.optimizer = mp::optimizers::RMSprop(), .metrics = {"accuracy"}});

  auto data = mp::data::load_fashion_mnist();  // pixels in [0, 1], labels 0 to 9
  auto best =
      mp::callbacks::ModelCheckpoint({.filepath = "best.safetensors", .save_best_only = true});
  model.fit(
      data.x_train, data.y_train,
      {.batch_size = 256, .epochs = 2, .verbose = 2, .validation_split = 0.2, .callbacks = {best}});
  model.save("fashion-mlp");  // fashion-mlp/config.json + fashion-mlp/model.safetensors

  mp::Model again = mp::load_model("fashion-mlp");            // the saved model
  mp::Model best_model = mp::load_model("best.safetensors");  // the best checkpoint's model
  auto scores = again.evaluate(data.x_test, data.y_test, {.verbose = 0});
  auto best_scores = best_model.evaluate(data.x_test, data.y_test, {.verbose = 0});
  std::cout << mp::mixed_precision::global_policy() << ": test accuracy " << scores.at("accuracy")
            << " (best checkpoint: " << best_scores.at("accuracy") << ")\n";
}
