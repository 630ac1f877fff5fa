"""The Keras surface: policies, layers, models, compile/fit/evaluate/predict, saving, optimizers,
losses, metrics, GradientTape with LossScaleOptimizer, applications, data helpers, the CLI."""

import os
import subprocess
import sys

import numpy as np
import pytest

import mixprec as mp
from mixprec import layers, mixed_precision

from conftest import fashion_mnist_available


def toy_data(n=256, features=20, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, features)).astype(np.float32) * 3
    y = rng.integers(0, classes, size=n)
    x = centers[y] + rng.normal(size=(n, features)).astype(np.float32)
    return x.astype(np.float32), y.astype(np.int64)


def small_model(features=20, classes=4, units=32):
    inputs = mp.Input(shape=(features,), name="features")
    x = layers.Dense(units, activation="relu")(inputs)
    x = layers.Dense(classes, name="logits")(x)
    outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
    return mp.Model(inputs=inputs, outputs=outputs)


def test_policy_and_layer_dtypes():
    policy = mixed_precision.Policy("mixed_float16")
    assert (policy.name, policy.compute_dtype, policy.variable_dtype) == (
        "mixed_float16", "float16", "float32")
    mixed_precision.set_global_policy(policy)
    assert mixed_precision.global_policy().name == "mixed_float16"
    inputs = mp.Input(shape=(784,), name="digits")
    assert inputs.shape == (None, 784)
    dense1 = layers.Dense(8, activation="relu", name="dense_1")
    x = dense1(inputs)
    assert x.dtype.name == "float16"
    assert dense1.kernel.dtype.name == "float32"
    out = layers.Activation("softmax", dtype="float32")(layers.Dense(10)(x))
    assert out.dtype.name == "float32"
    assert dense1.dtype_policy == "mixed_float16" and dense1.compute_dtype == "float16"
    mixed_precision.set_policy("float32")  # TensorFlow 2.1's name
    assert mixed_precision.global_policy().name == "float32"


def test_bad_policy_lists_names():
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        mixed_precision.Policy("mixed_float8")


def test_steps_per_execution_trains_the_same_and_batches_per_execution():
    x, y = toy_data()
    weights = []
    for n in (1, 3):
        mp.set_seed(7)
        model = small_model()
        model.compile(optimizer="sgd", metrics=["accuracy"], steps_per_execution=n)
        ends = []

        class Ends(mp.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                ends.append(batch)

        model.fit(x, y, batch_size=32, epochs=1, verbose=0, shuffle=False, callbacks=[Ends()])
        weights.append(model.get_weights())
        assert ends == ([0, 1, 2, 3, 4, 5, 6, 7] if n == 1 else [2, 5, 7])
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="steps_per_execution must be >= 1"):
        small_model().compile(optimizer="sgd", steps_per_execution=0)


