"""Data-parallel fit from Python under mpirun (ctest python_distributed_fit, 2 ranks): every rank
ends with the same weights and loss, and they match one process training alone (within float32
summation order). Exits 77 (skipped) in a group of one."""

import sys

import numpy as np

import mixprec as mp


def train(distribute):
    mp.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 16)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = mp.Sequential([mp.layers.InputLayer(shape=(16,)),
                           mp.layers.Dense(32, activation="relu"),
                           mp.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="adam", metrics=["accuracy"])
    history = model.fit(x, y, batch_size=64, epochs=2, verbose=0, seed=1,
                        distribute=mp.distributed.DataParallel() if distribute else None)
    return history.history["loss"][-1], model.get_weights()


loss, weights = train(distribute=True)
if mp.distributed.world_size() < 2:
    print("SKIPPED: run under mpirun -np 2")
    sys.exit(77)
flat = mp.Tensor(np.concatenate([w.ravel() for w in weights]))
mine = flat.numpy().copy()
mp.distributed.broadcast(flat, root=0)
assert np.array_equal(mine, flat.numpy()), "the ranks' weights differ"
alone_loss, alone_weights = train(distribute=False)
np.testing.assert_allclose(loss, alone_loss, rtol=1e-5)
for a, b in zip(weights, alone_weights):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
print(f"rank {mp.distributed.rank()}/{mp.distributed.world_size()}: loss {loss:.6f}, "
      "weights equal across ranks and to a single process")
