"""Layers built only from tinyattn ops: ``Module`` and friends, with PyTorch's names and layouts."""

from .. import functional
from .container import ModuleDict, ModuleList, Sequential
from .module import IncompatibleKeys, Module, Parameter, load

__all__ = [
    "IncompatibleKeys", "Module", "ModuleDict", "ModuleList", "Parameter", "Sequential",
    "functional", "load",
]