def test_compile_fit_evaluate_predict_and_weights(capsys):
    x, y = toy_data()
    model = small_model()
    model.compile(optimizer=mp.optimizers.Adam(learning_rate=0.01),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.summary()
    assert "predictions" in capsys.readouterr().out
    initial = model.get_weights()
    assert [w.shape for w in initial] == [(20, 32), (32,), (32, 4), (4,)]
    history = model.fit(x, y, batch_size=32, epochs=3, verbose=0, validation_split=0.25)
    assert set(history.history) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert history.epoch == [0, 1, 2] and len(history.epochs) == 3
    assert model.history.history == history.history
    assert history.history["loss"][-1] < history.history["loss"][0]
    loss, acc = model.evaluate(x, y, batch_size=64, verbose=0)
    assert acc > 0.8
    assert model.evaluate(x, y, verbose=0, return_dict=True)["accuracy"] == pytest.approx(acc)
    probs = model.predict(x, batch_size=50)
    assert isinstance(probs, np.ndarray) and probs.shape == (256, 4) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    model.set_weights(initial)
    for w, w0 in zip(model.get_weights(), initial):
        np.testing.assert_array_equal(w, w0)
    assert [layer.name for layer in model.layers][-1] == "predictions"
    assert isinstance(model.get_layer("logits"), layers.Dense)
    assert model.get_layer("logits").kernel.shape == (32, 4)


def test_sequential_save_and_load_model(tmp_path):
    x, y = toy_data()
    model = mp.Sequential([layers.InputLayer(shape=(20,)), layers.Dense(16, activation="relu"),
                           layers.Dense(4, activation="softmax")])
    model.add(layers.Activation("linear"))
    model.compile(optimizer="sgd", loss=mp.losses.SparseCategoricalCrossentropy(),
                  metrics=[mp.metrics.SparseCategoricalAccuracy()])
    model.fit(x, y, epochs=1, batch_size=64, verbose=0)
    model.save(str(tmp_path / "saved"))
    again = mp.load_model(str(tmp_path / "saved"))
    np.testing.assert_array_equal(again.predict(x), model.predict(x))
    model.save_weights(str(tmp_path / "w.safetensors"))
    model.load_weights(str(tmp_path / "w.safetensors"))
    assert '"Sequential"' in model.to_json()


def all_layer_cases():
    img = np.random.default_rng(0).normal(size=(2, 8, 8, 3)).astype(np.float32)
    seq = np.random.default_rng(1).normal(size=(2, 5, 8)).astype(np.float32)
    ids = np.array([[1, 2, 3, 4, 0], [5, 6, 7, 8, 9]], dtype=np.int64)
    flat = np.random.default_rng(2).normal(size=(2, 6)).astype(np.float32)
    return [
        (layers.Dense(3), flat, (2, 3)),
        (layers.Activation("relu"), flat, (2, 6)),
        (layers.Softmax(), flat, (2, 6)),
        (layers.Flatten(), img, (2, 192)),
        (layers.Reshape((3, 2)), flat, (2, 3, 2)),
        (layers.Dropout(0.5, seed=1), flat, (2, 6)),
        (layers.Conv2D(4, 3, padding="same", activation="relu"), img, (2, 8, 8, 4)),
        (layers.Conv2D(4, (3, 3), strides=2), img, (2, 3, 3, 4)),
        (layers.DepthwiseConv2D(3, padding="same"), img, (2, 8, 8, 3)),
        (layers.BatchNormalization(), img, (2, 8, 8, 3)),
        (layers.LayerNormalization(), seq, (2, 5, 8)),
        (layers.RMSNormalization(), seq, (2, 5, 8)),
        (layers.MaxPooling2D(), img, (2, 4, 4, 3)),
        (layers.AveragePooling2D(pool_size=2, strides=2), img, (2, 4, 4, 3)),
        (layers.GlobalAveragePooling2D(), img, (2, 3)),
        (layers.ZeroPadding2D(padding=(1, 2)), img, (2, 10, 12, 3)),
        (layers.Resizing(4, 4), img, (2, 4, 4, 3)),
        (layers.Cropping1D(cropping=(1, 2)), seq, (2, 2, 8)),
        (layers.Embedding(10, 4), ids, (2, 5, 4)),
        (layers.ReversibleEmbedding(10, 4), ids, (2, 5, 4)),
        (layers.PositionEmbedding(sequence_length=5), seq, (2, 5, 8)),
        (layers.ClassToken(), seq, (2, 6, 8)),
    ]


@pytest.mark.parametrize("layer,x,shape", all_layer_cases(),
                         ids=lambda v: type(v).__name__ if isinstance(v, layers.Layer) else "")
def test_every_layer_runs_eagerly(layer, x, shape):
    y = layer(x)
    assert y.shape == shape
    assert np.isfinite(y.numpy()).all()


def test_merge_and_attention_layers():
    a = np.ones((2, 4), np.float32)
    b = np.full((2, 4), 2.0, np.float32)
    assert layers.Add()([a, b]).numpy().tolist() == [[3.0] * 4] * 2
    assert layers.Multiply()([a, b]).numpy().tolist() == [[2.0] * 4] * 2
    assert layers.Concatenate()([a, b]).shape == (2, 8)
    q = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(np.float32)
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=4)
    assert mha(q, q, use_causal_mask=True).shape == (2, 5, 8)
    inp = mp.Input(shape=(5, 8))
    assert mha(inp, inp).shape == (None, 5, 8)


