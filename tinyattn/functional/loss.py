"""Losses, as in ``torch.nn.functional``, with PyTorch's arguments: ``cross_entropy``,
``nll_loss``, ``kl_div``, ``mse_loss``, ``l1_loss``, ``smooth_l1_loss``, ``huber_loss``,
``binary_cross_entropy`` and ``binary_cross_entropy_with_logits``.

``cross_entropy`` with integer class targets (and no class weights) runs the fused
:class:`CrossEntropy` op (:mod:`tinyattn.ops.loss`); ``binary_cross_entropy`` runs
:class:`BinaryCrossEntropy` (:mod:`tinyattn.ops.binary_cross_entropy`), whose backward is
bounded where the composed one would overflow. Every other loss is composed of recorded ops
(``log_softmax``, ``gather``, ``where``, ``log``, ``exp`` ...), so its gradient, and its
second derivative, come from those ops' own rules.

The legacy arguments ``size_average`` and ``reduce`` are mapped to ``reduction`` as PyTorch
maps them (with a deprecation warning): ``reduce=False`` gives 'none', else
``size_average=False`` gives 'sum', else 'mean'. When either is given it overrides
``reduction``, as in PyTorch.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..dtypes import result_type
from ..errors import DTypeError, ShapeError
from ..ops import exp, gather, log, log1p, log_softmax, relu, where
from ..ops.binary_cross_entropy import BinaryCrossEntropy
from ..ops.loss import CrossEntropy
from ..tensor import Tensor, check_float, check_kernel_dtype, check_tensor
from ..validation import broadcast_shapes, check_choice, check_int, check_number, is_int

REDUCTIONS = ("mean", "sum", "none")
KL_REDUCTIONS = ("mean", "batchmean", "sum", "none")
LONG_HINT = "int64, PyTorch's Long: use target.long()"


# ---- arguments shared by the losses -------------------------------------------------------------
def legacy_reduction(op: str, reduction: str, size_average: object = None, reduce: object = None,
                     choices: tuple[str, ...] = REDUCTIONS) -> str:
    """The reduction a loss uses: ``reduction`` checked against ``choices``, or, when the
    legacy ``size_average``/``reduce`` are given, PyTorch's mapping of them (with a warning).

    Both legacy arguments default to True: ``reduce=False`` gives 'none' (``size_average`` is
    then unused, as in PyTorch), else ``size_average=False`` gives 'sum', else 'mean'.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     legacy_reduction("mse_loss", "mean", size_average=False)
    'sum'
    """
    if size_average is None and reduce is None:
        return check_choice(op, "reduction", reduction, choices)
    for label, value in (("size_average", size_average), ("reduce", reduce)):
        if value is not None and not isinstance(value, (bool, np.bool_)) and not is_int(value):
            raise TypeError(f"{op}: {label} must be a bool or None, got "
                            f"{type(value).__name__} {value!r}")
    if reduce is not None and not reduce:
        mapped = "none"
    elif size_average is not None and not size_average:
        mapped = "sum"
    else:
        mapped = "mean"
    warnings.warn(f"{op}: size_average and reduce are deprecated, as in PyTorch; "
                  f"size_average={size_average}, reduce={reduce} mean reduction='{mapped}' "
                  f"(they override reduction={reduction!r}): pass reduction='{mapped}' instead",
                  UserWarning, stacklevel=3)
    return mapped


def _reduce(loss: Tensor, reduction: str, denominator: Tensor | float | None = None) -> Tensor:
    """``loss`` itself ('none'), its sum, or its sum divided by ``denominator`` (by default the
    number of elements: nan for an empty loss, as in PyTorch)."""
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    return total / (loss.numel() if denominator is None else denominator)


def _regression_pair(op: str, input: Tensor, target: Tensor,
                     integers: bool = False) -> tuple[Tensor, Tensor]:
    """Check a regression loss's tensors and return them ready to subtract: a bool one beside
    a float one becomes that float dtype (0 and 1), as PyTorch's loss kernels take it.

    Different shapes broadcast, with PyTorch's warning, and both tensors are expanded to the
    broadcast shape first (as PyTorch's ``broadcast_tensors`` there): a 0-d one then counts as
    dimensioned in the dtype promotion (a 0-d float64 input against a float32 target of shape
    ``(1, 1)`` gives a float64 loss). ``integers``: two integer tensors are
    accepted too (``l1_loss``, which PyTorch computes as ``(input - target).abs()``; it refuses
    bool there, as its subtraction does)."""
    check_tensor(op, "input", input)
    check_tensor(op, "target", target)
    kinds = input.dtype.kind + target.dtype.kind
    if integers:
        if "b" in kinds:
            raise DTypeError(f"{op}: a bool tensor cannot be subtracted (dtypes {input.dtype} "
                             f"and {target.dtype}); convert it with .float(), as PyTorch "
                             "requires too")
    elif "f" not in kinds:
        raise DTypeError(f"{op}: input or target must be a floating point tensor, got dtypes "
                         f"{input.dtype} and {target.dtype}")
    if kinds == "fb":
        target = target.to(input.dtype)
    elif kinds == "bf":
        input = input.to(target.dtype)
    if input.shape != target.shape:
        shape = broadcast_shapes(op, input.shape, target.shape)
        warnings.warn(f"{op}: target of shape {target.shape} and input of shape {input.shape} "
                      f"differ; they are broadcast to {shape} (as PyTorch does, with the same "
                      "warning), which is rarely what was meant: give them the same shape",
                      UserWarning, stacklevel=3)
        input, target = input.expand(shape), target.expand(shape)
    return input, target


def _elementwise_weight(op: str, weight: Tensor | None, input: Tensor) -> Tensor | None:
    """The ``weight`` of ``mse_loss``/``l1_loss``/``huber_loss``: the input's shape exactly (the
    input as given, before any broadcast against the target, as PyTorch checks it)."""
    if weight is None:
        return None
    check_tensor(op, "input", input)
    check_tensor(op, "weight", weight)
    if weight.shape != input.shape:
        raise ShapeError(f"{op}: weight must have the input's shape {input.shape}, got "
                         f"{weight.shape}")
    return weight


def _broadcast_weight(op: str, label: str, weight: Tensor | None, shape: tuple[int, ...],
                      of: str, dtype: np.dtype) -> Tensor | None:
    """A weight that must broadcast to ``shape`` (the input's or target's), cast to ``dtype``
    (PyTorch's BCE losses keep the input's dtype)."""
    if weight is None:
        return None
    check_tensor(op, label, weight)
    try:
        fits = np.broadcast_shapes(shape, weight.shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"{op}: {label} of shape {weight.shape} must broadcast to the {of}'s "
                         f"shape {shape}")
    if weight.dtype.kind not in "iuf":
        raise DTypeError(f"{op}: {label} must be a float or integer tensor, got dtype "
                         f"{weight.dtype}")
    return weight if weight.dtype == dtype else weight.to(dtype)


def _same_shape(op: str, input: Tensor, target: Tensor) -> None:
    if target.shape != input.shape:
        raise ShapeError(f"{op}: target must have the input's shape {input.shape}, got "
                         f"{target.shape} (PyTorch refuses to broadcast them too)")


# ---- class-index targets: nll_loss and cross_entropy --------------------------------------------
def _class_dim(op: str, input: Tensor) -> int:
    check_float(op, "input", input)
    if input.ndim == 0 or input.shape[0 if input.ndim == 1 else 1] == 0:
        raise ShapeError(f"{op}: input must have shape (N, C), (C,) or (N, C, d1, ...) with "
                         f"C >= 1, got {input.shape}")
    return 0 if input.ndim == 1 else 1


def _index_shape(input: Tensor) -> tuple[int, ...]:
    """The shape of class-index targets for ``input``: (N,), () or (N, d1, ...)."""
    return () if input.ndim == 1 else (input.shape[0],) + input.shape[2:]


def _classes_last_hint(op: str, input: Tensor, target: object, shape: tuple[int, ...]) -> str:
    """How to fix logits with the classes in the last dim, ``(B, T, C)`` with targets
    ``(B, T)``: the commonest layout mistake. Empty when the shapes do not say so."""
    if input.ndim < 3 or tuple(shape) != input.shape[:-1]:
        return ""
    n_classes = input.shape[-1]
    flat_input = "view" if input.is_contiguous() else "reshape"
    contiguous = isinstance(target, Tensor) and target.is_contiguous()
    flat_target = "view" if contiguous else "reshape"
    layout = "(B, T, C)" if input.ndim == 3 else "(N, d1, ..., C)"
    moved = "input.transpose(1, 2)" if input.ndim == 3 else "input.movedim(-1, 1)"
    return (f". The classes must be in dim 1 ((N, C) or (N, C, d1, ...)), but this input "
            f"looks like {layout} with its C = {n_classes} classes last: flatten both, "
            f"{op}(input.{flat_input}(-1, {n_classes}), target.{flat_target}(-1)), or move the "
            f"classes to dim 1, {op}({moved}, target)")


def _class_targets(op: str, target: object, input: Tensor, ignore_index: int) -> np.ndarray:
    """``target`` as int64 class indices of the shape ``input`` implies, checked in range."""
    array = target.numpy() if isinstance(target, Tensor) else np.asarray(target)
    expected = _index_shape(input)
    if array.dtype.kind not in "iu":
        raise DTypeError(f"{op}: target must hold class indices as integers ({LONG_HINT}), "
                         f"got dtype {array.dtype}")
    if array.shape != expected:
        raise ShapeError(f"{op}: input of shape {input.shape} needs a target of shape "
                         f"{expected}, got target of shape {array.shape}"
                         + _classes_last_hint(op, input, target, array.shape))
    n_classes = input.shape[0 if input.ndim == 1 else 1]
    bad = ((array < 0) | (array >= n_classes)) & (array != ignore_index)
    if bad.any():
        raise IndexError(f"{op}: target value {int(array[bad][0])} is out of range for "
                         f"{n_classes} classes (expected 0 <= target < {n_classes} or target "
                         f"== ignore_index {ignore_index})")
    return array.astype(np.int64, copy=False)


def _class_weight(op: str, weight: Tensor | None, input: Tensor, class_dim: int) -> None:
    """Class weights: one per class, of the input's dtype (PyTorch's rules)."""
    if weight is None:
        return
    check_float(op, "weight", weight)
    n_classes = input.shape[class_dim]
    if weight.shape != (n_classes,):
        raise ShapeError(f"{op}: weight must have one entry per class, shape ({n_classes},), "
                         f"got {weight.shape}")
    if weight.dtype != input.dtype:
        raise DTypeError(f"{op}: weight must have the input's dtype {input.dtype}, got "
                         f"{weight.dtype}")


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             size_average: bool | None = None, ignore_index: int = -100,
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities ``input`` at the ``target`` classes.

    ``loss_i = −w[t_i] · input[i, t_i]`` (0 for ignored targets); 'mean' divides the sum by
    ``Σ w[t_i]`` over the kept targets (nan when every target is ignored).

    Parameters
    ----------
    input : Tensor, float, shape (N, C), (C,) or (N, C, d1, ...): log-probabilities
    target : integer class indices of shape (N,), () or (N, d1, ...), each in ``[0, C)`` or
        equal to ``ignore_index``
    weight : Tensor (C,) of the input's dtype, optional class weights. Unlike PyTorch, which
        refuses a weight that requires grad, tinyattn differentiates the loss with respect to it
    size_average, reduce : bool, optional, deprecated: mapped to ``reduction`` as PyTorch does
    ignore_index : int, targets with this value add nothing to the loss or the gradient
    reduction : {'mean', 'sum', 'none'}

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.nll_loss(ta.tensor([[-1.0, -2.0]]), ta.tensor([1])).item()
    2.0
    """
    class_dim = _class_dim("nll_loss", input)
    reduction = legacy_reduction("nll_loss", reduction, size_average, reduce)
    ignore_index = check_int("nll_loss", "ignore_index", ignore_index)
    _class_weight("nll_loss", weight, input, class_dim)
    return _nll(input, target, class_dim, weight, ignore_index, reduction, "nll_loss")


