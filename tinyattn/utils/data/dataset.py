"""Datasets, as in ``torch.utils.data.dataset``: ``Dataset``, ``IterableDataset``,
``TensorDataset``, ``Subset``, ``ConcatDataset``, ``ChainDataset`` and ``random_split``.

A *map-style* dataset answers ``dataset[i]`` and ``len(dataset)``; an *iterable* dataset is
iterated. Any object with ``__getitem__`` and ``__len__`` (a list, a ``range``) works as a
map-style dataset wherever one is expected, as in PyTorch.
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ...random import Generator, numpy_generator
from ...tensor import Tensor
from ...validation import is_int

__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "Subset",
           "TensorDataset", "random_split"]


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` and usually ``__len__()``.

    ``dataset_a + dataset_b`` is their :class:`ConcatDataset`.

    Examples
    --------
    >>> import tinyattn as ta
    >>> class Squares(ta.utils.data.Dataset):
    ...     def __len__(self):
    ...         return 4
    ...     def __getitem__(self, i):
    ...         return i * i
    >>> [batch.tolist() for batch in ta.utils.data.DataLoader(Squares(), batch_size=2)]
    [[0, 1], [4, 9]]
    """

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is iterated (a stream): subclasses define ``__iter__()``.

    ``DataLoader`` batches what it yields, in order; sampling options (``shuffle``,
    ``sampler``, ``batch_sampler``) do not apply to it. ``a + b`` chains two of them.
    """

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")

    def __add__(self, other: Any) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample ``i`` is the tuple of the ``i``-th rows of ``tensors``, which share their first
    dim.

    Examples
    --------
    >>> import tinyattn as ta
    >>> data = ta.utils.data.TensorDataset(ta.arange(3), ta.arange(3) * 10)
    >>> len(data), [t.item() for t in data[2]]
    (3, [2, 20])
    """

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset: give at least one tensor")
        for position, tensor in enumerate(tensors):
            if not isinstance(tensor, Tensor):
                raise TypeError(f"TensorDataset: tensors[{position}] must be a Tensor, got "
                                f"{type(tensor).__name__}")
            if tensor.ndim == 0:
                raise ValueError(f"TensorDataset: tensors[{position}] is 0-d; every tensor "
                                 "needs a first dim to index samples along")
        sizes = [tensor.shape[0] for tensor in tensors]
        if len(set(sizes)) > 1:
            raise ValueError(f"TensorDataset: size mismatch between tensors: first dims {sizes}")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order (``Subset(d, [3, 0])[0]`` is
    ``d[3]``)."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after the other: index ``len(a)`` of ``ConcatDataset([a, b])``
    is ``b[0]``. Negative indices count from the end."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for position, dataset in enumerate(self.datasets):
            if isinstance(dataset, IterableDataset):
                raise TypeError(f"ConcatDataset: datasets[{position}] is an IterableDataset; "
                                "ConcatDataset does not support them (use ChainDataset)")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int) -> Any:
        if not is_int(index):
            raise TypeError(f"ConcatDataset: index must be an int, got {type(index).__name__}")
        index = int(index)
        if index < 0:
            if -index > len(self):
                raise ValueError(f"ConcatDataset: index {index} is out of range for a dataset "
                                 f"of length {len(self)}")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        if which == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} is out of range for a dataset of "
                             f"length {len(self)}")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after the other, as ``torch.utils.data.ChainDataset``."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator[Any]:
        for position, dataset in enumerate(self.datasets):
            if not isinstance(dataset, IterableDataset):
                raise TypeError(f"ChainDataset: datasets[{position}] is a "
                                f"{type(dataset).__name__}, not an IterableDataset")
            yield from dataset

    def __len__(self) -> int:
        return sum(len(dataset) for dataset in self.datasets)


def _split_lengths(lengths: Sequence[int | float], total: int) -> list[int]:
    """``lengths`` as ints: fractions summing to 1 become counts, PyTorch's way (floors, then
    the remainder handed out one by one from the first split)."""
    values = list(lengths)
    if values and math.isclose(sum(values), 1) and sum(values) <= 1:
        counts = []
        for position, fraction in enumerate(values):
            if isinstance(fraction, bool) or not 0 <= fraction <= 1:
                raise ValueError(f"random_split: fraction at index {position} is not between "
                                 f"0 and 1: {fraction!r}")
            counts.append(int(math.floor(total * fraction)))
        for position in range(total - sum(counts)):
            counts[position % len(counts)] += 1
        for position, count in enumerate(counts):
            if count == 0:
                warnings.warn(f"random_split: length of split at index {position} is 0; this "
                              "might result in an empty dataset.", UserWarning, stacklevel=3)
        return counts
    for position, length in enumerate(values):
        if not is_int(length) or length < 0:
            raise ValueError(f"random_split: lengths must be non-negative ints or fractions "
                             f"summing to 1, got lengths[{position}] = {length!r}")
    if sum(values) != total:
        raise ValueError(f"random_split: sum of input lengths ({sum(values)}) does not equal "
                         f"the length of the input dataset ({total})")
    return [int(length) for length in values]


def random_split(dataset: Any, lengths: Sequence[int | float],
                 generator: Generator | None = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random :class:`Subset` s of the given lengths.

    Parameters
    ----------
    dataset : map-style dataset
    lengths : sequence of ints, or of fractions summing to 1
        Ints must sum to ``len(dataset)``; fractions are turned into counts as PyTorch does
        (``floor(n * f)``, then the remainder one at a time from the first split on).
    generator : ta.Generator, optional
        Where the permutation is drawn; the global generator (``ta.manual_seed``) by default.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.manual_seed(0)
    >>> train, val = ta.utils.data.random_split(range(10), [0.8, 0.2])
    >>> len(train), len(val), sorted(list(train) + list(val)) == list(range(10))
    (8, 2, True)
    """
    rng = numpy_generator(generator, "random_split")
    counts = _split_lengths(lengths, len(dataset))
    order = rng.permutation(sum(counts)).tolist()
    splits = []
    for end, count in zip(itertools.accumulate(counts), counts):
        splits.append(Subset(dataset, order[end - count:end]))
    return splits
