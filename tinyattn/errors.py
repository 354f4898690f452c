"""The error classes of tinyattn: Python's own exceptions, and PyTorch's ``RuntimeError`` too.

PyTorch raises ``RuntimeError`` for a shape or dtype that does not fit, Python code expects
``ValueError`` / ``TypeError``: tinyattn's errors are both, so either ``except`` catches them.
"""

from __future__ import annotations


class ShapeError(ValueError, RuntimeError):
    """A shape, size or count that does not fit: Python's ``ValueError``, and also the
    ``RuntimeError`` PyTorch raises for it (so either ``except`` catches it)."""


class DTypeError(TypeError, RuntimeError):
    """A dtype that does not fit: Python's ``TypeError``, and also PyTorch's ``RuntimeError``."""
