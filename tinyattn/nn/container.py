"""Containers of modules: ``Sequential``, ``ModuleList``, ``ModuleDict``, as in PyTorch.

``Sequential`` and ``ModuleList`` share one base, :class:`IndexedModules`: children named
``"0"``, ``"1"``, ... reached by position (negative indices and slices too), with
``append``/``extend``/``insert``/``pop`` and deletion that renumbers, as PyTorch does.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any

from .module import Module


class IndexedModules(Module):
    """Modules reached by position; the shared base of ``Sequential`` and ``ModuleList``."""

    def _position(self, index: Any, op: str) -> int:
        """``index`` (negative counts from the end) as a position in ``[0, len(self))``."""
        size = len(self._modules)
        if isinstance(index, bool) or not hasattr(index, "__index__"):
            raise TypeError(f"{type(self).__name__}.{op}: indices must be integers or slices, "
                            f"got {type(index).__name__}")
        position = index.__index__()
        if not -size <= position < size:
            raise IndexError(f"{type(self).__name__}.{op}: index {position} is out of range "
                             f"for {size} modules")
        return position % size

    def _check_module(self, op: str, module: Any) -> Module:
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__}.{op}: expected a Module, got "
                            f"{type(module).__name__}")
        return module

    def _renumber(self, modules: Iterable[Module]) -> None:
        """Hold exactly ``modules``, named ``"0"``, ``"1"``, ..."""
        object.__setattr__(self, "_modules", {str(i): m for i, m in enumerate(modules)})

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self._slice(list(self._modules.items())[index])
        return list(self._modules.values())[self._position(index, "__getitem__")]

    def _slice(self, items: list[tuple[str, Module]]) -> IndexedModules:
        """A new container of the same type holding ``items`` (name, module)."""
        raise NotImplementedError

    def __setitem__(self, index: int, module: Module) -> None:
        key = list(self._modules)[self._position(index, "__setitem__")]
        setattr(self, key, self._check_module("__setitem__", module))

    def __delitem__(self, index: int | slice) -> None:
        modules = list(self._modules.values())
        if isinstance(index, slice):
            del modules[index]
        else:
            del modules[self._position(index, "__delitem__")]
        self._renumber(modules)

    def append(self, module: Module) -> IndexedModules:
        """Add ``module`` at the end; return ``self``."""
        self.add_module(str(len(self)), self._check_module("append", module))
        return self

    def extend(self, modules: Iterable[Module]) -> IndexedModules:
        """Append every module of ``modules``; return ``self``."""
        for module in list(modules):
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index`` (children are renumbered)."""
        self._check_module("insert", module)
        modules = list(self._modules.values())
        position = len(modules) if index == len(modules) else self._position(index, "insert")
        modules.insert(position, module)
        self._renumber(modules)

    def pop(self, index: int | slice = -1) -> Any:
        """Remove and return the module at ``index`` (the last by default)."""
        module = self[index]
        del self[index]
        return module

    def __iadd__(self, modules: Iterable[Module]) -> IndexedModules:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> IndexedModules:
        return self._slice([]).extend([*self, *other])


class Sequential(IndexedModules):
    """Modules applied one after another; children are named ``0``, ``1``, ... unless an
    ``OrderedDict`` (or dict) of named modules is given.

    Examples
    --------
    >>> import tinyattn as ta
    >>> net = ta.nn.Sequential(ta.nn.Linear(4, 8), ta.nn.ReLU(), ta.nn.Linear(8, 2))
    >>> net(ta.ones(3, 4)).shape
    (3, 2)
    >>> len(net), type(net[-1]).__name__, len(net[:2])
    (3, 'Linear', 2)
    """

    def __init__(self, *modules: Module | Mapping[str, Module]):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], Mapping):
            for name, module in modules[0].items():
                self.add_module(name, self._check_module("__init__", module))
        else:
            for module in modules:
                self.append(module)

    def _slice(self, items: list[tuple[str, Module]]) -> Sequential:
        return Sequential(dict(items))

    def forward(self, input: Any) -> Any:
        for module in self:
            input = module(input)
        return input


class ModuleList(IndexedModules):
    """A list of modules whose parameters are registered (names ``0``, ``1``, ...).

    Examples
    --------
    >>> import tinyattn as ta
    >>> layers = ta.nn.ModuleList(ta.nn.Linear(2, 2) for _ in range(3))
    >>> _ = layers.append(ta.nn.ReLU())
    >>> len(layers), len(list(layers.parameters()))
    (4, 6)
    """

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _slice(self, items: list[tuple[str, Module]]) -> ModuleList:
        return ModuleList(module for _, module in items)


class ModuleDict(Module):
    """A dict of modules whose parameters are registered under their keys.

    Examples
    --------
    >>> import tinyattn as ta
    >>> heads = ta.nn.ModuleDict({"lm": ta.nn.Linear(4, 10), "value": ta.nn.Linear(4, 1)})
    >>> list(heads), "lm" in heads, heads["value"].out_features
    (['lm', 'value'], True, 1)
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: expected a Module for {key!r}, got "
                            f"{type(module).__name__}")
        self.add_module(key, module)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def keys(self) -> KeysView[str]:
        return self._modules.keys()

    def items(self) -> ItemsView[str, Module]:
        return self._modules.items()

    def values(self) -> ValuesView[Module]:
        return self._modules.values()

    def pop(self, key: str) -> Module:
        """Remove ``key`` and return its module."""
        return self._modules.pop(key)

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add the modules of a mapping, or of an iterable of ``(key, module)`` pairs."""
        pairs = modules.items() if isinstance(modules, (Mapping, ModuleDict)) else modules
        for index, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise TypeError(f"ModuleDict.update: element {index} should be a (key, module) "
                                f"pair, got {type(pair).__name__}")
            self[pair[0]] = pair[1]
