"""Metrics (keras.metrics): update_state(y_true, y_pred) or update_state(values) (Mean),
result() as a float, reset_state(); calling a metric updates it and returns the result."""

from ._mixprec.metrics import (
    Accuracy,
    BinaryAccuracy,
    CategoricalAccuracy,
    Mean,
    Metric,
    SparseCategoricalAccuracy,
    get,
)

__all__ = ["Accuracy", "BinaryAccuracy", "CategoricalAccuracy", "Mean", "Metric",
           "SparseCategoricalAccuracy", "get"]
