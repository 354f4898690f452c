"""``Optimizer``: parameter groups, per-parameter state and state dicts, shaped as in PyTorch.

An optimizer holds ``param_groups``, a list of dicts each with a ``"params"`` list and that
group's options (``lr``, ...), and ``state``, a dict from parameter to that parameter's running
buffers. Subclasses only say how to validate a group's options and how to update one group's
parameters; everything else (group bookkeeping, skipping parameters without a gradient, state
dicts with integer parameter indices) lives here, once.

Updates write into ``p.numpy()`` in place, so arrays a caller holds on to stay valid.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..autograd import enable_grad, no_grad
from ..tensor import Tensor, from_numpy


class Optimizer:
    """Base class of every optimizer; subclasses define ``_check_group`` and ``_update``.

    Parameters
    ----------
    params : iterable of Tensors, or iterable of dicts
        The tensors to optimize, or parameter groups: dicts with a ``"params"`` entry and any
        per-group options, which override ``defaults`` for that group.
    defaults : dict
        The default value of every option.

    Examples
    --------
    >>> import tinyattn as ta
    >>> w, b = ta.nn.Parameter(ta.ones(2)), ta.nn.Parameter(ta.zeros(1))
    >>> opt = ta.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1)
    >>> [group["lr"] for group in opt.param_groups]
    [0.1, 0.5]
    >>> opt.state_dict()["param_groups"][1]["params"]
    [1]
    """

    #: Names of the per-parameter state entries holding arrays shaped like the parameter.
    _state_arrays: tuple[str, ...] = ()
    #: Names of the per-parameter integer counters.
    _state_counters: tuple[str, ...] = ()

    def _state_keys(self, group: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """``(array entries, counter entries)`` of a parameter's state under ``group``'s
        options."""
        return self._state_arrays, self._state_counters

    def __init__(self, params: Iterable[Any], defaults: Mapping[str, Any]) -> None:
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(
                f"{name}: params must be an iterable of Tensors or of dicts, got a single "
                f"Tensor of shape {params.shape} (wrap it in a list)"
            )
        self.defaults = dict(defaults)
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for index, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {index}")
            lines.extend(f"    {key}: {value}" for key, value in group.items() if key != "params")
        return "\n".join(lines) + "\n)"

    # ---- groups -----------------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Append a group: its ``"params"`` plus options, missing ones taken from ``defaults``.

        Raises TypeError for a non-dict, a set of params (no stable order) or a non-float
        tensor; ValueError for a non-leaf tensor, an invalid option or a parameter that is
        already in a group.
        """
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(
                f"{name}: a parameter group must be a dict, got {type(param_group).__name__}"
            )
        if "params" not in param_group:
            raise ValueError(f"{name}: a parameter group needs a 'params' entry, got keys "
                             f"{sorted(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(f"{name}: params must be an ordered collection of Tensors (the "
                            "order fixes the indices of the state dict), got a set")
        params = list(params)
        seen: set[int] = set()
        for index, param in enumerate(params):
            if not isinstance(param, Tensor):
                raise TypeError(f"{name}: can only optimize Tensors, but params[{index}] is "
                                f"a {type(param).__name__}")
            if param.dtype.kind != "f":
                raise TypeError(f"{name}: can only optimize float tensors, but params[{index}] "
                                f"has dtype {param.dtype}")
            if not param.is_leaf:
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor (params[{index}] of "
                                 f"shape {param.shape} was produced by an op; use .detach())")
            if id(param) in seen:
                raise ValueError(f"{name}: params[{index}] of shape {param.shape} appears twice "
                                 "in the same parameter group")
            seen.add(id(param))
        group = {**param_group, "params": params}
        for key, default in self.defaults.items():
            group.setdefault(key, default)
        self._check_group(group)
        taken = {id(p) for existing in self.param_groups for p in existing["params"]}
        if taken & seen:
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def _check_group(self, group: Mapping[str, Any]) -> None:
        """Raise ValueError/TypeError naming any invalid option of ``group``."""

    # ---- updates ----------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient: to None (default) or to zeros in place."""
        for group in self.param_groups:
            for param in group["params"]:
                if set_to_none:
                    param.grad = None
                elif param.grad is not None:
                    param.grad.numpy()[...] = 0

    @no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; return ``closure()`` if one is given.

        The update runs outside the autograd graph and writes into each parameter's array in
        place. ``closure`` re-evaluates the model and returns the loss (it runs with grad
        enabled). Every gradient is checked before any parameter changes.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        work = []
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            grads = [self._grad_array(p) for p in params]
            work.append((group, params, grads))
        for group, params, grads in work:
            if params:
                self._update(group, params, grads)
        return loss

    def _grad_array(self, param: Tensor) -> np.ndarray:
        """The gradient of ``param`` as an array of its dtype, after checking shapes match."""
        name = type(self).__name__
        grad = param.grad.numpy()
        if grad.shape != param.shape:
            raise ValueError(f"{name}.step: a gradient of shape {grad.shape} is attached to a "
                             f"parameter of shape {param.shape}; they must match")
        if not param.numpy().flags.writeable:
            raise ValueError(f"{name}.step: the data of a parameter of shape {param.shape} is "
                             "read-only and cannot be updated in place")
        return grad.astype(param.dtype, copy=False)

    def _update(self, group: dict[str, Any], params: list[Tensor],
                grads: list[np.ndarray]) -> None:
        """Apply one step to ``params`` (all have gradients ``grads``) with ``group``'s options."""
        raise NotImplementedError(f"{type(self).__name__} does not define _update()")

    # ---- state dicts ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {name: value}}, "param_groups": [{..., "params": [index]}]}``.

        Parameters are numbered 0, 1, ... in group order, as in PyTorch. Per-parameter buffers
        are tensors (copies, so the result is a snapshot that later steps do not change) and
        counters such as ``"step"`` Python ints, which ``torch.optim`` optimizers accept too;
        the layout and key names are PyTorch's, so ``ta.save`` writes a file that
        ``torch.optim``'s ``load_state_dict`` takes after ``torch.load``.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {key: value for key, value in group.items() if key != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {}
        for param, param_state in self.state.items():
            if id(param) in index and param_state:
                state[index[id(param)]] = {
                    key: from_numpy(value.copy()) if isinstance(value, np.ndarray) else value
                    for key, value in param_state.items()
                }
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore options and state from :meth:`state_dict` output; nothing changes on error.

        The state dict must have as many groups, each with as many parameters, as this
        optimizer; every state array must match its parameter's shape (it is copied and cast
        to the parameter's dtype). Options missing from a saved group (one saved before the
        option existed) take the optimizer's defaults, as PyTorch does. A state dict written by
        ``torch.optim`` (after ``ta.load``) is accepted: its buffers are tensors, its ``"step"``
        a 0-d float tensor holding a whole number; a group with ``capturable`` or
        ``differentiable`` set is refused (tinyattn has neither).
        """
        name = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, Mapping) or set(state_dict) != {"state", "param_groups"}:
            raise ValueError(f"{name}: expected a mapping with keys 'state' and 'param_groups', "
                             f"got {type(state_dict).__name__}"
                             + (f" with keys {sorted(state_dict)}"
                                if isinstance(state_dict, Mapping) else ""))
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}: the state dict has {len(saved_groups)} parameter groups, "
                             f"the optimizer has {len(self.param_groups)}")
        problems: list[str] = []
        by_index: dict[Any, tuple[Tensor, Mapping[str, Any]]] = {}
        new_groups = []
        for number, (saved, own) in enumerate(zip(saved_groups, self.param_groups)):
            if isinstance(saved, Mapping):
                saved = {**self.defaults, **saved}
                new_groups.append({**{k: v for k, v in saved.items() if k != "params"},
                                   "params": own["params"]})
            problems.extend(self._match_group(number, saved, own, by_index))
        new_state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for index, param_state in dict(state_dict["state"]).items():
            if index not in by_index:
                problems.append(f"state for parameter index {index!r}, which no group lists")
                continue
            param, group = by_index[index]
            restored, state_problems = self._restore_param_state(index, param, group,
                                                                 param_state)
            problems.extend(state_problems)
            new_state[param] = restored
        if problems:
            raise ValueError(f"{name}: the state dict does not match this optimizer (nothing "
                             "was changed):\n  " + "\n  ".join(problems))
        self.state = new_state
        for own, new in zip(self.param_groups, new_groups):
            own.clear()
            own.update(new)

    def _match_group(self, number: int, saved: Any, own: dict[str, Any],
                     by_index: dict[Any, tuple[Tensor, Mapping[str, Any]]]) -> list[str]:
        """Problems with saved group ``number``; record its parameter indices in ``by_index``."""
        if not isinstance(saved, Mapping) or "params" not in saved:
            return [f"group {number}: expected a dict with a 'params' entry, got {saved!r}"]
        problems = []
        for option in ("capturable", "differentiable"):
            if saved.get(option):
                problems.append(f"group {number}: {option}=True is not supported by tinyattn")
        indices = list(saved["params"])
        if len(indices) != len(own["params"]):
            problems.append(f"group {number}: {len(indices)} parameters in the state dict, "
                            f"{len(own['params'])} in the optimizer")
        else:
            for index, param in zip(indices, own["params"]):
                if index in by_index:
                    problems.append(f"group {number}: parameter index {index!r} is listed twice")
                by_index[index] = (param, saved)
        try:
            self._check_group(saved)
        except (TypeError, ValueError) as err:
            problems.append(f"group {number}: {err}")
        return problems

    def _restore_param_state(self, index: Any, param: Tensor, group: Mapping[str, Any],
                             param_state: Any) -> tuple[dict[str, Any], list[str]]:
        """A checked copy of one parameter's saved state, and the problems found in it."""
        where = f"state[{index!r}]"
        if not isinstance(param_state, Mapping):
            return {}, [f"{where}: expected a dict, got {type(param_state).__name__}"]
        if not param_state:
            return {}, []
        arrays, counters = self._state_keys(group)
        expected = set(arrays) | set(counters)
        if set(param_state) != expected:
            return {}, [f"{where}: expected entries {sorted(expected)}, got "
                        f"{sorted(param_state)}"]
        restored: dict[str, Any] = {}
        problems = []
        for key in counters:
            value = _counter(param_state[key])
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                problems.append(f"{where}['{key}']: expected an int >= 0, got {value!r}")
            else:
                restored[key] = int(value)
        for key in arrays:
            value = param_state[key]
            array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
            if array.dtype.kind not in "fiu" or array.shape != param.shape:
                problems.append(f"{where}['{key}']: expected a float array of shape "
                                f"{param.shape}, got {array.dtype} {array.shape}")
            else:
                restored[key] = np.array(array, dtype=param.dtype, order="C", copy=True)
        return restored, problems


def _counter(value: Any) -> Any:
    """A saved counter as an int when it holds a whole number: PyTorch saves ``"step"`` as a
    0-d float tensor; anything else comes back unchanged, for the caller to refuse."""
    if isinstance(value, Tensor) and value.numel() == 1:
        value = value.item()
    elif isinstance(value, np.ndarray) and value.size == 1:
        value = value.item()
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return int(value)
    return value
