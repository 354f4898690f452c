"""``ta.save`` / ``ta.load``: PyTorch's checkpoint calls, without pickle.

``ta.save(obj, path)`` accepts what training scripts save — state dicts, optimizer state, and
dicts/lists of them with numbers, strings and None (nanoGPT's ``{'model': ..., 'optimizer':
..., 'iter_num': ...}``) — and writes one ``.npz`` (atomically, as ``Module.save`` does): every
tensor or array under its own key, the nesting as JSON beside them. ``ta.load(path)`` builds
the same structure back with tensors in place of tensors. Nothing is ever unpickled, so
``weights_only`` is accepted and always true; an object that is not made of these parts is a
clear error at save time.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from .nn.checkpoint import load as load_arrays
from .nn.checkpoint import save_arrays
from .tensor import Tensor

_STRUCTURE = "__structure__"


def _encode(obj: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    if isinstance(obj, (Tensor, np.ndarray)):
        key = f"array_{len(arrays)}"
        arrays[key] = np.asarray(obj.numpy() if isinstance(obj, Tensor) else obj)
        return {"tensor" if isinstance(obj, Tensor) else "ndarray": key}
    if isinstance(obj, dict):
        if not all(isinstance(k, (str, int)) for k in obj):
            raise TypeError(f"save: dict keys must be strings or ints, at {where}")
        return {"dict": [[k, _encode(v, arrays, f"{where}[{k!r}]")] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {kind: [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, np.generic):
        obj = obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    raise TypeError(f"save: cannot save a {type(obj).__name__} at {where}: tinyattn saves "
                    "tensors, arrays, numbers, strings, None and dicts/lists of them (no "
                    "pickle); save module.state_dict() rather than the module")


def _decode(node: Any, arrays: dict[str, np.ndarray]) -> Any:
    ((kind, value),) = node.items()
    if kind == "tensor":
        return Tensor(arrays[value], dtype=arrays[value].dtype)
    if kind == "ndarray":
        return arrays[value]
    if kind == "dict":
        return {k: _decode(v, arrays) for k, v in value}
    if kind in ("list", "tuple"):
        items = [_decode(v, arrays) for v in value]
        return items if kind == "list" else tuple(items)
    return value


def save(obj: Any, f: str | os.PathLike) -> None:
    """Write ``obj`` (state dicts, numbers, strings and nests of them) to the file ``f``.

    Examples
    --------
    >>> import tinyattn as ta, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.pth")
    >>> ta.save({"model": ta.nn.Linear(2, 1).state_dict(), "step": 3}, path)
    >>> sorted(ta.load(path)["model"]), ta.load(path)["step"]
    (['bias', 'weight'], 3)
    """
    arrays: dict[str, np.ndarray] = {}
    structure = _encode(obj, arrays, "obj")
    arrays[_STRUCTURE] = np.frombuffer(json.dumps(structure).encode(), dtype=np.uint8)
    save_arrays(f, arrays)


def load(f: str | os.PathLike, map_location: Any = None, weights_only: bool = True,
         **_: Any) -> Any:
    """Read back what :func:`save` wrote (``map_location`` and ``weights_only`` are accepted:
    everything is on the CPU and nothing is unpickled)."""
    arrays = dict(load_arrays(f))
    if _STRUCTURE not in arrays:  # a Module.save checkpoint: a flat state dict
        return {k: Tensor(v, dtype=v.dtype) for k, v in arrays.items()}
    structure = json.loads(arrays.pop(_STRUCTURE).tobytes().decode())
    return _decode(structure, arrays)
