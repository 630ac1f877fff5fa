"""Input pipelines in tf.data's form, over NumPy arrays:

    train = mp.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(10000).batch(8192)
    for x, y in train:          # NumPy arrays, one batch each
        ...
    model.fit(train, epochs=5)  # fit takes the dataset's arrays, batch size and shuffling

shuffle(buffer_size) draws a fresh permutation of the whole dataset at every iteration (a uniform
shuffle whatever the buffer size, where tf.data shuffles within a window of buffer_size), from
mixprec's generator: shuffle(..., seed=s) gives the permutations a C++ data::BatchLoader with seed s
gives; without a seed one is drawn from mixprec's default generator (mixprec.set_seed makes it
repeatable). prefetch() and cache() are
accepted and change nothing (the arrays are in memory already).

Text for language models: TokenDataset maps a token file (`mixprec tokenize`) and serves windows of
it without copying the corpus:

    tokens = mp.data.TokenDataset("fortunes.tok", validation_fraction=0.1)
    train = tokens.train_windows(128, batch_size=32, epochs=10, seed=42)   # TokenWindows
    gpt.fit(train, epochs=10, validation_data=tokens.validation_windows(128))

fit takes the windows' batch size and steps per epoch (each epoch a new shuffle of all the windows
drawn); each batch's tokens are read from the mapping when it is trained, as `mixprec train
--dataset text:...` does.
"""

import numpy as _np

from ._mixprec.data import (FORTUNES_DIR, ByteTokenizer, Gpt2Tokenizer, Shuffler, TokenDataset,
                            Tokenizer, TokenWindows, default_fashion_mnist_dir,
                            fashion_mnist_class_names, open_text_dataset, read_idx,
                            read_text_documents, read_token_file, write_token_file)


class Dataset:
    """Slices of arrays along their first axis, optionally shuffled and batched."""

    def __init__(self, tensors, shuffle_seed=None, shuffled=False, batch_size=None,
                 drop_remainder=False):
        self._tensors = tensors
        self._arrays = [_np.asarray(t) for t in (tensors if isinstance(tensors, tuple) else (tensors,))]
        n = {len(a) for a in self._arrays}
        if len(n) != 1:
            raise ValueError("from_tensor_slices: the arrays have different first extents: "
                             + ", ".join(str(len(a)) for a in self._arrays))
        self._size = n.pop()
        self._shuffled = shuffled
        self._rng = Shuffler(self._size, shuffle_seed) if shuffled else None
        self._batch_size = batch_size
        self._drop_remainder = drop_remainder

    @staticmethod
    def from_tensor_slices(tensors):
        """A dataset of the rows of an array, or of a tuple of arrays with equal first extents
        ((x, y): each element is an (x_row, y_row) pair)."""
        if isinstance(tensors, list):
            tensors = tuple(tensors)
        return Dataset(tensors)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True):
        """A new permutation of all the rows at each iteration (see the module's docstring)."""
        if int(buffer_size) <= 0:
            raise ValueError(f"shuffle: buffer_size must be positive, got {buffer_size}")
        del reshuffle_each_iteration
        return Dataset(self._tensors, shuffle_seed=seed, shuffled=True,
                       batch_size=self._batch_size, drop_remainder=self._drop_remainder)

    def batch(self, batch_size, drop_remainder=False):
        """Batches of batch_size rows (the last one smaller unless drop_remainder)."""
        if int(batch_size) <= 0:
            raise ValueError(f"batch: batch_size must be positive, got {batch_size}")
        ds = Dataset(self._tensors, batch_size=int(batch_size), drop_remainder=drop_remainder)
        ds._shuffled, ds._rng = self._shuffled, self._rng
        return ds

    def prefetch(self, buffer_size=None):
        return self

    def cache(self, filename=""):
        return self

    def __len__(self):
        if self._batch_size is None:
            return self._size
        full, rest = divmod(self._size, self._batch_size)
        return full + (1 if rest and not self._drop_remainder else 0)

    def cardinality(self):
        return len(self)

    def __iter__(self):
        order = self._rng.permutation() if self._shuffled else None
        single = not isinstance(self._tensors, tuple)
        if self._batch_size is None:
            for i in range(self._size):
                j = i if order is None else order[i]
                rows = tuple(a[j] for a in self._arrays)
                yield rows[0] if single else rows
            return
        for b in range(len(self)):
            start, stop = b * self._batch_size, min((b + 1) * self._batch_size, self._size)
            if order is None:
                rows = tuple(a[start:stop] for a in self._arrays)
            else:
                idx = order[start:stop]
                rows = tuple(a[idx] for a in self._arrays)
            yield rows[0] if single else rows

    def _fit_arguments(self):
        """(x, y, batch_size, shuffle) for Model.fit/evaluate/predict."""
        x = self._arrays[0]
        y = self._arrays[1] if len(self._arrays) > 1 else None
        return (x, y, self._batch_size, self._shuffled)


def _token_windows_batches(self):
    """(x, y) NumPy batches of batch_size windows (32 for validation windows), in stored order."""
    size = self.batch_size or 32
    for start in range(0, len(self), size):
        yield self.batch(start, min(start + size, len(self)))


TokenWindows.__iter__ = _token_windows_batches


__all__ = ["FORTUNES_DIR", "ByteTokenizer", "Dataset", "Gpt2Tokenizer", "TokenDataset",
           "TokenWindows", "Tokenizer", "default_fashion_mnist_dir", "fashion_mnist_class_names",
           "open_text_dataset", "read_idx", "read_text_documents", "read_token_file",
           "write_token_file"]
