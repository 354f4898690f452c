"""``torch.distributed`` in one process: tinyattn trains in a single process on the CPU.

``is_available()`` and ``is_initialized()`` are False, so scripts that check them (or, like
nanoGPT, only call ``init_process_group`` when ``torchrun`` set ``RANK``) run as one process.
``init_process_group`` is a clear error, and so is every collective and query of a process
group that needs one (as PyTorch's are before ``init_process_group``).
"""

from __future__ import annotations

from typing import Any

from .missing import missing as _missing

__all__ = ["barrier", "destroy_process_group", "get_rank", "get_world_size",
           "init_process_group", "is_available", "is_initialized"]

ONE_PROCESS = ("tinyattn runs one process on the CPU: it has no process groups (run the script "
               "without torchrun, so that RANK and WORLD_SIZE are unset)")


def is_available() -> bool:
    """Always False: tinyattn has no distributed backend."""
    return False


def is_initialized() -> bool:
    """Always False: there is never a process group."""
    return False


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: Any = None, world_size: int = -1, rank: int = -1,
                       store: Any = None, group_name: str = "", pg_options: Any = None,
                       device_id: Any = None) -> None:
    """An error: tinyattn runs one process."""
    raise RuntimeError(f"torch.distributed.init_process_group(backend={backend!r}): "
                       f"{ONE_PROCESS}")


def _no_group(name: str) -> RuntimeError:
    return RuntimeError(f"torch.distributed.{name}: the default process group was never "
                        f"initialized; {ONE_PROCESS}")


def destroy_process_group(group: Any = None) -> None:
    """An error, as in PyTorch without a process group."""
    raise _no_group("destroy_process_group")


def get_rank(group: Any = None) -> int:
    """An error, as in PyTorch without a process group."""
    raise _no_group("get_rank")


def get_world_size(group: Any = None) -> int:
    """An error, as in PyTorch without a process group."""
    raise _no_group("get_world_size")


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> None:
    """An error, as in PyTorch without a process group."""
    raise _no_group("barrier")


def __getattr__(name: str) -> object:
    """A ``torch.distributed`` name tinyattn does not have: say so, naming the caller's line."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"torch.distributed.{name}", ONE_PROCESS)