def _nll(input: Tensor, target: object, class_dim: int, weight: Tensor | None,
         ignore_index: int, reduction: str, op: str) -> Tensor:
    classes = _class_targets(op, target, input, ignore_index)
    kept = classes != ignore_index
    safe = np.where(kept, classes, 0)
    picked = gather(input, class_dim, Tensor(np.expand_dims(safe, class_dim)))
    picked = picked.squeeze(class_dim)  # (N, d1, ...) or ()
    weights = Tensor(kept.astype(input.dtype))
    if weight is not None:
        weights = weight[Tensor(safe)] * weights  # indexing is recorded: weight gets a gradient
        denominator = weights.sum()
    else:
        denominator = Tensor(np.asarray(kept.sum(), input.dtype))
    return _reduce(-picked * weights, reduction, denominator)


def cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None,
    size_average: bool | None = None, ignore_index: int = -100, reduce: bool | None = None,
    reduction: str = "mean", label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between ``softmax(input)`` over the class dim and the targets.

    Parameters
    ----------
    input : Tensor, float, shape (N, C), (C,) or (N, C, d1, ...): unnormalised logits, the
        classes in dim 1 (logits of shape (B, T, C) go in as ``input.view(-1, C)`` with
        ``target.view(-1)``)
    target : integer class indices of shape (N,), () or (N, d1, ...), each in ``[0, C)`` or
        equal to ``ignore_index``; or class probabilities of ``input``'s shape (float)
    weight : Tensor (C,), optional class weights (not with ``label_smoothing``)
    size_average, reduce : bool, optional, deprecated: mapped to ``reduction`` as PyTorch does
    ignore_index : int, targets with this value add nothing to the loss or the gradient
    reduction : {'mean', 'sum', 'none'}
        'mean' averages over the non-ignored targets (nan when there are none), 'sum' adds
        them, 'none' returns one loss per target.
    label_smoothing : float in [0, 1], mixes the target with a uniform distribution

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> loss = ta.F.cross_entropy(ta.zeros(2, 4), ta.tensor([1, 3]))
    >>> math.isclose(loss.item(), math.log(4), rel_tol=1e-6)
    True
    """
    class_dim = _class_dim("cross_entropy", input)
    reduction = legacy_reduction("cross_entropy", reduction, size_average, reduce)
    label_smoothing = check_number("cross_entropy", "label_smoothing", label_smoothing, 0.0, 1.0)
    ignore_index = check_int("cross_entropy", "ignore_index", ignore_index)
    target_array = target.numpy() if isinstance(target, Tensor) else np.asarray(target)
    if target_array.dtype.kind == "f":
        if target_array.shape != input.shape:
            raise DTypeError(_float_target_message(input, target, target_array))
        return _soft_cross_entropy(input, target, class_dim, weight, reduction, label_smoothing)
    if target_array.dtype.kind not in "iu":
        raise DTypeError(f"cross_entropy: target must hold class indices (integers) or "
                         f"class probabilities (floats), got dtype {target_array.dtype}")
    if weight is not None:
        if label_smoothing:
            raise NotImplementedError("cross_entropy: class weights with label_smoothing are "
                                      "not supported")
        _class_weight("cross_entropy", weight, input, class_dim)
        return _nll(log_softmax(input, class_dim), target, class_dim, weight, ignore_index,
                    reduction, "cross_entropy")
    classes = _class_targets("cross_entropy", target, input, ignore_index)
    check_kernel_dtype("cross_entropy", input)
    return CrossEntropy.apply(input, target=classes, ignore_index=ignore_index,
                              reduction=reduction, label_smoothing=label_smoothing)


def _float_target_message(input: Tensor, target: object, array: np.ndarray) -> str:
    """A float target whose shape is not the input's: PyTorch reads it as class indices, which
    must be Long. Say which of the two forms it resembles."""
    expected = _index_shape(input)
    if array.shape == expected:
        return (f"cross_entropy: target has the shape {expected} of class indices but dtype "
                f"{array.dtype}: class indices must be integers ({LONG_HINT}); a float target "
                f"is read as class probabilities and must have the input's shape {input.shape}")
    return (f"cross_entropy: a float target holds class probabilities and must have the "
            f"input's shape {input.shape}, got {array.shape}; class indices (shape {expected}) "
            f"must be integers ({LONG_HINT})"
            + _classes_last_hint("cross_entropy", input, target, array.shape))


def _soft_cross_entropy(input: Tensor, target: Tensor, class_dim: int, weight: Tensor | None,
                        reduction: str, label_smoothing: float) -> Tensor:
    """``−Σ_c w_c t_c log softmax(x)_c`` per sample, with ``t = (1 − ε) t + ε / C``."""
    if not isinstance(target, Tensor):
        raise TypeError(f"cross_entropy: class-probability targets must be a Tensor, got "
                        f"{type(target).__name__}")
    n_classes = input.shape[class_dim]
    probs = target.to(input.dtype)
    if label_smoothing:
        probs = probs * (1 - label_smoothing) + label_smoothing / n_classes
    terms = log_softmax(input, class_dim) * probs
    if weight is not None:
        _class_weight("cross_entropy", weight, input, class_dim)
        shape = [1] * input.ndim
        shape[class_dim] = n_classes
        terms = terms * weight.reshape(shape)
    loss = -terms.sum(class_dim)
    return _reduce(loss, reduction)


# ---- distributions ------------------------------------------------------------------------------
def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Kullback–Leibler divergence of ``target`` from the distribution whose log-probabilities
    are ``input``, pointwise.

    ``ℓ = t · (ln t − x)``, 0 where ``t = 0`` (``log_target=False``; a negative target gives
    nan, as ``t ln t`` does); ``ℓ = eᵗ · (t − x)`` when ``target`` holds log-probabilities
    (``log_target=True``). ``input`` and ``target`` broadcast together, as in PyTorch.

    Parameters
    ----------
    input : Tensor, float: log-probabilities (``log_softmax`` of logits)
    target : Tensor, float: probabilities, or log-probabilities with ``log_target=True``
    size_average, reduce : bool, optional, deprecated: mapped to ``reduction`` as PyTorch does
    reduction : {'mean', 'batchmean', 'sum', 'none'}
        'batchmean' divides the sum by ``input.shape[0]`` (the sum itself for a 0-d input): the
        KL divergence per sample of a batch of distributions. 'mean' divides by the number of
        elements (batch × classes), which is not the KL divergence: it warns, as PyTorch does.
    log_target : bool

    Notes
    -----
    With the legacy ``size_average``/``reduce``, ``reduction`` is theirs, except that
    ``reduction='batchmean'`` still divides the result by ``input.shape[0]``: PyTorch's
    behaviour, kept so that the numbers agree.

    The gradient with respect to ``input`` is ``−t`` (``−eᵗ``). A target that requires grad
    gets ``ln t + 1 − x`` (``eᵗ (t − x + 1)``); where ``t = 0`` it gets ``−x``, the gradient of
    the 0 branch (PyTorch gives nan there: ``t ln t`` has slope ``−∞`` at 0).

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> p = ta.tensor([[0.5, 0.5, 0.0]])
    >>> q = ta.tensor([[0.25, 0.25, 0.5]])
    >>> loss = ta.F.kl_div(q.log(), p, reduction="batchmean")
    >>> math.isclose(loss.item(), math.log(2), rel_tol=1e-6)
    True
    """
    check_float("kl_div", "input", input)
    check_float("kl_div", "target", target)
    if not isinstance(log_target, (bool, np.bool_)):
        raise TypeError(f"kl_div: log_target must be a bool, got {type(log_target).__name__} "
                        f"{log_target!r}")
    legacy = size_average is not None or reduce is not None
    per_sample = reduction == "batchmean"  # PyTorch divides even a legacy reduction then
    reduction = legacy_reduction("kl_div", reduction, size_average, reduce, KL_REDUCTIONS)
    if reduction == "mean" and not legacy:
        warnings.warn("kl_div: reduction='mean' divides the sum by the number of elements "
                      "(batch size × number of classes), so it is not the KL divergence; "
                      "reduction='batchmean' divides by the batch size only and gives it. "
                      "PyTorch warns the same and plans to make 'mean' act as 'batchmean'.",
                      UserWarning, stacklevel=2)
    shape = broadcast_shapes("kl_div", input.shape, target.shape)
    if target.shape != shape:
        # The target's own terms (t ln t, eᵗ) on the broadcast shape too: their gradient then
        # sums only what the loss used (0 over an empty broadcast, where 0 · ln t could be nan).
        # In the dtype the operands promote to as given: a 0-d float64 target expanded would
        # otherwise make a float32 input's loss float64, where PyTorch's is float32.
        dtype = result_type(input, target)
        target = target.expand(shape)
        if target.dtype != dtype:
            target = target.to(dtype)
    if log_target:
        pointwise = exp(target) * (target - input)
    else:  # t ln t is 0 at t = 0: take the log of 1 there
        pointwise = target * log(where(target == 0, 1.0, target)) - target * input
    loss = _reduce(pointwise, "sum" if reduction == "batchmean" else reduction)
    return loss / input.shape[0] if per_sample and input.ndim else loss


