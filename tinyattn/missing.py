"""Errors for the PyTorch names tinyattn does not have, naming the line of code that asked.

``torch.einsum`` on tinyattn raises ``AttributeError: tinyattn has no torch.einsum
(train.py:27): …``: the file and line are those of the first frame outside tinyattn and the
import machinery, given when that frame runs a real file (not ``<string>`` or a doctest).
Inside an import statement (``from torch.nn import Conv1d``) the same message comes as an
``ImportError``, which Python passes on as it is, instead of its "cannot import name".

:func:`namespace_module` makes the small modules that hold PyTorch's flags and stand-ins
(``torch.backends.cudnn``, ``torch.cuda.amp``) importable under their dotted names.
"""

from __future__ import annotations

import dis
import importlib.machinery
import os
import sys
import types
from typing import Any

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_IMPORT_OPCODES = frozenset(dis.opmap[name] for name in ("IMPORT_NAME", "IMPORT_FROM")
                            if name in dis.opmap)


def _is_internal(filename: str) -> bool:
    """Frames of tinyattn itself and of Python's import machinery."""
    return filename.startswith(_PACKAGE) or filename.startswith("<frozen importlib")


def user_frame(depth: int = 1) -> types.FrameType | None:
    """The innermost frame, above the caller's, of code outside tinyattn and importlib."""
    frame: types.FrameType | None = sys._getframe(depth + 1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def location(frame: types.FrameType | None) -> str | None:
    """``'train.py:27'`` (the file's name and the line) for a frame running a real file, else
    None (``<string>``, a doctest, no frame)."""
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    if filename.startswith("<") or not os.path.isfile(filename):
        return None
    return f"{os.path.basename(filename)}:{frame.f_lineno}"


def _importing(frame: types.FrameType | None) -> bool:
    """Whether ``frame`` is executing an import statement."""
    if frame is None:
        return False
    code, index = frame.f_code.co_code, frame.f_lasti
    return 0 <= index < len(code) and code[index] in _IMPORT_OPCODES


def message(qualified: str, explanation: str = "", frame: types.FrameType | None = None) -> str:
    """``tinyattn has no torch.X (file:line): explanation``."""
    where = location(frame)
    text = f"tinyattn has no {qualified}" + (f" ({where})" if where else "")
    return text + (f": {explanation}" if explanation else "")


def missing(qualified: str, explanation: str = "") -> AttributeError | ImportError:
    """The error for the missing PyTorch name ``qualified`` (e.g. ``'torch.nn.Conv1d'``), to be
    raised from a module's ``__getattr__``: an ``ImportError`` when the import statement itself
    asks (``from torch.nn import Conv1d``), else an ``AttributeError`` — also when the import
    machinery asks first, since it then looks for a submodule of that name (``from tinyattn
    import interop`` imports one).

    Examples
    --------
    >>> raise missing("torch.einsum", "see the README")
    Traceback (most recent call last):
    ...
    AttributeError: tinyattn has no torch.einsum: see the README
    """
    frame = user_frame(1)
    text = message(qualified, explanation, frame)
    module, _, name = qualified.rpartition(".")
    asking = sys._getframe(1)  # the module's __getattr__
    submodule = f"{asking.f_globals.get('__name__')}.{name}" in sys.modules
    if _importing(frame) and asking.f_back is frame and not submodule:
        return ImportError(text, name=module)
    return AttributeError(text)


class NamespaceModule(types.ModuleType):
    """A module made in code (see :func:`namespace_module`); a missing name is a clear
    error naming the caller's line."""

    _torch_name = "torch"
    _explanation = ""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise missing(f"{self._torch_name}.{name}", self._explanation)


def namespace_module(name: str, torch_name: str, doc: str, explanation: str = "",
                     **attributes: Any) -> NamespaceModule:
    """A module called ``name`` holding ``attributes``, registered in ``sys.modules`` (so
    ``import torch.backends.cudnn`` finds it); a missing name says ``tinyattn has no
    {torch_name}.X``.

    Examples
    --------
    >>> flags = namespace_module("tinyattn._example", "torch.example", "Flags.", answer=42)
    >>> import tinyattn._example as example
    >>> example.answer, example is flags
    (42, True)
    >>> del sys.modules["tinyattn._example"]
    """
    module = NamespaceModule(name, doc)
    module._torch_name = torch_name
    module._explanation = explanation
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__package__ = name.rpartition(".")[0]
    for key, value in attributes.items():
        setattr(module, key, value)
    sys.modules[name] = module
    return module
