"""A differential test harness: random short programs over the ops tinyattn and PyTorch share,
run in both, compared step by step.

A program starts from one to three random tensors (random shapes that broadcast or not,
dtypes float32/float64/int64/bool, values with occasional NaN/inf/0) and applies a few ops,
each drawn from :data:`OPS` with random arguments (dims, keepdim, indices, scalars, masks).
After every step both libraries must agree on *whether* the step raised, and if not on the
shape, the dtype and the values; at the end the gradients of the float inputs (for a random
cotangent) must agree too. The same program text runs on both: ops are written once as
``lambda m, *tensors`` with ``m`` the module (``tinyattn`` or ``torch``).

``python tests/torch_differential.py 2000`` runs 2,000 seeded programs and prints the share
that deviated, grouped by the op where they first did (the figure the README quotes);
``tests/test_torch_differential.py`` runs it under hypothesis in the test suite.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tinyattn

DTYPES = ("float32", "float64", "int64", "bool")
FLOATS = ("float32", "float64")


class Choices:
    """Random choices, from a numpy generator (the standalone run) or hypothesis data."""

    def __init__(self, source: Any):
        self.source = source

    def int(self, low: int, high: int) -> int:
        if isinstance(self.source, np.random.Generator):
            return int(self.source.integers(low, high + 1))
        from hypothesis import strategies as st

        return self.source.draw(st.integers(low, high))

    def pick(self, options: list) -> Any:
        return options[self.int(0, len(options) - 1)]

    def coin(self, p_true: float = 0.5) -> bool:
        return self.int(0, 999) < p_true * 1000


@dataclass
class Value:
    """One value of a program: its shape and dtype (the op generators read them)."""

    shape: tuple[int, ...]
    dtype: str


def _shape(c: Choices, ndim: int | None = None) -> tuple[int, ...]:
    ndim = c.int(0, 3) if ndim is None else ndim
    return tuple(c.pick([1, 2, 3, 4]) if not c.coin(0.05) else 0 for _ in range(ndim))


def _data(c: Choices, shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "int64":
        return rng.integers(-3, 4, shape).astype(np.int64)
    values = rng.uniform(-2.0, 2.0, shape)
    if values.size and c.coin(0.15):
        special = rng.choice([0.0, np.nan, np.inf, -np.inf, 0.5])
        values.flat[rng.integers(0, values.size)] = special
    return values.astype(dtype)


def _dim(c: Choices, v: Value) -> int:
    n = max(len(v.shape), 1)
    return c.int(-n, n - 1)


def _dims(c: Choices, v: Value) -> Any:
    if not v.shape or c.coin(0.3):
        return None
    dims = sorted({c.int(0, len(v.shape) - 1) for _ in range(c.int(1, len(v.shape)))})
    return tuple(dims) if len(dims) > 1 or c.coin() else dims[0]


def _scalar(c: Choices) -> Any:
    return c.pick([2, -1, 0, 0.5, -1.5, True, 3.0])


def _index(c: Choices, v: Value) -> tuple:
    parts: list[Any] = []
    for n in v.shape:
        kind = c.pick(["int", "slice", "slice", "list", "mask", "none", "all"])
        if kind == "int" and n:
            parts.append(c.int(-n, n - 1))
        elif kind == "slice":
            parts.append(slice(c.int(0, n), c.pick([None, n, max(n - 1, 0)])))
        elif kind == "list" and n:
            parts.append([c.int(0, n - 1) for _ in range(c.int(1, 3))])
        elif kind == "mask":
            parts.append(np.array([c.coin() for _ in range(n)]))
        elif kind == "none":
            parts.extend([None, slice(None)])
        else:
            parts.append(slice(None))
    if parts and c.coin(0.2):
        parts = [Ellipsis] + parts[1:]
    return tuple(parts)


def _lib_index(m: Any, index: tuple) -> tuple:
    return tuple(m.tensor(p) if isinstance(p, np.ndarray) else p for p in index)


@dataclass
class Op:
    """An op: how many values it takes, and a function that draws its arguments and returns
    ``fn(m, *tensors)``."""

    name: str
    arity: int
    build: Callable[[Choices, list[Value]], Callable]


def _unary(name: str, method: str) -> Op:
    return Op(name, 1, lambda c, vs: lambda m, x: getattr(x, method)())


def _binary(name: str, fn: Callable) -> Op:
    return Op(name, 2, lambda c, vs: fn)


def _reduction(name: str, method: str, keep: bool = True) -> Op:
    def build(c: Choices, vs: list[Value]) -> Callable:
        dims, keepdim = _dims(c, vs[0]), c.coin()
        if dims is None:
            return lambda m, x: getattr(x, method)()
        return lambda m, x: getattr(x, method)(dims, keepdim=keepdim)
    return Op(name, 1, build)


def _dim_op(name: str, fn: Callable) -> Op:
    return Op(name, 1, lambda c, vs: (lambda d: lambda m, x: fn(m, x, d))(_dim(c, vs[0])))


def _var(c: Choices, vs: list[Value]) -> Callable:
    dims, keepdim = _dims(c, vs[0]), c.coin()
    kind = c.pick(["unbiased", "correction", "plain"])
    if kind == "unbiased":
        unbiased = c.coin()
        return lambda m, x: x.var(dims, unbiased=unbiased, keepdim=keepdim)
    if kind == "correction":
        corr = c.pick([0, 1, 2])
        return lambda m, x: x.var(dims, correction=corr, keepdim=keepdim)
    return lambda m, x: x.var()


def _reshape(c: Choices, vs: list[Value]) -> Callable:
    n = math.prod(vs[0].shape)
    options = [(-1,), (n,), (1, -1), (-1, 1)] + ([(2, -1)] if n % 2 == 0 and n else [])
    shape = c.pick(options)
    method = c.pick(["reshape", "view"])
    return lambda m, x: getattr(x, method)(*shape)


def _permute(c: Choices, vs: list[Value]) -> Callable:
    order = list(range(len(vs[0].shape)))
    for i in range(len(order) - 1, 0, -1):
        j = c.int(0, i)
        order[i], order[j] = order[j], order[i]
    return lambda m, x: x.permute(*order)


def _transpose(c: Choices, vs: list[Value]) -> Callable:
    a, b = _dim(c, vs[0]), _dim(c, vs[0])
    return lambda m, x: x.transpose(a, b)


def _squeeze(c: Choices, vs: list[Value]) -> Callable:
    kind = c.pick(["none", "dim", "tuple"])
    if kind == "none":
        return lambda m, x: x.squeeze()
    if kind == "dim":
        d = _dim(c, vs[0])
        return lambda m, x: x.squeeze(d)
    dims = tuple(sorted({_dim(c, vs[0]) % max(len(vs[0].shape), 1) for _ in range(2)}))
    return lambda m, x: x.squeeze(dims)


def _unsqueeze(c: Choices, vs: list[Value]) -> Callable:
    n = len(vs[0].shape) + 1
    d = c.int(-n, n - 1)
    return lambda m, x: x.unsqueeze(d)


def _expand(c: Choices, vs: list[Value]) -> Callable:
    shape = tuple(c.pick([n, 3]) if n == 1 else n for n in vs[0].shape)
    lead = (2,) if c.coin(0.3) else ()
    return lambda m, x: x.expand(*(lead + shape))


def _repeat(c: Choices, vs: list[Value]) -> Callable:
    reps = tuple(c.int(1, 2) for _ in range(len(vs[0].shape) + c.int(0, 1)))
    return lambda m, x: x.repeat(*reps) if reps else x.repeat(())


def _getitem(c: Choices, vs: list[Value]) -> Callable:
    index = _index(c, vs[0])
    return lambda m, x: x[_lib_index(m, index)]


def _setitem(c: Choices, vs: list[Value]) -> Callable:
    index = _index(c, vs[0])
    value = _scalar(c)

    def fn(m: Any, x: Any) -> Any:
        y = x.clone()
        y[_lib_index(m, index)] = value
        return y
    return fn


def _masked_fill(c: Choices, vs: list[Value]) -> Callable:
    shape = vs[0].shape
    mask_shape = tuple(n if c.coin(0.7) else 1 for n in shape)[c.int(0, len(shape)):]
    mask = np.random.default_rng(c.int(0, 10**6)).random(mask_shape) < 0.5
    value = c.pick([0.0, -math.inf, 1.5, 2])
    in_place = c.coin(0.3)
    if in_place:
        return lambda m, x: x.clone().masked_fill_(m.tensor(mask), value)
    return lambda m, x: x.masked_fill(m.tensor(mask), value)


def _where(c: Choices, vs: list[Value]) -> Callable:
    return lambda m, x, y: m.where(x > 0, x, y)


def _clamp(c: Choices, vs: list[Value]) -> Callable:
    low, high = c.pick([None, -0.5, 0, 1.5]), c.pick([None, 1.0, 2, -1])  # min > max too
    if low is None and high is None:
        low = 0
    if c.coin(0.2):
        return lambda m, x: m.clamp(x, min=low, max=high)
    return lambda m, x: x.clamp(low, high)


def _pow_scalar(c: Choices, vs: list[Value]) -> Callable:
    e = c.pick([2, 3, 0.5, -1, 0, -2.0])
    if c.coin():
        return lambda m, x: x ** e
    return lambda m, x: e ** x


def _softmax(method: str) -> Op:
    def build(c: Choices, vs: list[Value]) -> Callable:
        d = _dim(c, vs[0])
        return lambda m, x: getattr(x, method)(d)
    return Op(method, 1, build)


def _max_dim(c: Choices, vs: list[Value]) -> Callable:
    d, keepdim, part = _dim(c, vs[0]), c.coin(), c.pick([0, 1])
    method = c.pick(["max", "min"])
    return lambda m, x: getattr(x, method)(d, keepdim=keepdim)[part]


def _arg(c: Choices, vs: list[Value]) -> Callable:
    method = c.pick(["argmax", "argmin"])
    if c.coin(0.3):
        return lambda m, x: getattr(x, method)()
    d, keepdim = _dim(c, vs[0]), c.coin()
    return lambda m, x: getattr(x, method)(d, keepdim=keepdim)


def _cat(c: Choices, vs: list[Value]) -> Callable:
    d = _dim(c, vs[0])
    fn = c.pick(["cat", "stack"])
    return lambda m, x, y: getattr(m, fn)([x, y], d)


def _split(c: Choices, vs: list[Value]) -> Callable:
    d, size, part = _dim(c, vs[0]), c.int(1, 3), c.int(0, 1)
    method = c.pick(["split", "chunk"])
    return lambda m, x: getattr(x, method)(size, d)[part]


def _tri(c: Choices, vs: list[Value]) -> Callable:
    k, method = c.int(-1, 1), c.pick(["tril", "triu"])
    return lambda m, x: getattr(x, method)(k)


def _flatten(c: Choices, vs: list[Value]) -> Callable:
    a, b = sorted((_dim(c, vs[0]) % max(len(vs[0].shape), 1),
                   _dim(c, vs[0]) % max(len(vs[0].shape), 1)))
    return lambda m, x: x.flatten(a, b)


def _cast(c: Choices, vs: list[Value]) -> Callable:
    dtype = c.pick(list(DTYPES))
    return lambda m, x: x.to(getattr(m, dtype))


def _inplace(c: Choices, vs: list[Value]) -> Callable:
    method, scalar = c.pick(["add_", "mul_", "sub_", "div_"]), _scalar(c)
    return lambda m, x: getattr(x.clone(), method)(scalar)


def _binary_inplace(c: Choices, vs: list[Value]) -> Callable:
    method = c.pick(["add_", "mul_", "sub_"])
    return lambda m, x, y: getattr(x.clone(), method)(y)


def _prod(c: Choices, vs: list[Value]) -> Callable:
    if c.coin(0.3):
        return lambda m, x: x.prod()
    d, keepdim = _dim(c, vs[0]), c.coin()
    return lambda m, x: m.prod(x, d, keepdim=keepdim)


def _norm(c: Choices, vs: list[Value]) -> Callable:
    kind = c.pick(["all", "dim", "linalg", "normalize"])
    p = c.pick([2, 1, math.inf, 3.0])
    if kind == "all":
        return lambda m, x: x.norm()
    d, keepdim = _dim(c, vs[0]), c.coin()
    if kind == "dim":
        return lambda m, x: x.norm(p, d, keepdim=keepdim)
    if kind == "linalg":
        return lambda m, x: m.linalg.norm(x, p, dim=d, keepdim=keepdim)
    return lambda m, x: m.nn.functional.normalize(x, p=p, dim=d)


def _sort(c: Choices, vs: list[Value]) -> Callable:
    """Stable sorts: the order of the indices of equal values is otherwise unspecified
    (PyTorch's default sort is not stable; tinyattn's always is)."""
    d, descending, part = _dim(c, vs[0]), c.coin(), c.pick([0, 1])
    if c.coin(0.3):
        return lambda m, x: x.argsort(dim=d, descending=descending, stable=True)
    return lambda m, x: m.sort(x, dim=d, descending=descending, stable=True)[part]


def _positions(c: Choices, shape: tuple[int, ...], axis: int, unique: bool) -> np.ndarray:
    """An int64 index of ``shape`` whose values along ``axis`` lie in ``[0, shape[axis])``:
    a permutation of them along ``axis`` when ``unique`` (scatter writes one value per
    position, so no two writes race)."""
    rng = np.random.default_rng(c.int(0, 10**6))
    n = shape[axis]
    if unique:
        return np.argsort(rng.random(shape), axis=axis).astype(np.int64)
    return rng.integers(0, max(n, 1), shape).astype(np.int64) if n else np.zeros(shape, np.int64)


def _scatter(c: Choices, vs: list[Value]) -> Callable:
    shape = vs[0].shape
    d = _dim(c, vs[0])
    method = c.pick(["scatter", "scatter_add", "scatter_value"])
    axis = d % len(shape) if shape else 0
    index = _positions(c, shape or (1,), axis, method != "scatter_add").reshape(shape)
    value = _scalar(c)

    def fn(m: Any, x: Any) -> Any:
        if method == "scatter_value":
            return x.scatter(d, m.tensor(index), value)
        return getattr(x, method)(d, m.tensor(index), x * 2)
    return fn


def _index_fill(c: Choices, vs: list[Value]) -> Callable:
    d = _dim(c, vs[0])
    n = vs[0].shape[d] if vs[0].shape else 1
    index = [c.int(-n, n - 1) for _ in range(c.int(1, 2))] if n else []
    value = c.pick([0.0, -1e9, 2, True])

    def fn(m: Any, x: Any) -> Any:
        return x.index_fill(d, m.tensor(index, dtype=m.int64), value)
    return fn


def _nonzero(c: Choices, vs: list[Value]) -> Callable:
    kind = c.pick(["rows", "tuple", "select"])
    if kind == "rows":
        return lambda m, x: m.nonzero(x)
    if kind == "tuple":
        return lambda m, x: m.nonzero(x, as_tuple=True)[0]
    return lambda m, x: x[(x > 0).nonzero(as_tuple=True)]


def _loss(c: Choices, vs: list[Value]) -> Callable:
    name = c.pick(["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
                   "binary_cross_entropy", "binary_cross_entropy_with_logits"])
    reduction = c.pick(["mean", "sum", "none"])
    log_target = c.coin()

    def fn(m: Any, x: Any, y: Any) -> Any:
        F = m.nn.functional
        if name == "kl_div":
            return F.kl_div(x.log_softmax(-1), y, reduction=c_reduction, log_target=log_target)
        if name == "binary_cross_entropy":
            return F.binary_cross_entropy(x.sigmoid(), y.clamp(0, 1), reduction=reduction)
        return getattr(F, name)(x, y, reduction=reduction)
    c_reduction = "batchmean" if reduction == "mean" else reduction
    if name == "huber_loss":
        fn.documented_backward_error = ("huber_loss of mixed float dtypes: PyTorch's backward "
                                        "raises, tinyattn's computes")
    if name == "kl_div":
        fn.documented_gradient = ("kl_div's target gradient where PyTorch's is NaN: −x at a zero "
                                  "target, 0 over an empty broadcast")
    return fn


def _linear(c: Choices, vs: list[Value]) -> Callable:
    out, seed = c.int(1, 3), c.int(0, 10**6)

    def fn(m: Any, x: Any) -> Any:
        rng = np.random.default_rng(seed)
        n = x.shape[-1] if x.ndim else 1
        w = m.tensor(rng.standard_normal((out, n)), dtype=x.dtype)
        return m.nn.functional.linear(x, w, m.tensor(rng.standard_normal(out), dtype=x.dtype))
    return fn


def _layer_norm(c: Choices, vs: list[Value]) -> Callable:
    return lambda m, x: m.nn.functional.layer_norm(x, x.shape[-1:])


def _gelu(c: Choices, vs: list[Value]) -> Callable:
    approximate = c.pick(["none", "tanh"])
    return lambda m, x: m.nn.functional.gelu(x, approximate=approximate)


def _cross_entropy(c: Choices, vs: list[Value]) -> Callable:
    seed, smoothing = c.int(0, 10**6), c.pick([0.0, 0.1])
    reduction = c.pick(["mean", "sum", "none"])

    def fn(m: Any, x: Any) -> Any:
        if x.ndim != 2:
            x = x.reshape(1, -1) if x.ndim < 2 else x.flatten(1)
        n, classes = x.shape
        target = np.random.default_rng(seed).integers(0, max(classes, 1), n)
        return m.nn.functional.cross_entropy(x, m.tensor(target), reduction=reduction,
                                             label_smoothing=smoothing)
    return fn


def _attention(c: Choices, vs: list[Value]) -> Callable:
    causal = c.coin()

    def fn(m: Any, x: Any) -> Any:
        q = x.reshape(1, 1, -1, 1) if x.ndim < 2 else x
        return m.nn.functional.scaled_dot_product_attention(q, q * 0.5, q, is_causal=causal)
    return fn


def _matmul(c: Choices, vs: list[Value]) -> Callable:
    return lambda m, x, y: x @ y


def _mm_like(c: Choices, vs: list[Value]) -> Callable:
    name = c.pick(["dot", "mm", "bmm"])
    return lambda m, x, y: getattr(m, name)(x, y)


OPS: list[Op] = [
    _binary("add", lambda m, x, y: x + y), _binary("sub", lambda m, x, y: x - y),
    _binary("mul", lambda m, x, y: x * y), _binary("div", lambda m, x, y: x / y),
    _binary("pow", lambda m, x, y: x ** y), _binary("maximum", lambda m, x, y: m.maximum(x, y)),
    _binary("minimum", lambda m, x, y: m.minimum(x, y)),
    _binary("lt", lambda m, x, y: x < y), _binary("eq", lambda m, x, y: x == y),
    _binary("and", lambda m, x, y: x & y), _binary("or", lambda m, x, y: x | y),
    _binary("floordiv", lambda m, x, y: x // y), _binary("mod", lambda m, x, y: x % y),
    Op("scalar-add", 1, lambda c, vs: (lambda s: lambda m, x: x + s)(_scalar(c))),
    Op("scalar-rmul", 1, lambda c, vs: (lambda s: lambda m, x: s * x)(_scalar(c))),
    Op("scalar-rsub", 1, lambda c, vs: (lambda s: lambda m, x: s - x)(_scalar(c))),
    Op("scalar-rdiv", 1, lambda c, vs: (lambda s: lambda m, x: s / x)(_scalar(c))),
    Op("pow-scalar", 1, _pow_scalar),
    _unary("neg", "neg"), _unary("abs", "abs"), _unary("exp", "exp"), _unary("log", "log"),
    _unary("sqrt", "sqrt"), _unary("rsqrt", "rsqrt"), _unary("tanh", "tanh"),
    _unary("sigmoid", "sigmoid"), _unary("relu", "relu"), _unary("sin", "sin"),
    _unary("cos", "cos"), _unary("erf", "erf"), _unary("contiguous", "contiguous"),
    _unary("clone", "clone"), _unary("float", "float"), _unary("long", "long"),
    _unary("bool", "bool"), _unary("double", "double"),
    _unary("square", "square"), _unary("reciprocal", "reciprocal"), _unary("sign", "sign"),
    _unary("floor", "floor"), _unary("ceil", "ceil"), _unary("round", "round"),
    _unary("trunc", "trunc"), _unary("log1p", "log1p"), _unary("expm1", "expm1"),
    Op("invert", 1, lambda c, vs: lambda m, x: ~x),
    Op("clamp", 1, _clamp), Op("cast", 1, _cast),
    _reduction("sum", "sum"), _reduction("mean", "mean"), _reduction("amax", "amax"),
    _reduction("amin", "amin"), Op("var", 1, _var),
    Op("std", 1, lambda c, vs: (lambda d, k: lambda m, x: x.std(d, keepdim=k))(
        _dims(c, vs[0]), c.coin())),
    Op("max-all", 1, lambda c, vs: lambda m, x: x.max()),
    Op("max-dim", 1, _max_dim), Op("argmax", 1, _arg),
    Op("logsumexp", 1, lambda c, vs: (lambda d: lambda m, x: m.logsumexp(x, d))(
        _dim(c, vs[0]))),
    _softmax("softmax"), _softmax("log_softmax"),
    Op("reshape", 1, _reshape), Op("permute", 1, _permute), Op("transpose", 1, _transpose),
    Op("squeeze", 1, _squeeze), Op("unsqueeze", 1, _unsqueeze), Op("expand", 1, _expand),
    Op("repeat", 1, _repeat), Op("flatten", 1, _flatten),
    _dim_op("flip", lambda m, x, d: x.flip(d)),
    _dim_op("repeat_interleave", lambda m, x, d: x.repeat_interleave(2, d)),
    _dim_op("unbind", lambda m, x, d: x.unbind(d)[0]),
    Op("getitem", 1, _getitem), Op("setitem", 1, _setitem),
    Op("masked_fill", 1, _masked_fill), Op("where", 2, _where), Op("tri", 1, _tri),
    Op("cat", 2, _cat), Op("split", 1, _split),
    Op("inplace-scalar", 1, _inplace), Op("inplace-tensor", 2, _binary_inplace),
    Op("matmul", 2, _matmul), Op("mm-like", 2, _mm_like),
    Op("linear", 1, _linear), Op("layer_norm", 1, _layer_norm), Op("gelu", 1, _gelu),
    Op("cross_entropy", 1, _cross_entropy), Op("attention", 1, _attention),
    Op("silu", 1, lambda c, vs: lambda m, x: m.nn.functional.silu(x)),
    Op("prod", 1, _prod), Op("norm", 1, _norm), Op("sort", 1, _sort),
    _binary("outer", lambda m, x, y: m.outer(x, y)),
    Op("scatter", 1, _scatter), Op("index_fill", 1, _index_fill), Op("nonzero", 1, _nonzero),
    Op("loss", 2, _loss),
]


@dataclass
class Outcome:
    """What one program did: the first step where the libraries disagreed, if any, and any
    documented deviation it met on the way (README, "What differs from PyTorch")."""

    deviation: str | None = None
    documented: str | None = None
    steps: list[str] = field(default_factory=list)


def _finite_where_torch_has_nan_only(ours: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether the gradients differ only where torch's is NaN and ours is finite (a documented
    gradient, such as ``kl_div``'s at a zero target)."""
    differ = ~np.isclose(ours, theirs, rtol=1e-4, atol=1e-4) & ~(np.isnan(ours) & np.isnan(theirs))
    return bool(np.all(np.isnan(theirs[differ]) & np.isfinite(ours[differ])))