def test_multi_head_attention_keras_call():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 3, 8)).astype(np.float32)
    v = rng.normal(size=(2, 5, 6)).astype(np.float32)
    k = rng.normal(size=(2, 5, 4)).astype(np.float32)
    mask = rng.uniform(size=(2, 3, 5)) > 0.3
    mask[:, :, 0] = True  # every query sees a key
    mha = layers.MultiHeadAttention(num_heads=2, key_dim=4)
    out = mha(q, v, key=k, attention_mask=mask)
    assert out.shape == (2, 3, 8)
    again, scores = mha(q, v, key=k, attention_mask=mask, return_attention_scores=True)
    assert np.array_equal(again.numpy(), out.numpy())
    s = scores.numpy()
    assert s.shape == (2, 2, 3, 5) and s.dtype == np.float32
    assert np.all(s[np.broadcast_to(~mask[:, None], s.shape)] == 0)  # hidden keys get nothing
    assert np.allclose(s.sum(axis=-1), 1.0, atol=1e-6)
    causal = mha(q, v, key=k, use_causal_mask=True, return_attention_scores=True)[1].numpy()
    assert np.all(np.triu(np.ones((3, 5), bool), 1)[None, None] <= (causal == 0))
    qi, vi, ki = mp.Input(shape=(3, 8)), mp.Input(shape=(5, 6)), mp.Input(shape=(5, 4))
    assert mha(qi, vi, key=ki).shape == (None, 3, 8)
    with pytest.raises(ValueError, match="eager calls"):
        mha(qi, vi, key=ki, return_attention_scores=True)


def test_custom_loop_with_loss_scale_optimizer():
    mixed_precision.set_global_policy("mixed_float16")
    x, y = toy_data(n=128)
    model = small_model()
    optimizer = mixed_precision.LossScaleOptimizer(mp.optimizers.RMSprop())
    assert optimizer.loss_scale == 32768.0 and optimizer.dynamic
    loss_object = mp.losses.SparseCategoricalCrossentropy()
    losses = []
    for _ in range(20):
        with mp.GradientTape() as tape:
            predictions = model(x, training=True)
            loss = loss_object(y, predictions)
            scaled_loss = optimizer.get_scaled_loss(loss)
        scaled_gradients = tape.gradient(scaled_loss, model.trainable_variables)
        gradients = optimizer.get_unscaled_gradients(scaled_gradients)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        losses.append(float(loss))
    assert optimizer.iterations == 20
    assert losses[-1] < losses[0]
    fixed = mixed_precision.LossScaleOptimizer(mp.optimizers.SGD(), loss_scale=1024)
    assert not fixed.dynamic and fixed.loss_scale == 1024.0
    mean = mp.metrics.Mean()
    mean(loss)
    mean.update_state(2.0)
    assert mean.result() == pytest.approx((float(loss) + 2.0) / 2)


def test_gradient_tape_and_no_recording_outside():
    w = mp.Tensor(np.array([1.0, 2.0], np.float32))
    w.requires_grad = True
    with mp.GradientTape() as tape:
        loss = mp.ops.sum(w * w)
    g = tape.gradient(loss, w)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    model = small_model()
    out = model(np.zeros((1, 20), np.float32))  # outside a tape: nothing recorded
    with pytest.raises(Exception):
        out.backward(mp.ones((1, 4)))


def test_optimizers_losses_metrics():
    assert mp.optimizers.Adam(learning_rate=0.002).learning_rate == pytest.approx(0.002)
    sched = mp.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    assert mp.optimizers.SGD(learning_rate=sched).learning_rate == pytest.approx(0.1)
    assert mp.optimizers.AdamW(weight_decay=0.01).name
    y_true = np.array([0, 1], np.int64)
    y_pred = np.array([[0.9, 0.1], [0.2, 0.8]], np.float32)
    loss = mp.losses.SparseCategoricalCrossentropy()(y_true, y_pred)
    assert float(loss) == pytest.approx(-(np.log(0.9) + np.log(0.8)) / 2, rel=1e-6)
    assert float(mp.losses.MeanSquaredError()(y_pred, y_pred)) == 0.0
    acc = mp.metrics.SparseCategoricalAccuracy()
    acc.update_state(y_true, y_pred)
    assert acc.result() == 1.0 and acc.name == "sparse_categorical_accuracy"
    acc.reset_state()
    assert mp.metrics.BinaryAccuracy(threshold=0.5)(np.array([1.0], np.float32),
                                                   np.array([0.7], np.float32)) == 1.0


