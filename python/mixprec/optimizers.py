"""Optimizers (keras.optimizers). learning_rate takes a float, a schedule from
optimizers.schedules, or a Python function of the step. LossScaleOptimizer is also
mixprec.mixed_precision.LossScaleOptimizer."""

from ._mixprec.optimizers import (
    SGD,
    Adam,
    AdamW,
    LossScaleOptimizer,
    Optimizer,
    RMSprop,
    get,
    schedules,
)

__all__ = ["SGD", "Adam", "AdamW", "LossScaleOptimizer", "Optimizer", "RMSprop", "get",
           "schedules"]
