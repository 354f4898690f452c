"""Named hook points and an activation-and-gradient cache, in the manner of TransformerLens.

A :class:`HookPoint` is an identity layer placed on an intermediate value (``hook_q``,
``hook_pattern``, ``hook_resid_mid`` …); its dotted name in the model
(``blocks.0.attn.hook_pattern``) is the name a learner types. With no hook set it returns its
input untouched. :class:`HookedModule` gives a model

- ``run_with_cache(*args, targets=None)``: ``(output, cache)`` where ``cache[name]`` is the
  value at every hook point, and — with ``targets`` — ``cache.grad(name)`` the gradient of the
  loss there (the loss's backward runs);
- ``run_with_hooks(*args, fwd_hooks=[(name, fn)])``: run with ``fn(value, hook)`` applied at
  the named points (a returned tensor replaces the value: zero a head, patch an activation);
- ``hook_points()``: every name, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..tensor import Tensor
from .module import Module

HookFn = Callable[[Tensor, "HookPoint"], Tensor | None]


class HookPoint(Module):
    """An identity layer that runs the hooks set on it; ``name`` is its dotted name."""

    def __init__(self) -> None:
        super().__init__()
        self.name = ""
        self.fwd_hooks: list[HookFn] = []

    def forward(self, x: Tensor) -> Tensor:
        for hook in self.fwd_hooks:
            replaced = hook(x, self)
            if replaced is not None:
                x = replaced
        return x

    @property
    def active(self) -> bool:
        """Whether any hook is set here."""
        return bool(self.fwd_hooks)


class ActivationCache(dict):
    """``name -> value`` at every hook point of one run, plus ``grad(name)`` after a backward."""

    def __init__(self) -> None:
        super().__init__()
        self._grads: dict[str, Tensor] = {}

    def grad(self, name: str) -> Tensor:
        """The gradient of the loss at hook point ``name`` (needs ``targets=``)."""
        if name not in self:
            raise KeyError(f"ActivationCache: no hook point named {name!r}; the names are "
                           f"{sorted(self)}")
        if name not in self._grads:
            raise KeyError(f"ActivationCache: no gradient at {name!r}: run_with_cache needs "
                           "targets= for the loss's backward (and the value must depend on "
                           "the parameters or inputs that require grad)")
        return self._grads[name]


class HookedModule(Module):
    """A module whose :class:`HookPoint` children can be read and patched by name."""

    def hook_points(self) -> dict[str, HookPoint]:
        """Every hook point by its dotted name, in model order."""
        points = {}
        for name, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = name
                points[name] = module
        return points

    def _resolve(self, names: Sequence[str] | str | Callable[[str], bool]) -> list[HookPoint]:
        points = self.hook_points()
        if callable(names):
            return [p for n, p in points.items() if names(n)]
        names = [names] if isinstance(names, str) else list(names)
        missing = [n for n in names if n not in points]
        if missing:
            raise KeyError(f"{type(self).__name__}: no hook point named {missing}; the names "
                           f"are {list(points)}")
        return [points[n] for n in names]

    @contextmanager
    def hooks(self, fwd_hooks: Sequence[tuple[Any, HookFn]]) -> Iterator[None]:
        """Set ``(name or filter, fn)`` hooks for the extent of a ``with`` block."""
        added: list[tuple[HookPoint, HookFn]] = []
        try:
            for names, fn in fwd_hooks:
                for point in self._resolve(names):
                    point.fwd_hooks.append(fn)
                    added.append((point, fn))
            yield
        finally:
            for point, fn in added:
                point.fwd_hooks.remove(fn)

    def run_with_hooks(self, *args: Any, fwd_hooks: Sequence[tuple[Any, HookFn]] = (),
                       **kwargs: Any) -> Any:
        """Call the model with ``fwd_hooks`` set for this one call."""
        with self.hooks(fwd_hooks):
            return self(*args, **kwargs)

    def run_with_cache(self, *args: Any, names_filter: Any = None, **kwargs: Any) -> Any:
        """``(output, cache)``: the value at every hook point (or those ``names_filter``
        selects: a name, a list, or a predicate on names).

        When the call returns a loss (``targets=`` given), the loss's backward runs too and
        ``cache.grad(name)`` holds the gradient at each cached hook point.
        """
        cache = ActivationCache()
        selected = self._resolve(names_filter) if names_filter is not None else \
            list(self.hook_points().values())

        def keep(x: Tensor, point: HookPoint) -> None:
            cache[point.name] = x
            if x.requires_grad:
                x.register_hook(lambda g, name=point.name: cache._grads.__setitem__(name, g))

        with self.hooks([(p.name, keep) for p in selected]):
            output = self(*args, **kwargs)
        loss = output[1] if isinstance(output, tuple) and len(output) == 2 else None
        if kwargs.get("targets") is not None and loss is not None:
            loss.backward()
        return output, cache
