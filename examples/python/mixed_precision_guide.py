"""The TensorFlow mixed-precision guide's program, on mixprec.

It is the guide's code with its imports changed to mixprec's module (tf.keras -> mixprec,
tf.data -> mixprec.data, @tf.function dropped) and the data from
mp.datasets.fashion_mnist.load_data() instead of MNIST, as the C++ examples
(examples/seed001_fit.cpp, examples/seed001_custom_loop.cpp) do. It builds the Dense model with a
float32 softmax, trains it with fit, then retrains it from its initial weights with the custom
training loop and a LossScaleOptimizer.

    PYTHONPATH=build/python python3 examples/python/mixed_precision_guide.py
        [--policy mixed_float16] [--epochs 5] [--batch-size 8192] [--train-samples N]
        [--json results.json]

--train-samples trains on the first N training images only (a short run for the tests);
--json writes the test accuracies of both halves to a file.
"""

import argparse
import json
import sys

import mixprec as mp
from mixprec import layers
from mixprec import mixed_precision

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--policy", default="mixed_float16")
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=8192)
parser.add_argument("--train-samples", type=int, default=None)
parser.add_argument("--json", default=None)
args = parser.parse_args()

# Setting the dtype policy
policy = mixed_precision.Policy(args.policy)
mixed_precision.set_global_policy(policy)
print('Compute dtype: %s' % policy.compute_dtype)
print('Variable dtype: %s' % policy.variable_dtype)

# Building the model
inputs = mp.Input(shape=(784,), name='digits')
if mp.config.list_physical_devices('GPU'):
  print('The model will run with 4096 units on a GPU')
  num_units = 4096
else:
  # Use fewer units on CPUs so the model finishes in a reasonable amount of time
  print('The model will run with 64 units on a CPU')
  num_units = 64
dense1 = layers.Dense(num_units, activation='relu', name='dense_1')
x = dense1(inputs)
dense2 = layers.Dense(num_units, activation='relu', name='dense_2')
x = dense2(x)

print('x.dtype: %s' % x.dtype.name)
# 'kernel' is dense1's variable
print('dense1.kernel.dtype: %s' % dense1.kernel.dtype.name)

# CORRECT: softmax and model output are float32
x = layers.Dense(10, name='dense_logits')(x)
outputs = layers.Activation('softmax', dtype='float32', name='predictions')(x)
print('Outputs dtype: %s' % outputs.dtype.name)

# The linear activation is an identity function. So this simply casts 'outputs'
# to float32. In this particular case, 'outputs' is already float32 so this is a
# no-op.
outputs = layers.Activation('linear', dtype='float32')(outputs)

model = mp.Model(inputs=inputs, outputs=outputs)
model.compile(loss='sparse_categorical_crossentropy',
              optimizer=mp.optimizers.RMSprop(),
              metrics=['accuracy'])

(x_train, y_train), (x_test, y_test) = mp.datasets.fashion_mnist.load_data()
x_train = x_train.reshape(60000, 784).astype('float32') / 255
x_test = x_test.reshape(10000, 784).astype('float32') / 255
if args.train_samples:
  x_train, y_train = x_train[:args.train_samples], y_train[:args.train_samples]

initial_weights = model.get_weights()

# Training the model with Model.fit
history = model.fit(x_train, y_train,
                    batch_size=args.batch_size,
                    epochs=args.epochs,
                    validation_split=0.2)
test_scores = model.evaluate(x_test, y_test, verbose=2)
print('Test loss:', test_scores[0])
print('Test accuracy:', test_scores[1])

# Training the model with a custom training loop
optimizer = mp.optimizers.RMSprop()
optimizer = mixed_precision.LossScaleOptimizer(optimizer, loss_scale='dynamic')

loss_object = mp.losses.SparseCategoricalCrossentropy()
# seed=0: the order of examples/seed001_custom_loop.cpp, for comparing the two programs.
train_dataset = (mp.data.Dataset.from_tensor_slices((x_train, y_train))
                 .shuffle(10000, seed=0).batch(args.batch_size))
test_dataset = mp.data.Dataset.from_tensor_slices((x_test, y_test)).batch(args.batch_size)


def train_step(x, y):
  with mp.GradientTape() as tape:
    predictions = model(x)
    loss = loss_object(y, predictions)
    scaled_loss = optimizer.get_scaled_loss(loss)
  scaled_gradients = tape.gradient(scaled_loss, model.trainable_variables)
  gradients = optimizer.get_unscaled_gradients(scaled_gradients)
  optimizer.apply_gradients(zip(gradients, model.trainable_variables))
  return loss


def test_step(x):
  return model(x, training=False)


model.set_weights(initial_weights)

for epoch in range(args.epochs):
  epoch_loss_avg = mp.metrics.Mean()
  test_accuracy = mp.metrics.SparseCategoricalAccuracy(
      name='test_accuracy')
  for x, y in train_dataset:
    loss = train_step(x, y)
    epoch_loss_avg(loss)
  for x, y in test_dataset:
    predictions = test_step(x)
    test_accuracy.update_state(y, predictions)
  print('Epoch {}: loss={}, test accuracy={}'.format(epoch, epoch_loss_avg.result(), test_accuracy.result()))

if args.json:
  with open(args.json, 'w') as f:
    json.dump({'policy': args.policy, 'epochs': args.epochs, 'batch_size': args.batch_size,
               'fit_test_accuracy': test_scores[1],
               'custom_loop_test_accuracy': test_accuracy.result(),
               'loss_scale': optimizer.loss_scale,
               'skipped_steps': optimizer.skipped_steps}, f, indent=1)
# A run that learned nothing is a failure (the test runs a short configuration).
sys.exit(0 if test_accuracy.result() > 0.5 and test_scores[1] > 0.5 else 1)
