"""``ta.utils.data``, laid out as ``torch.utils.data``: datasets (:mod:`.dataset`), samplers
(:mod:`.sampler`), the ``DataLoader`` (:mod:`.dataloader`) and batching (``default_collate``).

Everything runs in the calling process and draws random numbers from tinyattn's generators, so
``ta.manual_seed`` repeats a run's data order; see :mod:`.dataloader` for how each of
``DataLoader``'s arguments behaves here.
"""

from . import _utils, dataloader, dataset, sampler
from ._utils.collate import default_collate, default_convert
from .dataloader import DataLoader, WorkerInfo, get_worker_info
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset",
    "RandomSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler",
    "TensorDataset", "WeightedRandomSampler", "WorkerInfo", "_utils", "dataloader", "dataset",
    "default_collate", "default_convert", "get_worker_info", "random_split", "sampler",
]
