"""The error classes of tinyattn: Python's own exceptions, and PyTorch's ``RuntimeError`` too.

PyTorch raises ``RuntimeError`` for a shape or dtype that does not fit, Python code expects
``ValueError`` / ``TypeError``: tinyattn's errors are both, so either ``except`` catches them.
"""

from __future__ import annotations

import os
import sys


class ShapeError(ValueError, RuntimeError):
    """A shape, size or count that does not fit: Python's ``ValueError``, and also the
    ``RuntimeError`` PyTorch raises for it (so either ``except`` catches it)."""


class DTypeError(TypeError, RuntimeError):
    """A dtype that does not fit: Python's ``TypeError``, and also PyTorch's ``RuntimeError``."""


def caller_location() -> str:
    """`` (file.py:27)``: the line of the user's code that led here (the first frame outside
    tinyattn), for errors about a missing name; ``''`` when there is none."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(package + os.sep) and not filename.startswith("<frozen"):
            return f" ({os.path.basename(filename)}:{frame.f_lineno})"
        frame = frame.f_back
    return ""
