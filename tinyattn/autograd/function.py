"""``Function`` and ``Context``: how one op is run and recorded for the backward pass.

An op is a :class:`Function` subclass with its rules side by side::

    forward(ctx, *arrays, **kwargs) -> array           the value, on numpy arrays
    backward(ctx, grad) -> tuple of arrays             the chain rule, on numpy arrays (fast)
    differentiable_backward(ctx, grad) -> tensors      the same rule written with tinyattn ops

``backward`` returns one gradient per positional input (None for "no gradient"), each of the
output's broadcast shape if it likes: the engine sums it back to the input's shape. It is what
an ordinary ``loss.backward()`` runs. ``differentiable_backward`` states the same rule with
recorded tinyattn ops on tensors (``ctx.inputs`` are the inputs), so that under
``create_graph=True`` the gradient is itself a graph that can be differentiated again.

``Function.apply`` unwraps tensors, runs ``forward`` and, when grad mode is on and an input
requires grad, records the context as the output's ``grad_fn``, together with the edges to the
inputs' own ``grad_fn`` at that moment and the versions of the tensors the op saved (an
in-place change of one of them before the backward is an error, as in PyTorch).

A graph holds what the backward needs and no more, as in PyTorch: an intermediate tensor that
no op saved is freed as soon as the forward pass stops using it. So a linear op (add, reshape,
dropout ...; ``keeps_inputs = False``), whose backward does not read its inputs, keeps of an
intermediate input only its shape, dtype and ``grad_fn`` (a :class:`ReleasedInput`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .grad_mode import is_grad_enabled

if TYPE_CHECKING:
    from ..tensor import Tensor


class Context:
    """One recorded op: what its backward needs, and where the gradient goes next.

    The context of an op is the ``grad_fn`` of the tensor the op produced.

    Attributes
    ----------
    name : str
        The op's name (the Function's class name).
    inputs : tuple of Tensor or ReleasedInput
        The positional tensor inputs, in order (None once the graph has been freed); an
        intermediate input of a linear op is a :class:`ReleasedInput`.
    edges : tuple
        For each input, where its gradient goes: its ``grad_fn`` at the time of the op, the
        input itself when it is a leaf that requires grad, or None.
    saved : tuple
        What ``save_for_backward`` stored.
    needs_input_grad : tuple of bool
        For each input, whether a gradient must be computed for it.
    kwargs : dict
        The op's keyword arguments (``dim``, ``seed`` ...): with ``inputs`` they determine its
        forward, so a study tool can run the op again (``fn.forward(ctx, *arrays, **kwargs)``).
    """

    def __init__(self, fn: type[Function], inputs: tuple[Tensor, ...], record: bool):
        self.fn = fn
        self.name = fn.__name__
        self.inputs: tuple[Tensor, ...] | None = inputs
        self.needs_input_grad = tuple(t.requires_grad for t in inputs) if record else \
            (False,) * len(inputs)
        self.saved: tuple[Any, ...] = ()
        self.out_shape: tuple[int, ...] = ()
        self.out_dtype: np.dtype | None = None
        self.hooks: list[Callable] = []
        self.retained: Tensor | None = None
        self.freed = False

    def save_for_backward(self, *values: Any) -> None:
        """Keep arrays (or other values) for the backward rule.

        Save an input's array itself (not a reshaped copy of it) so that an in-place change of
        that input before the backward is detected.
        """
        self.saved = values

    def release_inputs(self) -> None:
        """Keep only the shape, dtype and ``grad_fn`` of every intermediate input (those with a
        ``grad_fn``); leaves and constants stay."""
        self.inputs = tuple(ReleasedInput(t, self.name, slot) if isinstance(edge, Context) else t
                            for slot, (t, edge) in enumerate(zip(self.inputs, self.edges)))

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """PyTorch's name for :attr:`saved`."""
        return self.saved

    def check_versions(self) -> None:
        """Raise if a tensor this op saved was modified in place after the op ran."""
        for counter, version in self.saved_versions:
            if counter.value != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: a tensor saved by '{self.name}' is at version "
                    f"{counter.value}; expected version {version}. Compute the in-place change "
                    "out of place (e.g. x = x.masked_fill(...)), or clone the tensor first."
                )

    def free(self) -> None:
        """Drop saved values and the links to the inputs (after a backward pass)."""
        self.saved = ()
        self.inputs = None
        self.edges = ()
        self.kwargs = {}
        self.freed = True

    @property
    def next_functions(self) -> tuple[tuple[Any, int], ...]:
        """``(node, 0)`` per input, as in PyTorch: the input's ``grad_fn`` at the time of the op,
        an :class:`AccumulateGrad` for a leaf that requires grad, or None."""
        return tuple((AccumulateGrad(e) if e is not None and not isinstance(e, Context) else e,
                      0) for e in self.edges)

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


