"""``Dataset``, ``TensorDataset`` and a single-process ``DataLoader``, as in
``torch.utils.data``, for the data loops of small training scripts.

``DataLoader`` batches a map-style dataset: it draws the indices (shuffled with tinyattn's
generator when ``shuffle``, so ``ta.manual_seed`` repeats it), fetches the samples and
stacks them with :func:`default_collate`. ``num_workers`` is accepted and ignored (everything
runs in this process).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..ops import stack
from ..random import generator
from ..tensor import Tensor
from ..validation import check_int


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(i)`` and ``__len__()``."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not define __len__")


class TensorDataset(Dataset):
    """Samples are the ``i``-th rows of tensors that share their first dim."""

    def __init__(self, *tensors: Tensor):
        if not tensors or any(t.shape[:1] != tensors[0].shape[:1] for t in tensors):
            raise ValueError("TensorDataset: tensors must be given and share their first dim")
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


def default_collate(batch: Sequence[Any]) -> Any:
    """Stack a list of samples: tensors along a new first dim, numbers into a tensor, and
    tuples/lists/dicts element by element."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(list(batch))
    if isinstance(first, np.ndarray):
        return Tensor(np.stack(batch))
    if isinstance(first, (int, float, bool, np.number)):
        return Tensor(np.asarray(batch))
    if isinstance(first, Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate(list(items)) for items in zip(*batch))
    return list(batch)


class DataLoader:
    """Batches of a dataset: ``for x, y in DataLoader(dataset, batch_size=8, shuffle=True)``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> data = ta.utils.data.TensorDataset(ta.arange(10), ta.arange(10) * 2)
    >>> [x.tolist() for x, _ in ta.utils.data.DataLoader(data, batch_size=4)]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool = False,
                 drop_last: bool = False, collate_fn: Callable | None = None,
                 num_workers: int = 0, **_: Any):
        self.dataset = dataset
        self.batch_size = None if batch_size is None else check_int(
            "DataLoader", "batch_size", batch_size, 1)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.collate_fn = collate_fn or default_collate

    def __iter__(self) -> Iterator[Any]:
        n = len(self.dataset)
        order = generator().permutation(n) if self.shuffle else np.arange(n)
        if self.batch_size is None:
            for i in order:
                yield self.dataset[int(i)]
            return
        for start in range(0, n, self.batch_size):
            indices = order[start:start + self.batch_size]
            if self.drop_last and len(indices) < self.batch_size:
                return
            yield self.collate_fn([self.dataset[int(i)] for i in indices])

    def __len__(self) -> int:
        n = len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
