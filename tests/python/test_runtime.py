"""The runtime contract: the GIL is released during fit, Ctrl-C stops fit between steps and
leaves the model usable, C++ errors arrive as Python exceptions of matching kinds, and Python
callbacks are called from fit."""

import _thread
import threading
import time

import numpy as np
import pytest

import mixprec as mp
from mixprec import layers


def mlp_and_data(n=4096, features=64, units=256):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, features)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = mp.Sequential([layers.InputLayer(shape=(features,)),
                           layers.Dense(units, activation="relu"),
                           layers.Dense(units, activation="relu"),
                           layers.Dense(2, activation="softmax")])
    model.compile(optimizer="rmsprop", metrics=["accuracy"])
    return model, x, y


def test_other_threads_run_during_fit():
    model, x, y = mlp_and_data()
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    start = time.perf_counter()
    model.fit(x, y, epochs=3, batch_size=64, verbose=0)
    stop = time.perf_counter()
    done.set()
    counter.join()
    during = [t for t in ticks if start < t < stop]
    # With the GIL held for the whole fit the thread could not tick at all while it runs.
    assert stop - start > 0.05
    assert len(during) >= 10, f"{len(during)} ticks in {stop - start:.3f} s of fit"


def test_ctrl_c_stops_fit_between_steps_and_the_model_stays_usable():
    model, x, y = mlp_and_data()
    steps = []

    class InterruptAtStep(mp.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            steps.append(batch)
            if len(steps) == 5:
                _thread.interrupt_main()  # as SIGINT (Ctrl-C) arriving now

    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, epochs=50, batch_size=64, verbose=0, callbacks=[InterruptAtStep()])
    assert len(steps) == 5  # stopped after the step that was running
    assert np.isfinite(model.predict(x[:8])).all()
    assert model.fit(x, y, epochs=1, batch_size=256, verbose=0).history["loss"][0] > 0
    with pytest.raises(KeyboardInterrupt):
        class InterruptEvaluate(mp.callbacks.Callback):
            def on_test_batch_end(self, batch, logs=None):
                _thread.interrupt_main()
        model.evaluate(x, y, verbose=0, callbacks=[InterruptEvaluate()])
    assert len(model.evaluate(x, y, verbose=0)) == 2


def test_errors_are_python_exceptions_with_the_cpp_message(tmp_path):
    dense = layers.Dense(3)
    dense(np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="4 features") as info:
        dense(np.zeros((2, 5), np.float32))
    assert isinstance(info.value, mp.errors.ShapeError) and isinstance(info.value, mp.Error)
    with pytest.raises(ValueError, match="valid names|mixed_float16"):
        mp.mixed_precision.set_global_policy("float8")
    with pytest.raises(OSError) as io:
        mp.load_model(str(tmp_path / "missing"))
    assert str(tmp_path / "missing") in str(io.value)
    with pytest.raises(TypeError):
        mp.ops.add(mp.ones((2,)), mp.ones((2,), dtype="int32"))
    model, x, y = mlp_and_data(n=64)
    with pytest.raises(ValueError, match="batch_size"):
        model.fit(x, y, batch_size=0, verbose=0)
    with pytest.raises(ValueError, match="samples|rows|differ"):
        model.fit(x, y[:10], verbose=0)


def test_python_callback_is_called_from_fit():
    model, x, y = mlp_and_data(n=512)
    events = []

    class Recorder(mp.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.batches = 0

        def on_train_begin(self, logs=None):
            events.append(("train_begin", self.params["epochs"], self.params["steps"]))

        def on_epoch_end(self, epoch, logs=None):
            events.append(("epoch_end", epoch, sorted(logs)))
            if epoch == 1:
                self.model.stop_training = True

        def on_train_batch_end(self, batch, logs=None):
            self.batches += 1
            assert "loss" in logs

    recorder = Recorder()
    history = model.fit(x, y, epochs=10, batch_size=128, verbose=0, validation_split=0.25,
                        callbacks=[recorder, mp.callbacks.EarlyStopping(patience=100)])
    assert events[0] == ("train_begin", 10, 3)
    assert [e[1] for e in events[1:]] == [0, 1]  # stop_training after epoch 1
    assert "val_loss" in events[1][2] and "accuracy" in events[1][2]
    assert recorder.batches == 6 and recorder.model is model
    assert len(history.history["loss"]) == 2


def test_exception_in_a_python_callback_propagates():
    model, x, y = mlp_and_data(n=256)

    class Broken(mp.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            raise RuntimeError("broken callback")

    with pytest.raises(RuntimeError, match="broken callback"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[Broken()])
    assert np.isfinite(model.predict(x[:4])).all()