class ReleasedInput:
    """What a linear op keeps of an intermediate input: its shape, dtype and ``grad_fn``, not its
    values.

    The backward of a linear op (``keeps_inputs = False``) does not read its inputs, so the
    graph does not keep them alive; reading ``data`` says so.
    """

    __slots__ = ("shape", "dtype", "requires_grad", "grad_fn", "_op", "_slot")

    def __init__(self, tensor: Tensor, op: str, slot: int):
        self.shape = tensor.shape
        self.dtype = tensor.dtype
        self.requires_grad = tensor.requires_grad
        self.grad_fn = tensor.grad_fn
        self._op, self._slot = op, slot  # the message is only built if .data is read

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def data(self) -> np.ndarray:
        raise RuntimeError(
            f"the value of input {self._slot} of '{self._op}' was not kept: the op is linear, "
            "its backward does not read it, so the graph lets it be freed (keep a reference to "
            "the tensor itself, or register a hook, to look at it)"
        )

    def __repr__(self) -> str:
        return f"ReleasedInput(shape={self.shape}, dtype={self.dtype})"


class AccumulateGrad:
    """Where a leaf's gradient ends up (PyTorch's name): ``variable`` is the leaf tensor."""

    name = "AccumulateGrad"

    def __init__(self, variable: Tensor):
        self.variable = variable

    @property
    def next_functions(self) -> tuple:
        return ()

    def __repr__(self) -> str:
        return "<AccumulateGrad>"


class Function:
    """Base class of every differentiable op; subclasses define ``forward`` and ``backward``.

    ``view = True`` marks an op whose output may share memory with its first input (reshape,
    permute, slicing): such an output shares the input's version counter, so an in-place
    change through either is seen by the ops that saved the other.
    """

    view = False
    keeps_inputs = True
    """False for a linear op, whose backward does not read its inputs' values: its context keeps
    only the shape and dtype of an intermediate input (:class:`ReleasedInput`)."""

    @staticmethod
    def forward(ctx: Context, *arrays: np.ndarray, **kwargs: Any) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, grad: np.ndarray) -> tuple[np.ndarray | None, ...]:
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs: Tensor, **kwargs: Any) -> Tensor:
        """Run the op on tensors and record it when any input requires grad."""
        from ..tensor import Tensor

        record = is_grad_enabled() and any(t.requires_grad for t in inputs)
        ctx = Context(cls, inputs, record)
        ctx.kwargs = kwargs
        out = cls.forward(ctx, *(t.data for t in inputs), **kwargs)
        result = Tensor._from_op(out, ctx if record else None)
        if cls.view and np.may_share_memory(result.data, inputs[0].data):
            result._version = inputs[0]._version
            result._base = inputs[0]._base if inputs[0]._base is not None else inputs[0]
        if record:
            ctx.out_shape = result.shape
            ctx.out_dtype = result.dtype
            ctx.edges = tuple(t.grad_fn if t.grad_fn is not None else
                              (t if t.requires_grad else None) for t in inputs)
            ctx.saved_versions = _saved_versions(ctx.saved, inputs, result)
            if not cls.keeps_inputs:
                ctx.release_inputs()
        return result


def _saved_versions(saved: tuple, inputs: tuple, result: Tensor) -> tuple:
    """``(version counter, version)`` of every input or output whose array the op saved."""
    versions = []
    for value in saved:
        if value is result.data:
            versions.append((result._version, result._version.value))
            continue
        for t in inputs:
            if value is t.data:
                versions.append((t._version, t._version.value))
                break
    return tuple(versions)
