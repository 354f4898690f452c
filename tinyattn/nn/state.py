"""A module's state dict: every parameter and persistent buffer under its dotted name.

``state_dict`` gives views of the module's tensors, ``load_state_dict`` copies values in
(tinyattn tensors, numpy arrays or PyTorch tensors, checked all before any is written) and
``save`` writes them to an ``.npz`` file.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from ..tensor import Tensor
from .checkpoint import save_arrays


class IncompatibleKeys(NamedTuple):
    """The keys ``load_state_dict`` could not match, as PyTorch's ``_IncompatibleKeys``."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"IncompatibleKeys(missing_keys={self.missing_keys}, "
                f"unexpected_keys={self.unexpected_keys})")


class StateDictMixin:
    """``Module``'s state dict methods: ``state_dict``, ``load_state_dict``, ``save``."""

    def _named_state(self) -> Iterator[tuple[str, Tensor]]:
        """Every state dict entry: per module (parent first), its parameters then its
        persistent buffers; a shared tensor appears under each of its names, as in PyTorch."""
        for module_name, module in self.named_modules(remove_duplicate=False):
            prefix = f"{module_name}." if module_name else ""
            for name, param in module._parameters.items():
                if param is not None:
                    yield prefix + name, param
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent_buffers_set:
                    yield prefix + name, buffer

    def state_dict(self, *, destination: dict[str, Tensor] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Tensor]:
        """Every parameter and persistent buffer under its dotted name, as in PyTorch.

        The values are tensors detached from the graph that share memory with the module's
        own (``keep_vars=True`` gives the parameters themselves): the state dict is a view,
        not a snapshot. Keys carry ``prefix``; entries are added to ``destination`` if given.

        Examples
        --------
        >>> import tinyattn as ta
        >>> layer = ta.nn.Linear(2, 3)
        >>> state = layer.state_dict()
        >>> list(state), state["weight"].requires_grad
        (['weight', 'bias'], False)
        >>> state["weight"].numpy() is layer.weight.numpy()
        True
        """
        destination = OrderedDict() if destination is None else destination
        for name, tensor in self._named_state():
            destination[prefix + name] = tensor if keep_vars else tensor.detach()
        return destination

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> IncompatibleKeys:
        """Copy values into the parameters and persistent buffers, in place.

        Values may be tinyattn tensors, numpy arrays or anything with ``__array__`` (PyTorch
        tensors included) of the right shape; they are cast to each tensor's dtype. Missing and
        unexpected keys are errors when ``strict``, a shape mismatch always is; on any error
        nothing is changed.

        Returns
        -------
        IncompatibleKeys
            ``(missing_keys, unexpected_keys)``, as in PyTorch.

        Examples
        --------
        >>> import tinyattn as ta
        >>> layer = ta.nn.Linear(2, 1)
        >>> layer.load_state_dict({"weight": [[1.0, 2.0]], "bias": [0.5]})
        <All keys matched successfully>
        >>> layer(ta.ones(1, 2)).tolist()
        [[3.5]]
        """
        owner = f"load_state_dict into {type(self).__name__}"
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"{owner}: expected a mapping of parameter names to arrays, got "
                            f"{type(state_dict).__name__}")
        own = dict(self._named_state())
        missing = [key for key in own if key not in state_dict]
        unexpected = [key for key in state_dict if key not in own]
        problems = []
        arrays = {}
        for key, target in own.items():
            if key not in state_dict:
                continue
            array, problem = _as_array(state_dict[key])
            if problem:
                problems.append(f"{key}: {problem}")
            elif array.shape != target.shape:
                problems.append(f"{key}: shape {array.shape} in the state dict, "
                                f"{target.shape} in the model")
            else:
                arrays[key] = array
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if problems:
            raise ValueError(f"{owner} failed (nothing was changed):\n  "
                             + "\n  ".join(problems))
        for key, array in arrays.items():
            target = own[key]
            if target.numpy().flags.writeable:
                np.copyto(target.numpy(), array, casting="unsafe")
            else:
                target.data = array.astype(target.dtype, copy=True)
        return IncompatibleKeys(missing, unexpected)

    def save(self, path: str | os.PathLike) -> None:
        """(+) Write the state dict to ``path`` as ``.npz``, atomically (temp file, rename).

        An interrupted save never leaves a half-written file in place of a good checkpoint;
        :func:`tinyattn.nn.load` reads it back without unpickling anything.
        """
        save_arrays(path, {name: tensor.numpy() for name, tensor in self._named_state()})


def _as_array(value: Any) -> tuple[np.ndarray | None, str | None]:
    """``value`` (Tensor, ndarray, PyTorch tensor, nested lists) as a numeric array, or the
    reason it is not one."""
    if isinstance(value, Tensor):
        value = value.numpy()
    elif callable(getattr(value, "detach", None)):
        value = value.detach()  # a PyTorch tensor that requires grad has no __array__
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as err:
        return None, f"cannot read a {type(value).__name__} as an array ({err})"
    if array.dtype.kind not in "fiub":
        return None, f"expected numbers, got dtype {array.dtype}"
    return array, None
