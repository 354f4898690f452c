"""``torch.nn.parallel`` in one process on the CPU: ``DataParallel`` and
``DistributedDataParallel``.

``DataParallel`` does what PyTorch's does without a GPU: it keeps the module as ``.module``
(so state-dict keys gain the ``module.`` prefix) and runs it as it is. ``DistributedDataParallel``
needs a process group, which tinyattn never has: making one is a clear error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..distributed import ONE_PROCESS
from .module import Module

__all__ = ["DataParallel", "DistributedDataParallel"]


class DataParallel(Module):
    """``nn.DataParallel(module, device_ids=None, output_device=None, dim=0)`` on a machine
    without GPUs: the module runs as it is.

    Examples
    --------
    >>> import tinyattn as ta
    >>> model = ta.nn.DataParallel(ta.nn.Linear(2, 3))
    >>> list(model.state_dict()), model(ta.ones(1, 2)).shape
    (['module.weight', 'module.bias'], (1, 3))
    """

    def __init__(self, module: Module, device_ids: Sequence[Any] | None = None,
                 output_device: Any = None, dim: int = 0) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be an nn.Module, got "
                            f"{type(module).__name__}")
        if device_ids:
            raise RuntimeError(f"DataParallel: device_ids={list(device_ids)!r} names GPUs; "
                               "tinyattn runs on the CPU only (leave device_ids unset)")
        if output_device is not None:
            raise RuntimeError(f"DataParallel: output_device={output_device!r} names a GPU; "
                               "tinyattn runs on the CPU only")
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"DataParallel: dim must be an int, got {dim!r}")
        self.module = module
        self.device_ids: list[Any] = []
        self.output_device = None
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    """``nn.parallel.DistributedDataParallel``: an error, since tinyattn has no process group
    (see :mod:`tinyattn.distributed`)."""

    def __init__(self, module: Module, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"DistributedDataParallel: {ONE_PROCESS}; train the module "
                           "itself, without the DistributedDataParallel wrapper")
