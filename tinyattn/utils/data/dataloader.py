"""``DataLoader``, as in ``torch.utils.data.dataloader``: batches of a dataset, in this process.

``DataLoader`` takes PyTorch's arguments with PyTorch's meaning and checks, and loads in the
calling process:

- ``num_workers > 0`` loads in this process too (one note on stderr per process says so); the
  batches and their order are those of ``num_workers=0``. ``worker_init_fn`` is then called
  once per pass with worker id 0 and :func:`get_worker_info` describes that one worker
  (``num_workers=1``), so a dataset that shards itself by worker sees all of its data.
  ``prefetch_factor``, ``persistent_workers`` and ``multiprocessing_context`` are checked as
  PyTorch checks them and have nothing to change.
- ``pin_memory`` has no effect: there is no accelerator to pin memory for (PyTorch on a machine
  without one behaves the same). ``pin_memory_device`` may only name the CPU.
- ``timeout`` (>= 0) bounds waits for workers, and there are none; ``in_order=False`` allows
  out-of-order batches and in-process loading always gives them in order.
- ``generator`` is a :class:`tinyattn.Generator`; ``shuffle=True`` draws from it (else from
  the global generator, so ``ta.manual_seed`` repeats the order).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...devices import check_device
from ...random import Generator, numpy_generator
from ...validation import is_int, is_number
from ._utils.collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "WorkerInfo", "default_collate", "default_convert", "get_worker_info"]

_noted_workers = False
_worker_info: WorkerInfo | None = None


@dataclass(frozen=True)
class WorkerInfo:
    """What :func:`get_worker_info` tells dataset code running in a loader's worker."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


def get_worker_info() -> WorkerInfo | None:
    """The current worker's :class:`WorkerInfo`, or None outside a worker.

    Loading runs in the calling process; while a ``DataLoader`` made with ``num_workers > 0``
    runs ``worker_init_fn`` or fetches samples, this is the one in-process worker
    (``id=0, num_workers=1``). Otherwise it is None, as in PyTorch's main process.
    """
    return _worker_info


def _note_in_process(num_workers: int) -> None:
    global _noted_workers
    if not _noted_workers:
        _noted_workers = True
        print(f"tinyattn: DataLoader(num_workers={num_workers}) loads in this process "
              "(tinyattn has no worker processes); the batches are those of num_workers=0",
              file=sys.stderr)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"DataLoader: {name} must be True or False, got {value!r}")
    return value