def _fully_masked_rows_only(x: Any, ours: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether ours and torch's (log-)softmax differ only where the input is all −inf, along
    some dim (tinyattn's documented fully-masked row: 0 or −inf there, where torch has NaN)."""
    data = np.asarray(x.numpy())
    differ = ~(np.isclose(ours, theirs, equal_nan=True))
    if data.ndim == 0:  # a 0-d softmax is a row of one
        return bool(data == -np.inf)
    if data.shape != ours.shape:
        return False
    for axis in range(data.ndim):
        masked = np.all(data == -np.inf, axis=axis, keepdims=True)
        if np.all(~differ | np.broadcast_to(masked, data.shape)):
            return True
    return False


def _gelu_at_infinity_only(x: Any, ours: np.ndarray, theirs: np.ndarray) -> bool:
    """Whether ours and torch's exact GELU differ only at ``x = +inf`` (tinyattn's documented
    ``gelu(+inf) = +inf``, where torch's exact GELU gives NaN)."""
    data = np.asarray(x.numpy())
    differ = ~(np.isclose(ours, theirs, equal_nan=True))
    return data.shape == ours.shape and bool(np.all(~differ | (data == np.inf)))


def _torch_nan_beside_a_non_finite_input_only(inputs: list[Any], ours: np.ndarray,
                                              theirs: np.ndarray) -> bool:
    """Whether an input holds ±inf or NaN and ours and torch's outputs differ only where
    torch's is NaN (attention's documented rows: tinyattn's NaN reaches only the columns the
    non-finite value reaches, PyTorch's whole row)."""
    non_finite = any(not np.isfinite(np.asarray(x.numpy(), dtype=np.float64)).all()
                     for x in inputs if hasattr(x, "numpy"))
    differ = ~np.isclose(ours, theirs, equal_nan=True)
    return non_finite and bool(np.all(np.isnan(theirs[differ])))


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().numpy()
    return np.asarray(x.numpy() if hasattr(x, "data") else x)


def _same_values(a: np.ndarray, b: np.ndarray, dtype: str, low_precision: bool = False) -> bool:
    """Equal shapes and values: exact for bool/int, to float32 or float64 rounding otherwise
    (float32 rounding whenever a float32 value took part: it limits the whole program)."""
    if a.shape != b.shape:
        return False
    if dtype in FLOATS:
        tol = 1e-4 if dtype == "float32" or low_precision else 1e-9
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        both_nan = np.isnan(a64) & np.isnan(b64)
        close = np.isclose(a64, b64, rtol=tol, atol=tol) | both_nan
        return bool(np.all(close))
    return bool(np.array_equal(a, b))


def _dtype_name(x: Any) -> str:
    return str(x.dtype).replace("torch.", "")


def run_program(c: Choices) -> Outcome:
    """Draw and run one program in both libraries; report the first deviation."""
    import torch

    torch.set_num_threads(1)
    outcome = Outcome()
    n_inputs = c.int(1, 3)
    base = _shape(c)
    inputs: list[tuple[np.ndarray, str]] = []
    for _ in range(n_inputs):
        shape = base if c.coin(0.6) else (_shape(c) if c.coin() else base[c.int(0, len(base)):])
        shape = tuple(1 if c.coin(0.15) else n for n in shape)
        dtype = c.pick(list(DTYPES) + list(FLOATS) * 2)
        inputs.append((_data(c, shape, dtype, c.int(0, 10**6)), dtype))
    ours = [tinyattn.tensor(a, requires_grad=d in FLOATS) for a, d in inputs]
    theirs = [torch.tensor(a, requires_grad=d in FLOATS) for a, d in inputs]
    values = [Value(a.shape, d) for a, d in inputs]
    pool_ours, pool_theirs = list(ours), list(theirs)
    gradient_note = backward_error_note = None
    for _ in range(c.int(1, 4)):
        op = c.pick(OPS)
        picks = [c.int(0, len(values) - 1) for _ in range(op.arity)]
        fn = op.build(c, [values[i] for i in picks])
        outcome.steps.append(op.name)
        gradient_note = getattr(fn, "documented_gradient", None) or gradient_note
        backward_error_note = getattr(fn, "documented_backward_error", None) or \
            backward_error_note
        results = []
        for module, pool in ((tinyattn, pool_ours), (torch, pool_theirs)):
            try:
                results.append(("ok", fn(module, *[pool[i] for i in picks])))
            except Exception as err:  # noqa: BLE001 - any error counts as "raised"
                results.append(("error", err))
        (ours_kind, ours_value), (theirs_kind, theirs_value) = results
        if ours_kind != theirs_kind:
            said = [f"raised {value!r}"[:160] if kind == "error" else "computed"
                    for kind, value in results]
            outcome.deviation = f"{op.name}: tinyattn {said[0]}, torch {said[1]}"
            return outcome
        if ours_kind == "error":
            continue
        if not hasattr(theirs_value, "dtype"):
            continue
        a, b = _to_numpy(ours_value), _to_numpy(theirs_value)
        dtype = _dtype_name(theirs_value)
        if _dtype_name(ours_value) != dtype:
            outcome.deviation = f"{op.name}: dtype {_dtype_name(ours_value)} vs torch {dtype}"
            return outcome
        if a.shape != b.shape:
            outcome.deviation = f"{op.name}: shape {a.shape} vs torch {b.shape}"
            return outcome
        if not _same_values(a, b, dtype, any(v.dtype == "float32" for v in values)):
            first_input = pool_ours[picks[0]]
            if op.name in ("softmax", "log_softmax") and _fully_masked_rows_only(
                    first_input, a, b):
                outcome.documented = "a fully masked (all −inf) row: zeros, not NaN"
            elif op.name == "gelu" and _gelu_at_infinity_only(first_input, a, b):
                outcome.documented = "gelu(+inf) = +inf, not NaN"
            elif op.name == "attention" and _torch_nan_beside_a_non_finite_input_only(
                    [pool_ours[i] for i in picks], a, b):
                outcome.documented = ("attention over a non-finite key or value: NaN only where "
                                      "it reaches, where PyTorch's whole row is NaN")
            else:
                outcome.deviation = f"{op.name}: values differ"
            return outcome  # after a documented difference, the later steps differ by it
        pool_ours.append(ours_value)
        pool_theirs.append(theirs_value)
        values.append(Value(tuple(b.shape), dtype))
    last_ours, last_theirs = pool_ours[-1], pool_theirs[-1]
    if values[-1].dtype not in FLOATS or not last_theirs.requires_grad:
        if getattr(last_ours, "requires_grad", False) != getattr(last_theirs, "requires_grad",
                                                                 False):
            outcome.deviation = "requires_grad differs"
        return outcome
    wanted = [i for i, (_, d) in enumerate(inputs) if d in FLOATS]
    cotangent = np.random.default_rng(0).standard_normal(tuple(last_theirs.shape))
    grads = []
    for module, out, leaves in ((tinyattn, last_ours, ours), (torch, last_theirs, theirs)):
        try:
            seed = module.tensor(cotangent).to(out.dtype)
            grads.append(module.autograd.grad(out, [leaves[i] for i in wanted], seed,
                                              allow_unused=True))
        except Exception as err:  # noqa: BLE001 - any error counts as "raised"
            grads.append(err)
    ours_grads, theirs_grads = grads
    if isinstance(ours_grads, Exception) or isinstance(theirs_grads, Exception):
        if backward_error_note and not isinstance(ours_grads, Exception) and \
                "Found dtype" in str(theirs_grads):
            outcome.documented = backward_error_note
        elif not (isinstance(ours_grads, Exception) and isinstance(theirs_grads, Exception)):
            outcome.deviation = (f"backward: tinyattn {ours_grads!r}"[:120]
                                 + f", torch {theirs_grads!r}"[:120])
        return outcome
    for i, g_ours, g_theirs in zip(wanted, ours_grads, theirs_grads):
        a = np.zeros(inputs[i][0].shape) if g_ours is None else _to_numpy(g_ours)
        b = np.zeros(inputs[i][0].shape) if g_theirs is None else _to_numpy(g_theirs)
        if not _same_values(a.astype(np.float64), b.astype(np.float64), inputs[i][1],
                            any(v.dtype == "float32" for v in values)):
            if gradient_note and _finite_where_torch_has_nan_only(a, b):
                outcome.documented = gradient_note
                return outcome
            outcome.deviation = f"backward ({' > '.join(outcome.steps)}): gradients differ"
            return outcome
    return outcome


def main(count: int) -> float:
    """Run ``count`` seeded programs; print and return the share that deviated."""
    reasons: Counter = Counter()
    for seed in range(count):
        outcome = run_program(Choices(np.random.default_rng(seed)))
        if outcome.deviation:
            reasons[outcome.deviation.split(":")[0]] += 1
            print(f"seed {seed}: {' > '.join(outcome.steps)} — {outcome.deviation}")
    share = sum(reasons.values()) / count
    print(f"\n{sum(reasons.values())} of {count} programs deviated ({100 * share:.2f}%)")
    for name, n in reasons.most_common():
        print(f"  {n:5d}  {name}")
    return share


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