def test_applications_build():
    mlp = mp.applications.MLP(units=16)
    assert mlp.count_params() == 784 * 16 + 16 + 16 * 16 + 16 + 16 * 10 + 10
    eff = mp.applications.EfficientNetB0(input_shape=(32, 32, 3), classes=10)
    assert eff.outputs[0].shape == (None, 10)
    assert mp.applications.ResNet50(input_shape=(32, 32, 3), classes=5).outputs[0].shape == (None, 5)
    with pytest.raises(ValueError, match="pretrained"):
        mp.applications.EfficientNetB0(weights="imagenet")
    gpt = mp.applications.GPT(layers=1, width=32, heads=2, context=16, vocab=50)
    assert gpt.count_params() > 0
    assert mp.applications.ViT(layers=1, width=16, heads=2, mlp_dim=32).outputs[0].shape == (None, 10)


def test_dataset_batches_and_shuffles():
    x = np.arange(10, dtype=np.float32).reshape(10, 1)
    y = np.arange(10, dtype=np.int64)
    ds = mp.data.Dataset.from_tensor_slices((x, y)).shuffle(100, seed=3).batch(4)
    assert len(ds) == 3
    batches = list(ds)
    assert [len(b[1]) for b in batches] == [4, 4, 2]
    seen = np.concatenate([b[1] for b in batches])
    assert sorted(seen.tolist()) == list(range(10)) and seen.tolist() != list(range(10))
    np.testing.assert_array_equal(np.concatenate([b[0] for b in batches])[:, 0], seen)
    plain = list(mp.data.Dataset.from_tensor_slices((x, y)).batch(8, drop_remainder=True))
    assert len(plain) == 1 and plain[0][1].tolist() == list(range(8))
    with pytest.raises(ValueError):
        mp.data.Dataset.from_tensor_slices((x, y[:5]))


def test_fit_takes_a_dataset():
    x, y = toy_data()
    model = small_model()
    model.compile(optimizer=mp.optimizers.Adam(learning_rate=0.01), metrics=["accuracy"])
    ds = mp.data.Dataset.from_tensor_slices((x, y)).shuffle(256).batch(32)
    history = model.fit(ds, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    assert model.evaluate(ds, verbose=0)[1] > 0.7


@pytest.mark.skipif(not fashion_mnist_available(),
                    reason="Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)")
def test_fashion_mnist_load_data_in_keras_form():
    (x_train, y_train), (x_test, y_test) = mp.datasets.fashion_mnist.load_data()
    assert x_train.shape == (60000, 28, 28) and x_train.dtype == np.uint8
    assert y_train.shape == (60000,) and y_train.dtype == np.uint8 and y_train.max() == 9
    assert x_test.shape == (10000, 28, 28) and y_test.shape == (10000,)
    assert len(mp.datasets.fashion_mnist.class_names()) == 10


def test_python_m_mixprec_info():
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(mp.__file__)))
    out = subprocess.run([sys.executable, "-m", "mixprec", "info"], capture_output=True, text=True,
                         check=True, env=env).stdout
    assert out.startswith("mixprec ") and "recommended policy:" in out
    bad = subprocess.run([sys.executable, "-m", "mixprec", "bogus"], capture_output=True, text=True,
                         env=env)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_devices_and_distributed():
    cpus = mp.config.list_physical_devices("CPU")
    assert len(cpus) == 1 and cpus[0].device_type == "CPU"
    assert mp.distributed.world_size() >= 1
    assert isinstance(mp.distributed.built_with_mpi(), bool)
