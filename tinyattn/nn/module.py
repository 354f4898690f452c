"""``Module`` and ``Parameter``: parameter discovery, train/eval, state dicts and checkpoints.

Parameters and submodules are found by walking attributes, and named with dots as in PyTorch
(``blocks.0.attn.q_proj.weight``), so a state dict moves between the two without renaming.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from ..tensor import Tensor, _to_array


class Parameter(Tensor):
    """A leaf tensor that a ``Module`` registers as one of its parameters (requires grad)."""

    def __init__(self, data: Any, requires_grad: bool = True):
        super().__init__(_to_array(data), requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` could not match, as in PyTorch."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of every layer: subclasses set parameters/submodules in ``__init__`` and
    define ``forward``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> class Scale(ta.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.weight = ta.nn.Parameter(ta.ones(3))
    ...     def forward(self, x):
    ...         return x * self.weight
    >>> [name for name, _ in Scale().named_parameters()]
    ['weight']
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise RuntimeError(
                f"{type(self).__name__}: call super().__init__() before assigning attributes"
            )
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ---- traversal --------------------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every submodule, depth first, each once."""
        seen: set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [(f"{name}.{k}" if name else k, m) for k, m in module._modules.items()]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_parameters(
        self, prefix: str = "", recurse: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs; a parameter shared by two modules appears once."""
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for module_name, module in modules:
            for name, param in module._parameters.items():
                if id(param) not in seen:
                    seen.add(id(param))
                    yield (f"{module_name}.{name}" if module_name else name), param

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    # ---- modes and gradients ----------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active) on this module and every submodule."""
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Set evaluation mode (dropout is the identity)."""
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient (to None by default, as in PyTorch)."""
        for param in self.parameters():
            if set_to_none:
                param.grad = None
            elif param.grad is not None:
                param.grad = Tensor(np.zeros_like(param.grad.data))

    def to(self, dtype: Any) -> Module:
        """Convert every parameter to a float ``dtype`` in place (gradients are cleared)."""
        target = np.dtype(dtype)
        if target.kind != "f":
            raise TypeError(f"Module.to: expected a float dtype, got {target}")
        for param in self.parameters():
            param.data = param.data.astype(target)
            param.grad = None
        return self

    def double(self) -> Module:
        return self.to(np.float64)

    def float(self) -> Module:
        return self.to(np.float32)

    # ---- state ------------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict[str, np.ndarray]:
        """Every parameter as a copied numpy array under its dotted name."""
        return OrderedDict((name, p.data.copy()) for name, p in self.named_parameters())

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True
    ) -> IncompatibleKeys:
        """Copy values into the parameters; on any error nothing is changed.

        Missing and unexpected keys are errors when ``strict``; a shape mismatch always is.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict into {type(self).__name__}: expected a mapping of "
                            f"parameter names to arrays, got {type(state_dict).__name__}")
        own = dict(self.named_parameters())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        problems = []
        arrays = {}
        for key, param in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            array = np.asarray(value.data if isinstance(value, Tensor) else value)
            if array.dtype.kind not in "fiub":
                problems.append(f"{key}: expected numbers, got dtype {array.dtype}")
            elif array.shape != param.shape:
                problems.append(
                    f"{key}: shape {array.shape} in the state dict, {param.shape} in the model"
                )
            else:
                arrays[key] = array
        if strict and missing:
            problems.append("missing keys: " + ", ".join(missing))
        if strict and unexpected:
            problems.append("unexpected keys: " + ", ".join(unexpected))
        if problems:
            raise ValueError(
                f"load_state_dict into {type(self).__name__} failed (nothing was changed):\n  "
                + "\n  ".join(problems)
            )
        for key, array in arrays.items():
            own[key].data = array.astype(own[key].dtype, copy=True)
        return IncompatibleKeys(missing, unexpected)

    def save(self, path: str | os.PathLike) -> None:
        """Write the state dict to ``path`` as ``.npz``, atomically (temp file, then rename).

        An interrupted save never leaves a half-written file in place of a good checkpoint.
        """
        save_arrays(path, self.state_dict())

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(child).replace("\n", "\n  ") for name, child in
                 self.named_children()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def save_arrays(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write named arrays to an ``.npz`` file atomically: a temp file beside it, then rename."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=directory)
    try:
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **arrays)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)  # mkstemp creates files readable by the owner only
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def load(path: str | os.PathLike) -> OrderedDict[str, np.ndarray]:
    """Read a checkpoint written by ``Module.save`` as a dict of arrays, never unpickling.

    Examples
    --------
    >>> import tinyattn as ta, tempfile, os
    >>> layer = ta.nn.Linear(2, 3)
    >>> path = os.path.join(tempfile.mkdtemp(), "linear.npz")
    >>> layer.save(path)
    >>> sorted(ta.nn.load(path))
    ['bias', 'weight']
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load: no checkpoint file at {path!r}")
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise ValueError("it holds a single .npy array, not an .npz archive of named arrays")
        with archive:
            return OrderedDict((key, archive[key]) for key in archive.files)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, KeyError) as err:
        raise ValueError(
            f"load: {path!r} is not a readable tinyattn checkpoint (.npz of numeric arrays): {err}"
        ) from None
