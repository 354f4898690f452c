"""``Function`` and its ``ctx``: how one op is run and recorded for the backward pass.

An op is a :class:`Function` subclass with its two rules side by side, exactly as a PyTorch
custom ``torch.autograd.Function``::

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):                 # Tensors in, Tensors out
            y = from_numpy(np.exp(x.numpy()))
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):             # one gradient per output, one per input back
            (y,) = ctx.saved_tensors
            return grad * y                  # written in tensor ops

``Function.apply(*args)`` runs ``forward`` with grad mode off and, when grad mode is on and a
tensor argument requires grad, records the context as the ``grad_fn`` of every differentiable
output, with an edge from each input to where its gradient goes next (the ``grad_fn`` it had,
or the leaf itself).

The backward rule is written in tinyattn's tensor ops, so it is differentiable by
construction: an ordinary ``loss.backward()`` runs it with grad mode off (nothing is recorded),
and ``backward(create_graph=True)`` runs the same code with grad mode on, so that the gradient
is itself a graph that can be differentiated again. An op whose forward is a numba kernel may
call a kernel for its first-order backward: a *named fast path* inside that one rule, taken
only when no graph is being built (``not is_grad_enabled()``).

A rule may return a gradient of the output's broadcast shape: the engine sums it back to the
input's shape (:func:`tinyattn.autograd.engine.unbroadcast`).

A graph holds what the backward needs and no more, as in PyTorch: a tensor an op saved for its
backward is kept; an op's *output* saved by that op is kept as its array only (the tensor is
rebuilt, with this op as its ``grad_fn``, when ``saved_tensors`` is read), so that no reference
cycle keeps a graph alive. The study tools (:mod:`tinyattn.inspect`) re-run an op from its
inputs, so a context keeps its inputs too, except that a linear op (add, reshape, dropout ...;
``keeps_inputs = False``), whose backward does not read its inputs, keeps of an intermediate
input only its shape, dtype and ``grad_fn`` (a :class:`ReleasedInput`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from .grad_mode import _set_grad_enabled, _state, is_grad_enabled

TENSOR: Any = None
"""The Tensor class; :mod:`tinyattn.tensor` sets it when it is defined (this module sits below
it and never imports it)."""


class Context:
    """One recorded op: what its backward needs, and where each gradient goes next.

    This is both PyTorch's ``ctx`` (what ``forward`` and ``backward`` receive) and the
    ``grad_fn`` of the op's outputs.

    Attributes
    ----------
    fn : type[Function]
        The op.
    inputs : tuple
        The positional arguments of ``forward``, in order (None once the graph has been freed);
        an intermediate tensor input of a linear op is a :class:`ReleasedInput`.
    kwargs : dict
        The keyword arguments of ``forward`` (``dim``, ``seed`` ...): with ``inputs`` they
        determine the forward, so a study tool can run the op again.
    needs_input_grad : tuple of bool
        For each argument, whether its gradient is wanted.
    edges : tuple
        For each argument, where its gradient goes: its ``grad_fn`` at the time of the op, the
        tensor itself when it is a leaf that requires grad, or None.
    input_slots : tuple of int
        For each argument with a ``grad_fn`` edge, which output of that op it was.
    out_shapes, out_dtypes : tuple
        Shape and dtype of each output.
    sequence_nr : int
        When the op was recorded, counting up (PyTorch's ``_sequence_nr()``): an op's inputs
        were made before it, so the backward runs the ops from the highest number down.
    """

    # Defaults, set on the instance only when an op needs them (a context is made per op call).
    edges: tuple = ()
    input_slots: tuple[int, ...] = ()
    out_shapes: tuple[tuple[int, ...], ...] = ()
    out_dtypes: tuple[np.dtype, ...] = ()
    hooks: dict[int, list[Callable]] | None = None
    """Gradient hooks per output index (``register_hook`` on a non-leaf output)."""
    retained: dict[int, Any] | None = None
    """Outputs whose gradient is kept in their ``.grad`` (``retain_grad``), per index."""
    freed = False
    materialize_grads = True
    _saved: tuple = ()
    _saved_versions: tuple = ()
    _dirty: tuple = ()
    _non_differentiable: tuple = ()

    def __init__(self, fn: type[Function], args: tuple, needs_input_grad: tuple[bool, ...],
                 kwargs: dict):
        self.fn = fn
        self.inputs: tuple | None = args
        self.kwargs = kwargs
        self.needs_input_grad = needs_input_grad
        self.sequence_nr = next(_sequence)

    @property
    def name(self) -> str:
        """The op's name (its Function's class name)."""
        return self.fn.__name__

    def add_hook(self, index: int, hook: Callable) -> list[Callable]:
        """Call ``hook(grad)`` on the gradient of output ``index``; returns that output's list
        of hooks."""
        if self.hooks is None:
            self.hooks = {}
        hooks = self.hooks.setdefault(index, [])
        hooks.append(hook)
        return hooks

    def retain(self, index: int, tensor: Any) -> None:
        """Keep the gradient of output ``index`` in ``tensor.grad``."""
        if self.retained is None:
            self.retained = {}
        self.retained[index] = tensor

    # ---- what forward may call (PyTorch's ctx methods) ----------------------------------------
    def save_for_backward(self, *tensors: Any) -> None:
        """Keep tensors (or None) for the backward rule; read them back with ``saved_tensors``.

        A saved tensor that is changed in place before the backward runs is an error when it is
        read back (its version counter moved), as in PyTorch.
        """
        self._saved = tensors  # checked when the op is recorded (_record_saved)

    def mark_dirty(self, *tensors: Any) -> None:
        """Say which inputs ``forward`` modified in place (and returns as outputs)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors: Any) -> None:
        """Say which outputs have no gradient (indices, masks): they never require grad, and
        their gradient reaches ``backward`` as zeros (or None, see ``set_materialize_grads``)."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Whether an output that received no gradient gets zeros (True, the default) or None
        in ``backward``."""
        self.materialize_grads = bool(value)

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors ``save_for_backward`` kept, checked to be unchanged since."""
        if self.freed:
            raise RuntimeError(_FREED.format(name=self.name))
        for counter, version in self._saved_versions:
            if counter.value != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: a tensor saved by '{self.name}' is at version "
                    f"{counter.value}; expected version {version}. Compute the in-place change "
                    "out of place (e.g. x = x.masked_fill(...)), or clone the tensor first."
                )
        saved = self._saved
        for s in saved:
            if type(s) is _SavedOutput:
                return tuple([s.unpack(self) if type(s) is _SavedOutput else s for s in saved])
        return saved

    # ---- what the engine and the study tools use ---------------------------------------------
    @property
    def out_shape(self) -> tuple[int, ...]:
        """The shape of the (first) output."""
        return self.out_shapes[0]

    @property
    def out_dtype(self) -> np.dtype:
        """The dtype of the (first) output."""
        return self.out_dtypes[0]

    def kept_for_backward(self) -> list[tuple[str, Any]]:
        """What the graph keeps for this op's backward, labelled: each saved tensor's array
        (``saved[i]``) and every value ``forward`` set on ctx (``ctx.lse``), for the memory
        ledger."""
        kept = [(f"saved[{i}]", s.array if type(s) is _SavedOutput else s._data)
                for i, s in enumerate(self._saved) if s is not None]
        kept += [(f"ctx.{name}", value) for name, value in vars(self).items()
                 if name not in _CONTEXT_ATTRIBUTES]
        return kept

    def retarget_saved_output(self, output: Any, target: Any) -> None:
        """``output`` (which this op saved) was written into ``target`` in place: check
        ``target``'s version from now on."""
        for s in self._saved:
            if type(s) is _SavedOutput and s.version is output._version:
                s.version = target._version
        self._saved_versions = tuple(
            (target._version, target._version.value) if counter is output._version else
            (counter, version) for counter, version in self._saved_versions)

    def replace_saved(self, tensor: Any, replacement: Any) -> None:
        """Save ``replacement`` wherever ``tensor`` was saved (an in-place op is about to
        overwrite ``tensor``)."""
        self._saved = tuple(replacement if s is tensor else s for s in self._saved)
        self._saved_versions = tuple(
            (c, v) for c, v in self._saved_versions if c is not tensor._version) + (
            ((replacement._version, replacement._version.value),)
            if any(s is replacement for s in self._saved) else ())

    def release_inputs(self) -> None:
        """Keep only the shape, dtype and ``grad_fn`` of every intermediate input (those with a
        ``grad_fn``); leaves and constants stay."""
        name = self.fn.__name__
        self.inputs = tuple([ReleasedInput(a, name, slot) if type(edge) is Context else a
                             for slot, (a, edge) in enumerate(zip(self.inputs, self.edges))])

    @property
    def next_functions(self) -> tuple[tuple[Any, int], ...]:
        """``(node, output index)`` per input, as in PyTorch: the input's ``grad_fn`` at the time
        of the op, an :class:`AccumulateGrad` for a leaf that requires grad, or None."""
        return tuple((e, slot) if isinstance(e, Context) else
                     ((AccumulateGrad(e) if e is not None else None), 0)
                     for e, slot in zip(self.edges, self.input_slots))

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


