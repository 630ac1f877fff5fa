"""Datasets in keras.datasets's form."""

from . import fashion_mnist

__all__ = ["fashion_mnist"]