class DataLoader:
    """Batches of a dataset: ``for x, y in DataLoader(dataset, batch_size=8, shuffle=True)``.

    Parameters
    ----------
    dataset : map-style dataset (``__getitem__`` and ``__len__``) or ``IterableDataset``
    batch_size : int or None, default 1
        Samples per batch; None turns batching off (each item is passed through
        ``collate_fn``, :func:`default_convert` by default).
    shuffle : bool, optional
        Draw a new random order each pass (map-style datasets only).
    sampler : Sampler or iterable of indices, optional
        The index order; mutually exclusive with ``shuffle``.
    batch_sampler : Sampler or iterable of index lists, optional
        Whole batches of indices; mutually exclusive with ``batch_size``, ``shuffle``,
        ``sampler`` and ``drop_last``.
    num_workers : int, default 0
        >= 0; loading is in this process whatever the number (see the module docstring).
    collate_fn : callable, optional
        Turns a list of samples into a batch; :func:`default_collate` by default.
    pin_memory : bool, default False
        No effect on the CPU.
    drop_last : bool, default False
        Drop the last, shorter batch.
    timeout : number, default 0
        >= 0; no effect (there are no workers to wait for).
    worker_init_fn : callable, optional
        With ``num_workers > 0``, called as ``worker_init_fn(0)`` at the start of each pass.
    multiprocessing_context : str or context, optional
        Only with ``num_workers > 0``; no effect.
    generator : ta.Generator, optional
        The generator ``shuffle`` draws from.
    prefetch_factor : int, optional
        Only with ``num_workers > 0``; no effect.
    persistent_workers : bool, default False
        Only with ``num_workers > 0``; no effect.
    pin_memory_device : str, default ''
        Empty, or the CPU.
    in_order : bool, default True
        Batches always come in order.

    Examples
    --------
    >>> import tinyattn as ta
    >>> data = ta.utils.data.TensorDataset(ta.arange(10), ta.arange(10) * 2)
    >>> [x.tolist() for x, _ in ta.utils.data.DataLoader(data, batch_size=4)]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    """

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterable[Any] | None = None,
                 batch_sampler: Sampler | Iterable[list[Any]] | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list[Any]], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if not is_int(num_workers) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers option should be a non-negative int, got "
                             f"{num_workers!r}; use num_workers=0 to disable multiprocessing")
        if not is_number(timeout) or timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be a non-negative number, got "
                             f"{timeout!r}")
        if num_workers == 0:
            if prefetch_factor is not None:
                raise ValueError("DataLoader: prefetch_factor option could only be specified in "
                                 "multiprocessing: let num_workers > 0 to enable "
                                 "multiprocessing, otherwise set prefetch_factor to None")
            if persistent_workers:
                raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
            if multiprocessing_context is not None:
                raise ValueError("DataLoader: multiprocessing_context can only be used with "
                                 "multi-process loading (num_workers > 0), but got "
                                 "num_workers=0")
        elif prefetch_factor is not None and (not is_int(prefetch_factor)
                                              or prefetch_factor < 1):
            raise ValueError(f"DataLoader: prefetch_factor should be a positive int or None, got "
                             f"{prefetch_factor!r}")
        if isinstance(multiprocessing_context, str) and multiprocessing_context not in (
                "fork", "spawn", "forkserver"):
            raise ValueError(f"DataLoader: multiprocessing_context {multiprocessing_context!r} "
                             "is not a start method ('fork', 'spawn' or 'forkserver')")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError(f"DataLoader: worker_init_fn must be callable, got "
                            f"{type(worker_init_fn).__name__}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got "
                            f"{type(collate_fn).__name__}")
        if pin_memory_device:
            check_device(pin_memory_device, "DataLoader(pin_memory_device=...)")
        numpy_generator(generator, "DataLoader")  # checks its type
        _check_bool("pin_memory", pin_memory)
        _check_bool("drop_last", drop_last)
        _check_bool("persistent_workers", persistent_workers)
        _check_bool("in_order", in_order)

        if isinstance(dataset, IterableDataset):
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle!r}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler!r}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler!r}")
        elif shuffle is not None and not isinstance(shuffle, bool):
            raise TypeError(f"DataLoader: shuffle must be True, False or None, got {shuffle!r}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with "
                                 "batch_size, shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None:
            if drop_last:
                raise ValueError("DataLoader: batch_size=None option disables auto-batching and "
                                 "is mutually exclusive with drop_last")
        elif not is_int(batch_size) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size should be a positive integer value or None, "
                             f"but got batch_size={batch_size!r}")

        iterable = isinstance(dataset, IterableDataset)
        if sampler is None and not iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self.prefetch_factor = (2 if prefetch_factor is None and num_workers else
                                prefetch_factor)
        self.pin_memory = bool(pin_memory)
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._auto_collation = batch_sampler is not None or (iterable and batch_size is not None)
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        if num_workers:
            _note_in_process(num_workers)

    def __iter__(self) -> _DataLoaderIter:
        return _DataLoaderIter(self)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)


class _DataLoaderIter:
    """One pass over a :class:`DataLoader` (what ``iter(loader)`` returns)."""

    def __init__(self, loader: DataLoader) -> None:
        self._loader = loader
        self._worker = None
        # Each pass draws a base seed for its workers, whatever their number (as PyTorch does),
        # so that num_workers does not change the random order of later passes.
        seed = int(numpy_generator(loader.generator, "DataLoader").integers(0, 2**63 - 1))
        if loader.num_workers:
            self._worker = WorkerInfo(id=0, num_workers=1, seed=seed, dataset=loader.dataset)
            if loader.worker_init_fn is not None:
                self._as_worker(loader.worker_init_fn, 0)
        self._batches = self._as_worker(self._generate)
        self._length = None

    def _as_worker(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` with :func:`get_worker_info` describing the in-process worker."""
        global _worker_info
        previous, _worker_info = _worker_info, self._worker
        try:
            return function(*args)
        finally:
            _worker_info = previous

    def _generate(self) -> Iterator[Any]:
        loader = self._loader
        dataset, collate = loader.dataset, loader.collate_fn
        if isinstance(dataset, IterableDataset):
            items = iter(dataset)
            if not loader._auto_collation:
                return (collate(item) for item in items)
            return self._iterable_batches(items)
        if not loader._auto_collation:
            return (collate(dataset[index]) for index in loader.sampler)
        fetch_many = getattr(dataset, "__getitems__", None)
        if fetch_many is not None:
            return (collate(fetch_many(indices)) for indices in loader.batch_sampler)
        return (collate([dataset[index] for index in indices])
                for indices in loader.batch_sampler)

    def _iterable_batches(self, items: Iterator[Any]) -> Iterator[Any]:
        loader = self._loader
        size = loader.batch_size
        while True:
            batch = []
            for item in items:
                batch.append(item)
                if len(batch) == size:
                    break
            if not batch or (len(batch) < size and loader.drop_last):
                return
            yield loader.collate_fn(batch)
            if len(batch) < size:
                return

    def __iter__(self) -> _DataLoaderIter:
        return self

    def __next__(self) -> Any:
        return self._as_worker(next, self._batches)

    def __len__(self) -> int:
        return len(self._loader)