_CONTEXT_ATTRIBUTES = frozenset({
    "fn", "inputs", "kwargs", "needs_input_grad", "edges", "input_slots", "out_shapes",
    "out_dtypes", "sequence_nr", "hooks", "retained", "freed", "materialize_grads", "_saved",
    "_saved_versions", "_dirty", "_non_differentiable"})
"""A context's own attributes (everything else on it was set by the op's forward)."""

_FREED = (
    "backward: trying to backward through the graph a second time (op '{name}'): its saved "
    "values were freed after the first backward. Pass retain_graph=True to the first call "
    "if you need to backward twice."
)


class _SavedOutput:
    """An op's own output, saved by that op: its array, version counter and index, so that the
    tensor can be rebuilt with the op as its ``grad_fn`` without a reference cycle."""

    __slots__ = ("array", "version", "index", "requires_grad")

    def __init__(self, tensor: Any, index: int):
        self.array = tensor._data
        self.version = tensor._version
        self.index = index
        self.requires_grad = tensor._requires_grad

    def unpack(self, ctx: Context) -> Any:
        out = TENSOR._from_op(self.array, ctx if self.requires_grad else None)
        out._version_counter = self.version  # the attribute behind the ``_version`` setter
        out._output_nr = self.index
        return out


class ReleasedInput:
    """What a linear op keeps of an intermediate input: its shape, dtype and ``grad_fn``, not its
    values.

    The backward of a linear op (``keeps_inputs = False``) does not read its inputs, so the
    graph does not keep them alive; reading ``data`` says so.
    """

    __slots__ = ("shape", "dtype", "requires_grad", "grad_fn", "_op", "_slot")

    def __init__(self, tensor: Any, op: str, slot: int):
        data = tensor._data
        self.shape = data.shape
        self.dtype = data.dtype
        self.requires_grad = tensor._requires_grad
        self.grad_fn = tensor.grad_fn
        self._op, self._slot = op, slot  # the message is only built if .data is read

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _unavailable(self) -> Any:
        raise RuntimeError(
            f"the value of input {self._slot} of '{self._op}' was not kept: the op is linear, "
            "its backward does not read it, so the graph lets it be freed (keep a reference to "
            "the tensor itself, or register a hook, to look at it)"
        )

    data = property(_unavailable)
    numpy = _unavailable

    def __repr__(self) -> str:
        return f"ReleasedInput(shape={self.shape}, dtype={self.dtype})"


