"""Named hook points and an activation-and-gradient cache, in the manner of TransformerLens.

A :class:`HookPoint` is an identity layer placed on an intermediate value (``hook_q``,
``hook_pattern``, ``hook_resid_mid`` …); its dotted name in the model
(``blocks.0.attn.hook_pattern``) is the name a learner types. With no hook set it returns its
input untouched and costs one method call. :class:`HookedModule` gives a model

- ``run_with_cache(*args, names_filter=None, **kwargs)``: ``(output, cache)`` where
  ``cache[name]`` is the value at every hook point; when the call returns a loss
  (``targets=`` given to a language model), ``cache.grad(name)`` is the gradient of the loss at
  each of them — computed by one backward pass that leaves the parameters' ``.grad`` untouched;
- ``run_with_hooks(*args, fwd_hooks=[(name, fn)])``: run with ``fn(value, hook)`` applied at
  the named points (a returned tensor replaces the value: zero a head, patch an activation);
- ``hooks(fwd_hooks)``: the same hooks for the extent of a ``with`` block;
- ``hook_points()``: every hook point by name, in model order.

The attention layers take the fused path unless a hook is set on one of their attention
intermediates (``hook_attn_scores``, ``hook_pattern``), which only the composed path computes;
their ``attention_path`` then says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..autograd import grad as autograd_grad
from ..tables import array_norm, format_float, html_table, shape_text, text_table
from ..tensor import Tensor
from .module import Module

HookFn = Callable[[Tensor, "HookPoint"], Tensor | None]
NamesFilter = str | Sequence[str] | Callable[[str], bool] | None


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
                if not isinstance(replaced, Tensor) or replaced.shape != x.shape:
                    raise ValueError(
                        f"HookPoint {self.name!r}: a hook must return None or a Tensor of the "
                        f"value's shape {x.shape}, got "
                        f"{getattr(replaced, 'shape', type(replaced).__name__)}")
                x = replaced
        return x

    @property
    def active(self) -> bool:
        """Whether any hook is set here."""
        return bool(self.fwd_hooks)

    def extra_repr(self) -> str:
        return f"{self.name!r}" if self.name else ""


class ActivationCache(dict):
    """``name -> value`` at every hook point of one run, plus ``grad(name)`` when the run
    computed a loss.

    ``print(cache)`` lists every hook point with its shape (and its gradient's norm); Jupyter
    shows the same as an HTML table.
    """

    def __init__(self) -> None:
        super().__init__()
        self._grads: dict[str, Tensor] = {}

    def __getitem__(self, name: str) -> Tensor:
        if name not in self:
            raise KeyError(f"ActivationCache: no hook point named {name!r} was cached; the "
                           f"names are {list(self)}")
        return super().__getitem__(name)

    def grad(self, name: str) -> Tensor:
        """The gradient of the loss at hook point ``name`` (needs a run that returned a loss)."""
        self[name]  # a clear error for an unknown name
        if name not in self._grads:
            raise KeyError(f"ActivationCache: no gradient at {name!r}: run_with_cache computes "
                           "gradients only when the call returns a loss (pass targets=), and "
                           "only where the value depends on something that requires grad")
        return self._grads[name]

    @property
    def has_grads(self) -> bool:
        """Whether the run computed gradients."""
        return bool(self._grads)

    def _rows(self) -> list[tuple[str, ...]]:
        return [(name, shape_text(value.shape), format_float(array_norm(self._grads[name].numpy()))
                 if name in self._grads else "-") for name, value in self.items()]

    def __str__(self) -> str:
        return text_table(("hook point", "shape", "|grad|"), self._rows())

    def __repr__(self) -> str:
        grads = ", with gradients" if self._grads else ""
        return f"<ActivationCache of {len(self)} hook points{grads}>"

    def _repr_html_(self) -> str:
        return html_table(("hook point", "shape", "|grad|"), self._rows(), repr(self))


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

    def _resolve(self, names: NamesFilter) -> list[HookPoint]:
        points = self.hook_points()
        if callable(names):
            selected = [p for n, p in points.items() if names(n)]
            if not selected:
                raise KeyError(f"{type(self).__name__}: the filter selects no hook point; the "
                               f"names are {list(points)}")
            return selected
        names = [names] if isinstance(names, str) else list(names)
        missing = [n for n in names if n not in points]
        if missing:
            raise KeyError(f"{type(self).__name__}: no hook point named {missing}; the names "
                           f"are {list(points)}")
        return [points[n] for n in names]

    @contextmanager
    def hooks(self, fwd_hooks: Sequence[tuple[Any, HookFn]]) -> Iterator[None]:
        """Set ``(name or filter, fn)`` hooks for the extent of a ``with`` block.

        ``fn(value, hook)`` sees the value at the hook point and may return a replacement of
        the same shape.
        """
        added: list[tuple[HookPoint, HookFn]] = []
        try:
            for names, fn in fwd_hooks:
                if not callable(fn):
                    raise TypeError(f"{type(self).__name__}: the hook for {names!r} must be "
                                    f"callable as fn(value, hook), got {type(fn).__name__}")
                for point in self._resolve(names):
                    point.fwd_hooks.append(fn)
                    added.append((point, fn))
            yield
        finally:
            for point, fn in added:
                point.fwd_hooks.remove(fn)

    def run_with_hooks(self, *args: Any, fwd_hooks: Sequence[tuple[Any, HookFn]] = (),
                       **kwargs: Any) -> Any:
        """Call the model with ``fwd_hooks`` set for this one call.

        Examples
        --------
        >>> import tinyattn as ta
        >>> model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 8, 16, 2, 1))
        >>> zero_head_1 = lambda z, hook: z * ta.tensor([1.0, 0.0])[:, None, None]
        >>> logits = model.run_with_hooks(ta.tensor([[1, 2, 3]]),
        ...                               fwd_hooks=[("blocks.0.attn.hook_z", zero_head_1)])
        >>> logits.shape
        (1, 3, 11)
        """
        with self.hooks(fwd_hooks):
            return self(*args, **kwargs)

    def run_with_cache(self, *args: Any, names_filter: NamesFilter = None,
                       **kwargs: Any) -> tuple[Any, ActivationCache]:
        """``(output, cache)``: the value at every hook point (or those ``names_filter``
        selects: a name, a list, or a predicate on names).

        When the call returns ``(output, loss)`` with a scalar loss that requires grad (a
        language model given ``targets=``), one backward pass computes the loss's gradient at
        each cached hook point: ``cache.grad(name)``. It does not touch the parameters'
        ``.grad`` and frees the graph.

        Examples
        --------
        >>> import tinyattn as ta
        >>> model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 8, 16, 2, 1))
        >>> idx = ta.tensor([[1, 2, 3]])
        >>> (logits, loss), cache = model.run_with_cache(idx, targets=idx)
        >>> cache["blocks.0.attn.hook_pattern"].shape, cache.grad("hook_embed").shape
        ((1, 2, 3, 3), (1, 3, 16))
        """
        cache = ActivationCache()
        selected = self._resolve(names_filter) if names_filter is not None else \
            list(self.hook_points().values())

        def keep(x: Tensor, point: HookPoint) -> None:
            cache[point.name] = x

        with self.hooks([(p.name, keep) for p in selected]):
            output = self(*args, **kwargs)
        loss = output[1] if isinstance(output, tuple) and len(output) == 2 else None
        if isinstance(loss, Tensor) and loss.ndim == 0 and loss.requires_grad:
            names = [name for name, value in cache.items() if value.requires_grad]
            grads = autograd_grad(loss, [cache[name] for name in names], allow_unused=True)
            cache._grads = {name: g for name, g in zip(names, grads) if g is not None}
        return output, cache
