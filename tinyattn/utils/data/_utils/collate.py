"""``default_collate`` and ``default_convert``: how ``DataLoader`` turns samples into batches,
with PyTorch's rules (``torch.utils.data._utils.collate``).

``default_collate`` stacks a list of samples into a batch, structure by structure:

=====================================  ===================================================
first sample is                        the batch is
=====================================  ===================================================
Tensor                                 ``stack(samples)`` (shapes must match)
numpy array (numeric)                  the arrays stacked, as a tensor of their dtype
numpy scalar                           a 1-D tensor of its dtype
float                                  a float64 tensor
int (bool included)                    ``tensor(samples)``: int64, or bool for bools
str / bytes                            the list of samples, unchanged
mapping                                the same mapping type, each key collated
namedtuple                             the same namedtuple type, each field collated
tuple                                  a *list*, each position collated
other sequence                         the same sequence type when it can be built, each
                                       position collated (all samples of equal length)
=====================================  ===================================================

Anything else is a TypeError naming its type.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence
from typing import Any

import numpy as np

from ....ops import stack
from ....tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                  "lists; found {}")


def _is_numeric_array(value: np.ndarray) -> bool:
    return value.dtype.kind in "biuf"


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def _rebuild_mapping(template: Mapping, values: dict[Any, Any]) -> Any:
    """A mapping of ``template``'s type holding ``values`` (a plain dict if it can't be made)."""
    if isinstance(template, MutableMapping):
        clone = copy.copy(template)
        clone.update(values)
        return clone
    try:
        return type(template)(values)
    except TypeError:
        return values


def _rebuild_sequence(template: Sequence, values: list[Any]) -> Any:
    """A sequence of ``template``'s type holding ``values`` (a list if it can't be made)."""
    if isinstance(template, MutableSequence):
        clone = copy.copy(template)
        for position, value in enumerate(values):
            clone[position] = value
        return clone
    try:
        return type(template)(values)
    except TypeError:
        return values


def default_collate(batch: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch, with PyTorch's rules (see the module docstring).

    Examples
    --------
    >>> import tinyattn as ta
    >>> out = ta.utils.data.default_collate([{"x": ta.ones(2), "y": 1}, {"x": ta.zeros(2), "y": 0}])
    >>> out["x"].shape, out["y"].tolist()
    ((2, 2), [1, 0])
    >>> ta.utils.data.default_collate([(1, 2.0), (3, 4.0)])[1].dtype
    dtype('float64')
    """
    if not isinstance(batch, Sequence) or isinstance(batch, (str, bytes)):
        batch = list(batch)
    if not batch:
        raise ValueError("default_collate: the batch is empty")
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(list(batch), 0)
    if isinstance(first, np.ndarray):
        if not _is_numeric_array(first):
            raise TypeError(_COLLATE_ERROR.format(f"a numpy array of dtype {first.dtype}"))
        return stack([Tensor(np.asarray(sample)) for sample in batch], 0)
    if isinstance(first, np.generic) and not isinstance(first, (np.str_, np.bytes_)):
        return Tensor(np.array(batch))
    if isinstance(first, float):
        return Tensor(list(batch), dtype=np.float64)
    if isinstance(first, int):
        return Tensor(list(batch))
    if isinstance(first, (str, bytes)):
        return batch
    if isinstance(first, Mapping):
        return _rebuild_mapping(first, {key: default_collate([sample[key] for sample in batch])
                                        for key in first})
    if _is_namedtuple(first):
        return type(first)(*(default_collate(list(items)) for items in zip(*batch)))
    if isinstance(first, Sequence):
        if any(len(sample) != len(first) for sample in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of "
                               f"equal size, got lengths {[len(sample) for sample in batch]}")
        columns = [default_collate(list(items)) for items in zip(*batch)]
        return columns if isinstance(first, tuple) else _rebuild_sequence(first, columns)
    raise TypeError(_COLLATE_ERROR.format(type(first)))


def default_convert(data: Any) -> Any:
    """One sample made of tensors where it holds numpy data (``DataLoader`` with
    ``batch_size=None``): numpy arrays and scalars become tensors, containers are converted
    element by element (tuples become lists), everything else is returned as it is.

    Examples
    --------
    >>> import numpy as np, tinyattn as ta
    >>> ta.utils.data.default_convert((np.arange(2), "a"))
    [tensor([0, 1]), 'a']
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return Tensor(data) if _is_numeric_array(data) else data
    if isinstance(data, np.generic):
        return Tensor(data) if data.dtype.kind in "biuf" else data
    if isinstance(data, Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(item) for item in data))
    if isinstance(data, tuple):
        return [default_convert(item) for item in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(item) for item in data])
    return data