# ---- regression -------------------------------------------------------------------------------
def _weighted_reduce(loss: Tensor, weight: Tensor | None, reduction: str,
                     mean_by_weight: bool) -> Tensor:
    if weight is None:
        return _reduce(loss, reduction)
    weighted = loss * weight
    return _reduce(weighted, reduction, weight.sum() if mean_by_weight else None)


def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
             reduce: bool | None = None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    """Mean squared error: ``ℓ = (x − t)²`` per element, reduced as ``reduction`` says.

    Parameters
    ----------
    input, target : Tensor; at least one floating point (a bool one counts as 0 and 1, as in
        PyTorch). Different shapes broadcast together
        with a warning (as in PyTorch): the usual cause is a (N, 1) prediction against a (N,)
        target, which gives an (N, N) loss
    size_average, reduce : bool, optional, deprecated: mapped to ``reduction`` as PyTorch does
    reduction : {'mean', 'sum', 'none'}
    weight : Tensor of the input's shape, optional: ``ℓ = w (x − t)²``, and 'mean' is then
        ``Σ w (x − t)² / Σ w`` (PyTorch's definition)

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.mse_loss(ta.tensor([1.0, 3.0]), ta.tensor([0.0, 0.0])).item()
    5.0
    """
    reduction = legacy_reduction("mse_loss", reduction, size_average, reduce)
    weight = _elementwise_weight("mse_loss", weight, input)
    input, target = _regression_pair("mse_loss", input, target)
    diff = input - target
    return _weighted_reduce(diff * diff, weight, reduction, mean_by_weight=True)


