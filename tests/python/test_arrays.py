"""Arrays in and out: NumPy arrays viewed without copies (the library sees the array's own data
pointer), Tensor.numpy() views, float16 and bfloat16, DLPack with NumPy and PyTorch."""

import gc
import sys

import numpy as np
import pytest

import mixprec as mp


def address(a):
    return a.__array_interface__["data"][0]


def test_numpy_array_is_viewed_not_copied():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = mp.Tensor(a)
    assert t.data_ptr() == address(a)
    a[0, 0] = 42.0  # the tensor sees writes to the array: same memory
    assert t.numpy()[0, 0] == 42.0
    for dtype in (np.float16, np.float64, np.int32, np.int64, np.uint8, np.bool_):
        b = np.ones(5, dtype=dtype)
        assert mp.tensor(b).data_ptr() == address(b), dtype


def test_strided_views_are_viewed_and_reversed_ones_copied():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    column_pairs = a[:, ::2]
    t = mp.Tensor(column_pairs)
    assert t.data_ptr() == address(column_pairs) and t.strides == [6, 2]
    np.testing.assert_array_equal(t.numpy(), column_pairs)
    reversed_rows = a[::-1]
    r = mp.Tensor(reversed_rows)
    assert r.data_ptr() != address(reversed_rows)
    np.testing.assert_array_equal(r.numpy(), reversed_rows)
    read_only = np.frombuffer(np.arange(4, dtype=np.float32).tobytes(), dtype=np.float32)
    np.testing.assert_array_equal(mp.Tensor(read_only).numpy(), read_only)


def test_tensor_keeps_the_array_alive():
    a = np.arange(1000, dtype=np.float32)
    t = mp.Tensor(a)
    del a
    gc.collect()
    assert t.numpy()[999] == 999.0


def test_views_release_the_array_once_gone():
    a = np.ones(10, np.float32)
    base = sys.getrefcount(a)
    views = [mp.Tensor(a) for _ in range(100)]
    assert sys.getrefcount(a) == base + 100  # one reference per view's storage
    del views
    gc.collect()
    assert sys.getrefcount(a) == base
    x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
    y = np.zeros(64, np.int64)
    model = mp.Sequential([mp.layers.InputLayer(shape=(8,)), mp.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    before = sys.getrefcount(x), sys.getrefcount(y)
    model.fit(x, np.zeros((64, 2), np.float32), epochs=1, batch_size=16, verbose=0)
    model.predict(x)
    gc.collect()
    assert (sys.getrefcount(x), sys.getrefcount(y)) == before  # fit keeps no view of its data


def test_fit_and_predict_read_the_callers_arrays():
    x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = mp.Sequential([mp.layers.InputLayer(shape=(8,)), mp.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="adam", metrics=["accuracy"])
    before = x.copy()
    model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    np.testing.assert_array_equal(x, before)  # inputs are read, never written
    assert model.predict(x).shape == (64, 2)


def test_numpy_out_is_a_view_and_array_protocol():
    t = mp.ones((2, 3))
    a, b = t.numpy(), t.numpy()
    assert np.shares_memory(a, b) and address(a) == t.data_ptr()
    np.testing.assert_array_equal(np.asarray(t), np.ones((2, 3), np.float32))
    assert np.array(t, dtype=np.float64).dtype == np.float64


def test_float16_and_bfloat16():
    h = np.array([1.5, -2.0, 65504.0], dtype=np.float16)
    t = mp.Tensor(h)
    assert t.dtype == mp.float16 and t.numpy().dtype == np.float16
    np.testing.assert_array_equal(t.numpy(), h)
    b = mp.Tensor(np.array([1.0, 3.140625, -0.5], np.float32)).astype("bfloat16")
    assert b.dtype.name == "bfloat16"
    out = b.numpy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [1.0, 3.140625, -0.5])
    raw = b.numpy(raw_bfloat16=True)
    assert raw.dtype == np.uint16 and raw.tolist() == [0x3F80, 0x4049, 0xBF00]
    back = mp.Tensor(raw, dtype="bfloat16")
    assert back.dtype == mp.bfloat16 and back.data_ptr() == address(raw)


def test_python_floats_become_float32_and_bad_dtypes_are_type_errors():
    assert mp.tensor([1.0, 2.0]).dtype == mp.float32
    assert mp.tensor(np.array([1, 2], dtype=np.int16)).dtype == mp.int64
    with pytest.raises(TypeError, match="complex128"):
        mp.tensor(np.array([1j]))


def test_dlpack_with_numpy_both_ways():
    t = mp.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    assert address(a) == t.data_ptr()
    np.testing.assert_array_equal(a, t.numpy())
    src = np.arange(8, dtype=np.int64)
    u = mp.from_dlpack(src)
    assert u.data_ptr() == address(src) and u.dtype == mp.int64
    capsule = t.__dlpack__()
    v = mp.from_dlpack(capsule)
    assert v.data_ptr() == t.data_ptr()
    with pytest.raises(ValueError, match="consumed once"):
        mp.from_dlpack(capsule)


def test_dlpack_with_pytorch():
    torch = pytest.importorskip(
        "torch", reason="PyTorch is not installed for this interpreter (Debian python3-torch)")
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = mp.from_dlpack(x)
    assert t.data_ptr() == x.data_ptr() and t.shape == (3, 4)
    x[0, 0] = 7.0
    assert t.numpy()[0, 0] == 7.0
    back = torch.utils.dlpack.from_dlpack(t.__dlpack__())
    assert back.data_ptr() == t.data_ptr()
    half = mp.from_dlpack(torch.ones(4, dtype=torch.float16))
    assert half.dtype == mp.float16
    bf = mp.from_dlpack(torch.tensor([1.0, 2.5], dtype=torch.bfloat16))
    assert bf.dtype == mp.bfloat16 and bf.numpy().tolist() == [1.0, 2.5]
    noncontiguous = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    np.testing.assert_array_equal(mp.from_dlpack(noncontiguous).numpy(), noncontiguous.numpy())
    # A torch tensor straight into a layer, without a copy.
    dense = mp.layers.Dense(2, kernel_initializer="ones")
    assert dense(x).shape == (3, 2)
