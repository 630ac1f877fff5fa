"""Losses (keras.losses), always computed in float32: loss(y_true, y_pred) is the mean over the
samples, a scalar Tensor."""

from ._mixprec.losses import (
    BinaryCrossentropy,
    CategoricalCrossentropy,
    Loss,
    MeanSquaredError,
    SparseCategoricalCrossentropy,
    get,
)

__all__ = ["BinaryCrossentropy", "CategoricalCrossentropy", "Loss", "MeanSquaredError",
           "SparseCategoricalCrossentropy", "get"]
