// The README's training features: fit with the callbacks that keep, resume and watch a run; the
// training checkpoint loaded back; the custom loop with loss scaling. In the current directory,
// on Fashion-MNIST ($MIXPREC_FASHION_MNIST_DIR or /usr/share/datasets/fashion-mnist).
#include <mixprec/mixprec.h>

#include <iostream>

namespace mp = mixprec;

mp::Model build_model() {
  auto inputs = mp::Input({784}, {.name = "digits"});
  auto x = mp::layers::Dense(64, {.activation = "relu", .name = "dense_1"})(inputs);
  x = mp::layers::Dense(10, {.name = "dense_logits"})(x);
  auto outputs = mp::layers::Activation("softmax", {.dtype = "float32", .name = "predictions"})(x);
  return mp::Model(inputs, outputs);
}

int main() {
  mp::mixed_precision::set_global_policy("mixed_float16");  // loss scaling comes with it
  auto data = mp::data::load_fashion_mnist();
  mp::Model model = build_model();
  model.compile({.optimizer = mp::optimizers::Adam(), .metrics = {"accuracy"}});

  namespace cb = mp::callbacks;
  model.fit(data.x_train, data.y_train,
            {.batch_size = 128,
             .epochs = 3,
             .verbose = 2,
             .validation_split = 0.2,
             .callbacks = {cb::BackupAndRestore({.backup_dir = "run/backup"}),
                           cb::ModelCheckpoint({.filepath = "run/best-{epoch:02d}.safetensors",
                                                .save_best_only = true}),
                           cb::TensorBoard({.log_dir = "run/logs", .histogram_freq = 1}),
                           cb::EarlyStopping({.monitor = "val_accuracy", .patience = 2}),
                           cb::CSVLogger("run/log.csv")}});
  model.save("run/model");

  // A checkpoint holds the weights, the optimizer's state, the loss scale and the position in the
  // run: load_weights takes the weights, io::load_checkpoint all of it.
  mp::Model again = build_model();
  again.compile({.optimizer = mp::optimizers::Adam(), .metrics = {"accuracy"}});
  mp::io::save_checkpoint(model, "run/now.safetensors");
  again.load_weights("run/now.safetensors");
  mp::io::CheckpointInfo info = mp::io::load_checkpoint(again, "run/now.safetensors");
  std::cout << "checkpoint: " << info.iterations << " optimizer steps, loss scale "
            << info.loss_scale.value_or(1.0) << "\n";

  // The custom loop: GradientTape and a LossScaleOptimizer, as the TensorFlow guide's second half.
  auto optimizer = mp::mixed_precision::LossScaleOptimizer(mp::optimizers::RMSprop());
  const mp::losses::SparseCategoricalCrossentropy loss_object;
  const auto variables = model.trainable_variables();
  mp::data::BatchLoader batches(mp::data::Dataset(data.x_train, data.y_train),
                                {.batch_size = 256, .seed = 0});
  for (const auto& [x, y] : batches.next_epoch()) {
    mp::GradientTape tape;
    auto loss = loss_object(y, model(x, {.training = true}));
    auto grads =
        optimizer.get_unscaled_gradients(tape.gradient(optimizer.get_scaled_loss(loss), variables));
    optimizer.apply_gradients(grads, variables);  // skipped, scale halved, on Inf/NaN
  }
  std::cout << "custom loop: loss scale " << optimizer.loss_scale() << ", skipped steps "
            << optimizer.skipped_steps() << "\n";
}
