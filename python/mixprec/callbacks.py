"""Callbacks (keras.callbacks). Subclass Callback in Python to write your own: fit() and
evaluate() call its on_* methods (with the GIL taken; only the ones you define), with logs as a
dict of floats, and set self.model and self.params. Ctrl-C during fit stops it after the current
step with KeyboardInterrupt; the model stays usable."""

from ._mixprec.callbacks import (
    BackupAndRestore,
    Callback,
    CSVLogger,
    EarlyStopping,
    LearningRateScheduler,
    ModelCheckpoint,
    ReduceLROnPlateau,
    TensorBoard,
    TerminateOnNaN,
)

__all__ = ["BackupAndRestore", "Callback", "CSVLogger", "EarlyStopping", "LearningRateScheduler",
           "ModelCheckpoint", "ReduceLROnPlateau", "TensorBoard", "TerminateOnNaN"]
