"""Samplers, as in ``torch.utils.data.sampler``: which dataset indices a ``DataLoader`` fetches,
in which order, and how they are grouped into batches.

Random samplers draw from the :class:`tinyattn.Generator` they are given, else from tinyattn's
global generator, so ``ta.manual_seed`` repeats their order. Every sampler is lazy: an epoch of
``RandomSampler(data, replacement=True, num_samples=10**10)`` is drawn a chunk at a time, never
held in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any

import numpy as np

from ...random import Generator, numpy_generator
from ...tensor import Tensor
from ...validation import is_int

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler"]

_CHUNK = 64
"""How many indices a sampler with replacement draws at a time."""


class Sampler:
    """Base class of samplers: subclasses define ``__iter__`` (indices, or lists of indices
    for a batch sampler) and, when they know it, ``__len__``."""

    def __init__(self, data_source: Any = None) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``, in order.

    Examples
    --------
    >>> import tinyattn as ta
    >>> list(ta.utils.data.SequentialSampler("abc"))
    [0, 1, 2]
    """

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _epoch_generator(generator: Generator | None, op: str) -> np.random.Generator:
    """A sampler's generator for one pass: ``generator``'s own, or (as PyTorch does) a fresh
    one seeded by a draw from the global generator, so that ``ta.manual_seed`` fixes it."""
    if generator is None:
        seed = int(numpy_generator(None, op).integers(0, 2**63 - 1))
        return np.random.default_rng(seed)
    return numpy_generator(generator, op)


class RandomSampler(Sampler):
    """Indices in random order: a permutation per pass, or draws with replacement.

    Parameters
    ----------
    data_source : sized dataset
        Indices are drawn from ``range(len(data_source))``, looked up at each pass.
    replacement : bool, default False
        Draw each index independently (uniformly, with replacement) instead of permuting.
    num_samples : int, optional
        How many indices one pass yields; ``len(data_source)`` by default. Without replacement
        a larger count chains whole permutations, then the start of one more.
    generator : ta.Generator, optional
        Where the draws come from; by default each pass seeds a fresh generator from the global
        one (``ta.manual_seed``).

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.manual_seed(0)
    >>> sorted(ta.utils.data.RandomSampler(range(4)))
    [0, 1, 2, 3]
    >>> len(ta.utils.data.RandomSampler(range(4), replacement=True, num_samples=10**10))
    10000000000
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None, generator: Generator | None = None) -> None:
        _check_bool("RandomSampler", "replacement", replacement, TypeError)
        if num_samples is not None:
            _check_positive_int("RandomSampler", "num_samples", num_samples)
        numpy_generator(generator, "RandomSampler")  # checks its type
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = None if num_samples is None else int(num_samples)
        self.generator = generator
        if self.num_samples <= 0:
            raise ValueError(f"RandomSampler: num_samples should be a positive integer value, "
                             f"but got num_samples={self.num_samples} (the dataset is empty)")

    @property
    def num_samples(self) -> int:
        """The number of indices one pass yields."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        total = self.num_samples
        if n == 0:
            raise ValueError("RandomSampler: cannot draw samples from an empty dataset")
        rng = _epoch_generator(self.generator, "RandomSampler")
        if self.replacement:
            remaining = total
            while remaining > 0:
                count = min(_CHUNK, remaining)
                yield from rng.integers(0, n, size=count).tolist()
                remaining -= count
            return
        for _ in range(total // n):
            yield from rng.permutation(n).tolist()
        if total % n:
            yield from rng.permutation(n)[:total % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order (a new permutation each pass).

    Examples
    --------
    >>> import tinyattn as ta
    >>> sorted(ta.utils.data.SubsetRandomSampler([7, 3, 5]))
    [3, 5, 7]
    """

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        numpy_generator(generator, "SubsetRandomSampler")
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rng = numpy_generator(self.generator, "SubsetRandomSampler")
        for position in rng.permutation(len(self.indices)).tolist():
            yield self.indices[position]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``.

    Parameters
    ----------
    weights : sequence of non-negative numbers (or a 1-D tensor)
    num_samples : int
    replacement : bool, default True
        Without replacement, ``num_samples`` cannot exceed the number of non-zero weights.
    generator : ta.Generator, optional
    """

    def __init__(self, weights: Any, num_samples: int, replacement: bool = True,
                 generator: Generator | None = None) -> None:
        _check_positive_int("WeightedRandomSampler", "num_samples", num_samples)
        _check_bool("WeightedRandomSampler", "replacement", replacement)
        values = np.asarray(weights.numpy() if isinstance(weights, Tensor) else weights,
                            dtype=np.float64)
        if values.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1-D sequence, got "
                             f"shape {values.shape}")
        if not np.all(np.isfinite(values)) or (values < 0).any() or values.sum() <= 0:
            raise ValueError("WeightedRandomSampler: weights must be finite, non-negative and "
                             "not all zero")
        if not replacement and num_samples > np.count_nonzero(values):
            raise ValueError(f"WeightedRandomSampler: cannot draw {num_samples} samples without "
                             f"replacement from {np.count_nonzero(values)} non-zero weights")
        numpy_generator(generator, "WeightedRandomSampler")
        self.weights = values
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rng = numpy_generator(self.generator, "WeightedRandomSampler")
        draws = rng.choice(len(self.weights), size=self.num_samples, replace=self.replacement,
                           p=self.weights / self.weights.sum())
        yield from draws.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices taken in order from ``sampler``.

    Parameters
    ----------
    sampler : Sampler or iterable of indices
    batch_size : int
        A positive int.
    drop_last : bool
        Drop the last, shorter batch instead of yielding it.

    Examples
    --------
    >>> import tinyattn as ta
    >>> list(ta.utils.data.BatchSampler(range(5), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    >>> len(ta.utils.data.BatchSampler(range(5), batch_size=2, drop_last=True))
    2
    """

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int,
                 drop_last: bool) -> None:
        _check_positive_int("BatchSampler", "batch_size", batch_size)
        _check_bool("BatchSampler", "drop_last", drop_last)
        self.sampler = sampler
        self.batch_size = int(batch_size)
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def _check_positive_int(owner: str, name: str, value: Any) -> None:
    """PyTorch's error for a count that is not a positive int, naming ``owner`` and ``name``."""
    if not is_int(value) or value <= 0:
        raise ValueError(f"{owner}: {name} should be a positive integer value, but got "
                         f"{name}={value!r}")


def _check_bool(owner: str, name: str, value: Any, error: type[Exception] = ValueError) -> None:
    """PyTorch's error (``error``: ValueError or TypeError, as it raises) for a flag that is
    not a bool."""
    if not isinstance(value, bool):
        raise error(f"{owner}: {name} should be a boolean value, but got {name}={value!r}")
