"""pytest setup of the Python module's tests: mixprec is imported from the build directory
(ctest sets PYTHONPATH to <build>/python); each test starts from the float32 global policy."""

import os
import sys

import pytest

build = os.environ.get("MIXPREC_BUILD_DIR")
if build:
    sys.path.insert(0, os.path.join(build, "python"))

import mixprec as mp  # noqa: E402


@pytest.fixture(autouse=True)
def float32_policy():
    mp.mixed_precision.set_global_policy("float32")
    mp.set_seed(1)
    yield
    mp.mixed_precision.set_global_policy("float32")


def fashion_mnist_available():
    d = mp.data.default_fashion_mnist_dir()
    return os.path.isdir(d) and any(f.startswith("train-images") for f in os.listdir(d))
