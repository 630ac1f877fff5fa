# The README's quick start in Python: the TensorFlow mixed-precision guide's model on
# Fashion-MNIST, trained with a checkpoint callback, saved, and loaded back twice (the saved model
# and the best checkpoint), in the current directory. examples/quickstart.cpp is the same in C++.
import mixprec as mp
from mixprec import layers, mixed_precision

policy, _ = mixed_precision.pick_policy_for_device()  # and the reason for it
mixed_precision.set_global_policy(policy)
inputs = mp.Input(shape=(784,), name="digits")
x = layers.Dense(256, activation="relu", name="dense_1")(inputs)
x = layers.Dense(256, activation="relu", name="dense_2")(x)
x = layers.Dense(10, name="dense_logits")(x)
outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
model = mp.Model(inputs=inputs, outputs=outputs)
model.compile(optimizer=mp.optimizers.RMSprop(), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])

(x_train, y_train), (x_test, y_test) = mp.datasets.fashion_mnist.load_data()  # uint8, as Keras
x_train = x_train.reshape(60000, 784).astype("float32") / 255
x_test = x_test.reshape(10000, 784).astype("float32") / 255
best = mp.callbacks.ModelCheckpoint(filepath="best.safetensors", save_best_only=True)
model.fit(x_train, y_train, batch_size=256, epochs=2, verbose=2, validation_split=0.2,
          callbacks=[best])
model.save("fashion-mlp")  # fashion-mlp/config.json + fashion-mlp/model.safetensors

again = mp.load_model("fashion-mlp")  # the saved model
best_model = mp.load_model("best.safetensors")  # the best checkpoint's model
_, accuracy = again.evaluate(x_test, y_test, verbose=0)
_, best_accuracy = best_model.evaluate(x_test, y_test, verbose=0)
print(f"{mixed_precision.global_policy().name}: test accuracy {accuracy:.4f} "
      f"(best checkpoint: {best_accuracy:.4f})")