def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
            reduce: bool | None = None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    """Mean absolute error: ``ℓ = |x − t|`` per element (gradient ``sign(x − t)``, 0 at 0).

    The arguments are those of :func:`mse_loss`: different shapes broadcast with a warning, and
    with a ``weight`` 'mean' is ``Σ w |x − t| / Σ w``. As in PyTorch (which computes it as
    ``(input - target).abs()``), two integer tensors give an integer loss with 'none' and
    'sum', and a bool tensor is refused.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.l1_loss(ta.tensor([1.0, -3.0]), ta.tensor([0.0, 0.0])).item()
    2.0
    """
    reduction = legacy_reduction("l1_loss", reduction, size_average, reduce)
    weight = _elementwise_weight("l1_loss", weight, input)
    input, target = _regression_pair("l1_loss", input, target, integers=True)
    if reduction == "mean" and "f" not in input.dtype.kind + target.dtype.kind:
        raise DTypeError(f"l1_loss: reduction='mean' of integer tensors (dtypes {input.dtype} "
                         f"and {target.dtype}) has no integer result: convert them with "
                         ".float(), or use reduction='sum' (PyTorch refuses the mean too)")
    return _weighted_reduce((input - target).abs(), weight, reduction, mean_by_weight=True)


def _inside(diff: Tensor, size: Tensor, bound: float) -> Tensor:
    """``d``, but 0 where ``|d| >= bound``: the operand of the quadratic piece of
    :func:`smooth_l1_loss` and :func:`huber_loss`, which take the linear piece where
    ``|d| >= bound`` and the quadratic one elsewhere. Squared unmasked, an infinite ``d`` would
    give the piece that is not taken the gradient ``0 · 2d = 0 · ∞ = nan``; masked, it is 0, and
    the gradient there is the linear piece's ``sign(d)``, as PyTorch's. A NaN ``d`` takes the
    quadratic piece, so its gradient is NaN, as PyTorch's backward gives it."""
    return where(size >= bound, 0.0, diff)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                   reduce: bool | None = None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """Smooth L1: ``ℓ = 0.5 d² / β`` where ``|d| < β``, else ``|d| − 0.5 β`` (``d = x − t``).

    The gradient is ``d / β`` inside and ``sign(d)`` outside (continuous at ``|d| = β``).
    ``beta=0`` is :func:`l1_loss`. Different shapes broadcast with a warning, as in
    :func:`mse_loss`.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.smooth_l1_loss(ta.tensor([0.5, 3.0]), ta.tensor([0.0, 0.0]), reduction="none")
    tensor([0.1250, 2.5000])
    """
    reduction = legacy_reduction("smooth_l1_loss", reduction, size_average, reduce)
    beta = check_number("smooth_l1_loss", "beta", beta, low=0.0)
    input, target = _regression_pair("smooth_l1_loss", input, target)
    diff = input - target
    size = diff.abs()
    if beta == 0.0:
        return _reduce(size, reduction)
    inside = _inside(diff, size, beta)
    loss = where(size >= beta, size - 0.5 * beta, inside * inside * (0.5 / beta))
    return _reduce(loss, reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """Huber loss: ``ℓ = 0.5 d²`` where ``|d| < δ``, else ``δ (|d| − 0.5 δ)`` (``d = x − t``).

    ``huber_loss = delta · smooth_l1_loss(beta=delta)``. With a ``weight`` (the input's shape),
    ``ℓ = w · huber`` and 'mean' divides by the number of elements, not by ``Σ w`` (PyTorch's
    definition, unlike :func:`mse_loss`). Different shapes broadcast with a warning. The loss
    has the input's dtype (PyTorch's: a float64 target does not promote a float32 input), so
    the input must be floating point.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.huber_loss(ta.tensor([0.5, 3.0]), ta.tensor([0.0, 0.0]), reduction="none",
    ...                 delta=2.0)
    tensor([0.1250, 4.0000])
    """
    reduction = check_choice("huber_loss", "reduction", reduction, REDUCTIONS)
    delta = check_number("huber_loss", "delta", delta)
    if delta <= 0.0:
        raise ValueError(f"huber_loss: delta must be a number > 0, got {delta}")
    if input.dtype.kind != "f":  # PyTorch's huber_loss writes its result in the input's dtype
        raise DTypeError(f"huber_loss: input must be a floating point tensor (the loss has the "
                         f"input's dtype, as in PyTorch), got dtype {input.dtype}")
    weight = _elementwise_weight("huber_loss", weight, input)
    input, target = _regression_pair("huber_loss", input, target.to(input.dtype)
                                     if isinstance(target, Tensor) else target)
    diff = input - target
    size = diff.abs()
    inside = _inside(diff, size, delta)
    loss = where(size >= delta, (size - 0.5 * delta) * delta, inside * inside * 0.5)
    return _weighted_reduce(loss, weight, reduction, mean_by_weight=False)


# ---- binary classification --------------------------------------------------------------------
def _check_unit_interval(op: str, label: str, tensor: Tensor, hint: str = "") -> None:
    values = tensor.numpy()
    if values.size and not ((values >= 0) & (values <= 1)).all():
        found = "NaN" if np.isnan(values).any() else (
            f"values from {values.min():g} to {values.max():g}")
        raise ValueError(f"{op}: every element of {label} must be in [0, 1], got {found}{hint}")


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities:
    ``ℓ = −w (t · max(ln x, −100) + (1 − t) · max(ln(1 − x), −100))``.

    The logs are clamped at −100 as in PyTorch, so a probability of exactly 0 or 1 costs at
    most 100; the gradient is PyTorch's ``w (x − t) / max(x (1 − x), 1e-12)``
    (:class:`~tinyattn.ops.binary_cross_entropy.BinaryCrossEntropy`). For probabilities that
    come from a sigmoid, :func:`binary_cross_entropy_with_logits` on the logits is exact.

    Parameters
    ----------
    input : Tensor, float: probabilities in [0, 1]
    target : Tensor of the input's shape and dtype, values in [0, 1]
    weight : Tensor, optional, broadcast to the input's shape (cast to its dtype). Unlike
        PyTorch, which refuses a weight that requires grad, tinyattn differentiates it
    size_average, reduce : bool, optional, deprecated: mapped to ``reduction`` as PyTorch does
    reduction : {'mean', 'sum', 'none'}: 'mean' divides by the number of elements

    Examples
    --------
    >>> import tinyattn as ta, math
    >>> loss = ta.F.binary_cross_entropy(ta.tensor([0.8, 0.4]), ta.tensor([1.0, 0.0]))
    >>> math.isclose(loss.item(), -(math.log(0.8) + math.log(0.6)) / 2, rel_tol=1e-6)
    True
    """
    op = "binary_cross_entropy"
    check_float(op, "input", input)
    check_tensor(op, "target", target)
    reduction = legacy_reduction(op, reduction, size_average, reduce)
    if target.dtype != input.dtype:
        raise DTypeError(f"{op}: target must have the input's dtype {input.dtype}, got "
                         f"{target.dtype} (use target.to(input.dtype))")
    _same_shape(op, input, target)
    weight = _broadcast_weight(op, "weight", weight, input.shape, "input", input.dtype)
    _check_unit_interval(op, "input", input, " (probabilities: apply sigmoid first, or give "
                         "the logits to binary_cross_entropy_with_logits)")
    _check_unit_interval(op, "target", target)
    loss = BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(
    input: Tensor, target: Tensor, weight: Tensor | None = None,
    size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross-entropy of ``sigmoid(input)``, computed from the logits without overflow.

    ``ℓ = −w (p · t · ln σ(x) + (1 − t) · ln(1 − σ(x)))``, with ``p`` the ``pos_weight``,
    evaluated as ``w ((1 − t) x + (1 + (p − 1) t) · softplus(−x))`` where
    ``softplus(−x) = max(−x, 0) + ln(1 + e^(−|x|))``: no exponential of a positive number, so
    a logit of ±1000 gives the exact loss and a gradient ``w (σ(x)(1 + (p − 1) t) − p t)``.
    Both branches are taken on the side ``x ≥ 0`` at ``x = 0``, so the gradient there is exact
    too.

    Parameters
    ----------
    input : Tensor, float: logits
    target : Tensor, float, of the input's shape (any real values, as in PyTorch)
    weight : Tensor, optional, broadcast to the input's shape (cast to its dtype)
    size_average, reduce : bool, optional, deprecated: mapped to ``reduction`` as PyTorch does
    reduction : {'mean', 'sum', 'none'}: 'mean' divides by the number of elements
    pos_weight : Tensor, optional, broadcast to the target's shape: the weight of the positive
        term, one per class (shape (C,) for a target (N, C))

    The loss has the target's dtype, as PyTorch's (which computes it in place in a buffer of
    the target's dtype): a float64 input and a float32 target give a float32 loss.

    Unlike PyTorch, which refuses a ``weight`` or ``pos_weight`` that requires grad, tinyattn
    differentiates them.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.F.binary_cross_entropy_with_logits(ta.tensor([1000.0, -1000.0]),
    ...                                       ta.tensor([0.0, 1.0]), reduction="none")
    tensor([1000., 1000.])
    """
    op = "binary_cross_entropy_with_logits"
    check_float(op, "input", input)
    check_float(op, "target", target)
    reduction = legacy_reduction(op, reduction, size_average, reduce)
    _same_shape(op, input, target)
    weight = _broadcast_weight(op, "weight", weight, input.shape, "input", input.dtype)
    pos_weight = _broadcast_weight(op, "pos_weight", pos_weight, target.shape, "target",
                                   input.dtype)
    # −|x| and max(−x, 0), both on the x ≥ 0 branch at 0, so that their slopes add up there
    negative_size = where(input >= 0, -input, input)
    softplus_neg = relu(-input) + log1p(exp(negative_size))  # ln(1 + e^(−x))
    if pos_weight is None:
        loss = (1 - target) * input + softplus_neg
    else:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * softplus_neg
    if weight is not None:
        loss = loss * weight
    if loss.dtype != target.dtype:  # PyTorch's loss is written in the target's dtype
        loss = loss.to(target.dtype)
    return _reduce(loss, reduction)


__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "huber_loss",
    "kl_div", "l1_loss", "mse_loss", "nll_loss", "smooth_l1_loss",
]
