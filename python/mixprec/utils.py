"""Utilities (keras.utils)."""

from ._mixprec import set_seed


def set_random_seed(seed):
    """Seeds mixprec's generator (initial weights, fit's and Dataset.shuffle's shuffling, dropout)
    and NumPy's global one."""
    import numpy

    set_seed(int(seed))
    numpy.random.seed(int(seed) % (2**32))


__all__ = ["set_random_seed"]