class AccumulateGrad:
    """Where a leaf's gradient ends up (PyTorch's name): ``variable`` is the leaf tensor."""

    name = "AccumulateGrad"

    def __init__(self, variable: Any):
        self.variable = variable

    @property
    def next_functions(self) -> tuple:
        return ()

    def __repr__(self) -> str:
        return "<AccumulateGrad>"


class Function:
    """Base class of every differentiable op and of a learner's custom op: subclasses define
    ``forward(ctx, *args)`` and ``backward(ctx, *grads)`` as static methods, on tensors.

    Class attributes an op may set:

    ``view = True``
        The output may share memory with the first input (reshape, permute, slicing): it then
        shares the input's version counter, so an in-place change through either is seen by
        the ops that saved the other.
    ``keeps_inputs = False``
        A linear op, whose backward does not read its inputs' values: its context keeps only
        the shape and dtype of an intermediate input (:class:`ReleasedInput`).
    ``formula``
        How :func:`tinyattn.inspect.explain` writes the rule: a function
        ``formula(node, slot, g, x, out) -> str`` giving the gradient sent to input ``slot``
        from the names of the output's gradient ``g``, of the inputs ``x`` and of the output.
    ``named_gradient = True``
        ``explain`` gives the gradient this op sends back a name of its own (``dS``) instead
        of composing the op's formula into a longer one (softmax, layer norm, attention ...).
    """

    view = False
    keeps_inputs = True
    formula: Callable[..., str] | None = None
    named_gradient = False

    @staticmethod
    def forward(ctx: Context, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define forward(ctx, *args)")

    @staticmethod
    def backward(ctx: Context, *grads: Any) -> Any:
        raise NotImplementedError("a Function subclass must define backward(ctx, *grads) to "
                                  "be differentiated")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run the op and record it when grad mode is on and a tensor argument requires grad."""
        tensor = TENSOR
        ctx = _new_context(Context)  # Context(...) without the call of __init__: made per op
        ctx.fn, ctx.inputs, ctx.kwargs = cls, args, kwargs
        if not _state.grad_enabled:
            ctx.needs_input_grad = (False,) * len(args)
            outputs = cls.forward(ctx, *args, **kwargs)
            if cls.view:
                _share_versions(outputs, args[0])
            if ctx._dirty:
                _apply_dirty(ctx, args, False)
            return outputs
        needs, edges, slots = [], [], []  # per argument: gradient wanted, where it goes next
        for a in args:
            if isinstance(a, tensor):
                requires = a._requires_grad
                needs.append(requires)
                node = a.grad_fn
                if node is not None:
                    edges.append(node)
                    slots.append(a._output_nr)
                    continue
                edges.append(a if requires else None)
            else:
                needs.append(False)
                edges.append(None)
            slots.append(0)
        ctx.needs_input_grad = tuple(needs)
        _state.grad_enabled = False
        try:
            outputs = cls.forward(ctx, *args, **kwargs)
        finally:
            _state.grad_enabled = True
        single = isinstance(outputs, tensor)
        if cls.view:
            _share_versions(outputs, args[0])
        record = True in needs
        if ctx._dirty:
            _apply_dirty(ctx, args, record)
        if not record:
            return outputs
        ctx.edges = tuple(edges)
        ctx.input_slots = tuple(slots)
        ctx.sequence_nr = next(_sequence)
        if single and not ctx._dirty and not ctx._non_differentiable and \
                outputs._data.dtype.kind == "f" and _is_new(outputs, args):
            outputs.grad_fn = ctx  # the common case: one new float output
            outputs._requires_grad = True
            data = outputs._data
            ctx.out_shapes = (data.shape,)
            ctx.out_dtypes = (data.dtype,)
            results = wired = (outputs,)
        else:
            results = (outputs,) if single else tuple(outputs)
            wired = _wire_outputs(ctx, args, results)
        if ctx._saved:
            _record_saved(ctx, results, wired)
        if not cls.keeps_inputs:
            ctx.release_inputs()
        return wired[0] if single else wired


_new_context = object.__new__
_sequence = itertools.count()
"""The sequence numbers of recorded ops (``next`` is atomic under the GIL)."""


def _is_new(output: Any, args: tuple) -> bool:
    """Whether ``output`` is not one of ``args`` (an op may return an input as it is)."""
    for a in args:
        if a is output:
            return False
    return True


def _share_versions(outputs: Any, base: Any) -> None:
    """A view op's output (or each of several, as ``split`` returns) shares ``base``'s version
    counter."""
    if isinstance(outputs, TENSOR):
        _share_version(outputs, base)
    else:
        for out in outputs:
            _share_version(out, base)


def _share_version(view: Any, base: Any) -> None:
    """A view's version counter is its base's (when numpy did return a view of its memory)."""
    held = view._data.base  # numpy's views name the array that owns the memory, mostly
    if held is None:
        return
    array = base._data
    if held is array or held is array.base or memory_owner(held) is memory_owner(array):
        view._version = base._version
        view._base = base._base if base._base is not None else base


def memory_owner(array: np.ndarray) -> Any:
    """The object that owns ``array``'s memory (views lead back to it through ``.base``).

    The chain ends at whatever is not an ndarray: a buffer, or another library's
    tensor whose memory numpy borrowed.
    """
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array


def _wire_outputs(ctx: Context, args: tuple, results: tuple) -> tuple:
    """Make ``ctx`` the ``grad_fn`` of every differentiable output."""
    tensor = TENSOR
    wired = []
    for index, out in enumerate(results):
        if not isinstance(out, tensor):
            wired.append(out)
            continue
        for a in args:
            if out is a and not any(out is d for d in ctx._dirty):
                out = _alias(out)  # an input returned as it is: a new tensor on its memory
                break
        if out._data.dtype.kind == "f" and not (
                ctx._non_differentiable and any(out is n for n in ctx._non_differentiable)):
            out.grad_fn = ctx
            out._requires_grad = True
            if index:
                out._output_nr = index
        wired.append(out)
    if len(wired) == 1:
        ctx.out_shapes = (wired[0]._data.shape,)
        ctx.out_dtypes = (wired[0]._data.dtype,)
    else:
        ctx.out_shapes = tuple([o._data.shape if isinstance(o, tensor) else () for o in wired])
        ctx.out_dtypes = tuple([o._data.dtype if isinstance(o, tensor) else None
                                for o in wired])
    return tuple(wired)


def _record_saved(ctx: Context, results: tuple, wired: tuple) -> None:
    """Keep what ``ctx`` saved with the version of each, an output of its own as its array."""
    tensor = TENSOR
    saved, versions = [], []
    for position, t in enumerate(ctx._saved):
        if t is not None:
            if not isinstance(t, tensor):
                raise TypeError(f"{ctx.name}: save_for_backward can only save tensors or None, "
                                f"got {type(t).__name__} at position {position} (keep other "
                                "values as attributes of ctx, e.g. ctx.dim = dim)")
            for index, out in enumerate(results):
                if t is out and wired[index].grad_fn is ctx:
                    t = _SavedOutput(wired[index], index)
                    counter = t.version
                    break
            else:
                counter = t._version_counter
                if counter is None:
                    counter = t._version
            versions.append((counter, counter.value))
        saved.append(t)
    ctx._saved = tuple(saved)
    ctx._saved_versions = tuple(versions)


def _alias(t: Any) -> Any:
    """A new tensor on ``t``'s memory and version counter."""
    alias = TENSOR._from_op(t._data, None)
    alias._version = t._version
    alias._base = t._base if t._base is not None else t
    return alias


def _apply_dirty(ctx: Context, args: tuple, record: bool) -> None:
    """Inputs that ``forward`` changed in place: refuse where PyTorch does, bump their version."""
    for t in ctx._dirty:
        if not any(t is a for a in args):
            raise ValueError(f"{ctx.name}: mark_dirty got a tensor that is not an input")
        if record and t.grad_fn is None and t._requires_grad:
            raise RuntimeError(f"{ctx.name}: a leaf tensor that requires grad is being used in "
                               "an in-place operation (mark_dirty)")
        t._version.value += 1


def once_differentiable(backward: Callable) -> Callable:
    """Decorate a ``backward`` that is not written in differentiable tensor ops (it uses numpy,
    say): it runs with grad mode off, and differentiating its result again is an error, as in
    PyTorch.

    Examples
    --------
    >>> import tinyattn as ta
    >>> from tinyattn.autograd.function import once_differentiable
    >>> class Square(ta.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     @once_differentiable
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return ta.from_numpy(2 * x.numpy() * grad.numpy())
    >>> x = ta.tensor([3.0], requires_grad=True)
    >>> Square.apply(x).sum().backward()
    >>> x.grad.tolist()
    [6.0]
    """

    @functools.wraps(backward)
    def wrapper(ctx: Context, *grads: Any) -> Any:
        recording = is_grad_enabled()
        _set_grad_enabled(False)
        try:
            result = backward(ctx, *grads)
        finally:
            _set_grad_enabled(recording)
        if not recording:
            return result
        requiring = [g for g in grads if isinstance(g, TENSOR) and g.requires_grad]
        requiring += [s for s in ctx.saved_tensors if s is not None and s.requires_grad]
        if not requiring:
            return result
        single = not isinstance(result, tuple)
        marked = tuple(_OnceDifferentiable.apply(g, ctx.name, *requiring)
                       if isinstance(g, TENSOR) else g for g in ((result,) if single else result))
        return marked[0] if single else marked

    return wrapper


class _OnceDifferentiable(Function):
    """Stands for a gradient computed by a ``once_differentiable`` backward: it passes the
    value on, linked to the tensors that gradient depends on, and its own backward refuses, as
    PyTorch's does."""

    @staticmethod
    def forward(ctx: Context, grad: Any, name: str, *depends_on: Any) -> Any:
        ctx.op_name = name
        return grad.detach()

    @staticmethod
    def backward(ctx: Context, grad: Any) -> Any:
        raise RuntimeError(f"trying to differentiate twice a function that was marked with "
                           f"@once_differentiable (the backward of '{ctx.op_name}')")
