"""Fashion-MNIST (keras.datasets.fashion_mnist), read from Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist, or $MIXPREC_FASHION_MNIST_DIR) by mixprec's IDX reader; no
download."""

import os

from .._mixprec.data import default_fashion_mnist_dir, fashion_mnist_class_names, read_idx

_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
          "t10k-labels-idx1-ubyte")


def _find(directory, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(directory, candidate)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"Fashion-MNIST: neither {name} nor {name}.gz in {directory}; install the Debian package "
        "dataset-fashion-mnist or set MIXPREC_FASHION_MNIST_DIR")


def load_data(path=None):
    """(x_train, y_train), (x_test, y_test) as Keras returns them: uint8 images (60000, 28, 28)
    and (10000, 28, 28), uint8 labels 0..9. `path`: the directory of the four IDX files (plain
    or .gz); default: default_fashion_mnist_dir()."""
    directory = path or default_fashion_mnist_dir()
    x_train, y_train, x_test, y_test = (read_idx(_find(directory, f)) for f in _FILES)
    return (x_train, y_train), (x_test, y_test)


def class_names():
    """The ten class names, by label."""
    return list(fashion_mnist_class_names())


__all__ = ["class_names", "load_data"]
