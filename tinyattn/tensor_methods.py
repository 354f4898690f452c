"""The methods and operators of :class:`tinyattn.Tensor`, written out one by one in the mixin
:class:`TensorMethods` (``class Tensor(TensorMethods)``), so that grep and an IDE find each.

Each method is the function of the same name in :mod:`tinyattn.ops` (``x.softmax(-1)`` is
``ta.softmax(x, -1)``); each operator too (``x + y`` is ``ta.add(x, y)``, ``2 - x`` is
``ta.sub(2, x)``). An in-place method (``x.add_(y)``) computes the ordinary op out of place and
writes the result into ``x`` (:meth:`Tensor._assign`): the op is recorded as usual, and ``x``
takes its ``grad_fn``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes
from .devices import check_device
from .random import generator
from .validation import normalize_dim, normalize_dims, shape_arg

_ops: Any = None
""":mod:`tinyattn.ops`, set by :mod:`tinyattn.tensor` once ops can be imported (ops import the
Tensor class, which is built on this mixin)."""

_TYPE_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int64": "Long",
               "int32": "Int", "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short"}


class TensorMethods:
    """Every method and operator of a Tensor that is an op (see the module docstring)."""

    __slots__ = ()

    def _in_place(self, name, fn, *args, **kwargs):
        """Compute ``fn(self, *args, **kwargs)`` and write it into this tensor."""
        self._check_inplace(name)
        return self._assign(fn(self, *args, **kwargs), name)

    # ---- operators ---------------------------------------------------------------------------
    def __add__(self, other):
        return _ops.add(self, other)

    def __radd__(self, other):
        return _ops.add(other, self)

    def __sub__(self, other):
        return _ops.sub(self, other)

    def __rsub__(self, other):
        return _ops.sub(other, self)

    def __mul__(self, other):
        return _ops.mul(self, other)

    def __rmul__(self, other):
        return _ops.mul(other, self)

    def __truediv__(self, other):
        return _ops.div(self, other)

    def __rtruediv__(self, other):
        return _ops.div(other, self)

    def __floordiv__(self, other):
        return _ops.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _ops.floor_divide(other, self)

    def __mod__(self, other):
        return _ops.remainder(self, other)

    def __rmod__(self, other):
        return _ops.remainder(other, self)

    def __pow__(self, other):
        return _ops.pow(self, other)

    def __rpow__(self, other):
        return _ops.pow(other, self)

    def __matmul__(self, other):
        return _ops.matmul(self, other)

    def __rmatmul__(self, other):
        return _ops.matmul(other, self)

    def __lt__(self, other):
        return _ops.lt(self, other)

    def __le__(self, other):
        return _ops.le(self, other)

    def __gt__(self, other):
        return _ops.gt(self, other)

    def __ge__(self, other):
        return _ops.ge(self, other)

    def __and__(self, other):
        return _ops.logical_op("and", self, other)

    def __rand__(self, other):
        return _ops.logical_op("and", other, self)

    def __or__(self, other):
        return _ops.logical_op("or", self, other)

    def __ror__(self, other):
        return _ops.logical_op("or", other, self)

    def __xor__(self, other):
        return _ops.logical_op("xor", self, other)

    def __invert__(self):
        return _ops.logical_op("not", self, None)

    def __neg__(self):
        return _ops.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _ops.abs(self)

    def __getitem__(self, index):
        return _ops.getitem(self, index)

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    # ---- ops as methods ----------------------------------------------------------------------
    def abs(self):
        """Elementwise absolute value: :func:`tinyattn.abs`."""
        return _ops.abs(self)

    def add(self, other, alpha=1):
        """Elementwise ``input + alpha · other`` with broadcasting: :func:`tinyattn.add`."""
        return _ops.add(self, other, alpha)

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """Whether :func:`isclose` holds everywhere (shapes broadcast):
        :func:`tinyattn.allclose`."""
        return _ops.allclose(self, other, rtol, atol, equal_nan)

    def amax(self, dim=(), keepdim=False):
        """Maximum over ``dim`` (all dims for ``()``); ties share the gradient equally:
        :func:`tinyattn.amax`."""
        return _ops.amax(self, dim, keepdim)

    def amin(self, dim=(), keepdim=False):
        """Minimum over ``dim`` (all dims for ``()``); ties share the gradient equally:
        :func:`tinyattn.amin`."""
        return _ops.amin(self, dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        """Indices of the maxima (of the flattened tensor when ``dim`` is None); no gradient:
        :func:`tinyattn.argmax`."""
        return _ops.argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        """Indices of the minima (of the flattened tensor when ``dim`` is None); no gradient:
        :func:`tinyattn.argmin`."""
        return _ops.argmin(self, dim, keepdim)

    def bmm(self, mat2):
        """Batched product of ``(b, n, m)`` and ``(b, m, p)`` tensors (no broadcasting):
        :func:`tinyattn.bmm`."""
        return _ops.bmm(self, mat2)

    def chunk(self, chunks, dim=0):
        """Split into ``chunks`` pieces of size ``ceil(n / chunks)`` along ``dim``:
        :func:`tinyattn.chunk`."""
        return _ops.chunk(self, chunks, dim)

    def clamp(self, min=None, max=None):
        """Elementwise ``min(max(x, min), max)``; at least one bound must be given:
        :func:`tinyattn.clamp`."""
        return _ops.clamp(self, min, max)

    def clone(self):
        """A copy of ``input`` (differentiable: the gradient passes through unchanged):
        :func:`tinyattn.clone`."""
        return _ops.clone(self)

    def contiguous(self):
        """``input`` itself when C-contiguous, else a C-ordered copy:
        :func:`tinyattn.contiguous`."""
        return _ops.contiguous(self)

    def cos(self):
        """Elementwise cosine: :func:`tinyattn.cos`."""
        return _ops.cos(self)

    def cumprod(self, dim, dtype=None):
        """Running products along ``dim`` (bool and integers multiply in int64), as
        ``torch.cumprod``: :func:`tinyattn.cumprod`."""
        return _ops.cumprod(self, dim, dtype)

    def cumsum(self, dim, dtype=None):
        """Running sums along ``dim`` (bool and integers sum in int64), as ``torch.cumsum``:
        :func:`tinyattn.cumsum`."""
        return _ops.cumsum(self, dim, dtype)

    def div(self, other, rounding_mode=None):
        """Elementwise true division (integers give floats), or ``'floor'``/``'trunc'`` rounding:
        :func:`tinyattn.div`."""
        return _ops.div(self, other, rounding_mode)

    def dot(self, other):
        """The inner product of two 1-D tensors of the same size: :func:`tinyattn.dot`."""
        return _ops.dot(self, other)

    def outer(self, vec2):
        """The outer product ``self[i] · vec2[j]`` of two 1-D tensors: :func:`tinyattn.outer`."""
        return _ops.outer(self, vec2)

    def eq(self, other):
        """Elementwise ``input == other``: :func:`tinyattn.eq`."""
        return _ops.eq(self, other)

    def equal(self, other):
        """Whether the two tensors have the same shape and elements: :func:`tinyattn.equal`."""
        return _ops.equal(self, other)

    def erf(self):
        """Elementwise error function: :func:`tinyattn.erf`."""
        return _ops.erf(self)

    def exp(self):
        """Elementwise ``e^x``: :func:`tinyattn.exp`."""
        return _ops.exp(self)

    def expand(self, *sizes):
        """``input`` broadcast to ``sizes`` without copying; ``-1`` keeps a dim:
        :func:`tinyattn.expand`."""
        return _ops.expand(self, *sizes)

    def expand_as(self, other):
        """``input`` expanded to ``other``'s shape: :func:`tinyattn.expand_as`."""
        return _ops.expand_as(self, other)

    def flatten(self, start_dim=0, end_dim=-1):
        """``input`` with dims ``start_dim..end_dim`` merged into one: :func:`tinyattn.flatten`."""
        return _ops.flatten(self, start_dim, end_dim)

    def flip(self, dims):
        """``input`` reversed along ``dims``: :func:`tinyattn.flip`."""
        return _ops.flip(self, dims)

    def gather(self, dim, index):
        """``out[i][j][k] = input[index[i][j][k]][j][k]`` for ``dim=0`` (likewise for other dims):
        :func:`tinyattn.gather`."""
        return _ops.gather(self, dim, index)

    def ge(self, other):
        """Elementwise ``input >= other``: :func:`tinyattn.ge`."""
        return _ops.ge(self, other)

    def gt(self, other):
        """Elementwise ``input > other``: :func:`tinyattn.gt`."""
        return _ops.gt(self, other)

    def index_select(self, dim, index):
        """The entries at the integer ``index`` (1-D) along ``dim``, as ``torch.index_select``:
        :func:`tinyattn.index_select`."""
        return _ops.index_select(self, dim, index)

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """Elementwise ``|input − other| <= atol + rtol·|other|``: :func:`tinyattn.isclose`."""
        return _ops.isclose(self, other, rtol, atol, equal_nan)

    def isfinite(self):
        """Elementwise: neither NaN nor infinite: :func:`tinyattn.isfinite`."""
        return _ops.isfinite(self)

    def isinf(self):
        """Elementwise ``|x| == inf``: :func:`tinyattn.isinf`."""
        return _ops.isinf(self)

    def isnan(self):
        """Elementwise ``x != x``: :func:`tinyattn.isnan`."""
        return _ops.isnan(self)

    def le(self, other):
        """Elementwise ``input <= other``: :func:`tinyattn.le`."""
        return _ops.le(self, other)

    def log(self):
        """Elementwise natural log (``-inf`` at 0 and NaN below, as numpy and PyTorch):
        :func:`tinyattn.log`."""
        return _ops.log(self)

    def log_softmax(self, dim=None, dtype=None):
        """``log(softmax(x))`` along ``dim``, computed without overflow:
        :func:`tinyattn.log_softmax`."""
        return _ops.log_softmax(self, dim, dtype)

    def logical_not(self):
        """Elementwise ``not`` (nonzero counts as True): :func:`tinyattn.logical_not`."""
        return _ops.logical_not(self)

    def logsumexp(self, dim, keepdim=False):
        """``log Σ_dim e^x`` computed without overflow (as ``max + log Σ e^(x − max)``):
        :func:`tinyattn.logsumexp`."""
        return _ops.logsumexp(self, dim, keepdim)

    def lt(self, other):
        """Elementwise ``input < other``: :func:`tinyattn.lt`."""
        return _ops.lt(self, other)

    def masked_fill(self, mask, value):
        """``input`` with ``value`` written where ``mask`` is True (the two broadcast together; the:
        :func:`tinyattn.masked_fill`."""
        return _ops.masked_fill(self, mask, value)

    def matmul(self, other):
        """Matrix product ``input @ other`` with numpy's rules for vectors, batches and
        broadcasting: :func:`tinyattn.matmul`."""
        return _ops.matmul(self, other)

    def max(self, dim=None, keepdim=False):
        """``max()``: the largest element (ties share the gradient); ``max(dim)``: the named tuple:
        :func:`tinyattn.max`."""
        return _ops.max(self, dim, keepdim)

    def maximum(self, other):
        """Elementwise maximum (NaN if either is NaN): :func:`tinyattn.maximum`."""
        return _ops.maximum(self, other)

    def mean(self, dim=None, keepdim=False, dtype=None):
        """Mean over ``dim`` (all dims when None); only for floating point tensors, as PyTorch:
        :func:`tinyattn.mean`."""
        return _ops.mean(self, dim, keepdim, dtype)

    def min(self, dim=None, keepdim=False):
        """The counterpart of :func:`max` for minima: :func:`tinyattn.min`."""
        return _ops.min(self, dim, keepdim)

    def minimum(self, other):
        """Elementwise minimum (NaN if either is NaN): :func:`tinyattn.minimum`."""
        return _ops.minimum(self, other)

    def mm(self, mat2):
        """The product of two matrices (2-D only): :func:`tinyattn.mm`."""
        return _ops.mm(self, mat2)

    def movedim(self, source, destination):
        """``input`` with dim ``source`` moved to position ``destination``:
        :func:`tinyattn.movedim`."""
        return _ops.movedim(self, source, destination)

    def mul(self, other):
        """Elementwise ``input * other`` with broadcasting: :func:`tinyattn.mul`."""
        return _ops.mul(self, other)

    def ne(self, other):
        """Elementwise ``input != other``: :func:`tinyattn.ne`."""
        return _ops.ne(self, other)

    def neg(self):
        """Elementwise ``-input``: :func:`tinyattn.neg`."""
        return _ops.neg(self)

    def permute(self, *dims):
        """``input`` with its axes in the order ``dims``: :func:`tinyattn.permute`."""
        return _ops.permute(self, *dims)

    def pow(self, exponent):
        """Elementwise ``input ** exponent``; a Python-number exponent is a constant:
        :func:`tinyattn.pow`."""
        return _ops.pow(self, exponent)

    def relu(self):
        """Elementwise ``max(x, 0)``: :func:`tinyattn.relu`."""
        return _ops.relu(self)

    def repeat(self, *sizes):
        """``input`` tiled ``sizes[d]`` times along each dim (new leading dims where ``sizes`` is:
        :func:`tinyattn.repeat`."""
        return _ops.repeat(self, *sizes)

    def repeat_interleave(self, repeats, dim=None):
        """Each element (or slice along ``dim``) repeated ``repeats`` times in place::
        :func:`tinyattn.repeat_interleave`."""
        return _ops.repeat_interleave(self, repeats, dim)

    def reshape(self, *shape):
        """``input`` with a new shape of the same number of elements; one dim may be ``-1``:
        :func:`tinyattn.reshape`."""
        return _ops.reshape(self, *shape)

    def roll(self, shifts, dims=None):
        """``input`` shifted cyclically by ``shifts`` along ``dims``: :func:`tinyattn.roll`."""
        return _ops.roll(self, shifts, dims)

    def rsqrt(self):
        """Elementwise ``1 / √x``: :func:`tinyattn.rsqrt`."""
        return _ops.rsqrt(self)

    def sigmoid(self):
        """Elementwise logistic sigmoid: :func:`tinyattn.sigmoid`."""
        return _ops.sigmoid(self)

    def sin(self):
        """Elementwise sine: :func:`tinyattn.sin`."""
        return _ops.sin(self)

    def softmax(self, dim=None, dtype=None):
        """Softmax along ``dim``: non-negative, sums to 1 (0 for a fully ``-inf`` row):
        :func:`tinyattn.softmax`."""
        return _ops.softmax(self, dim, dtype)

    def split(self, split_size_or_sections, dim=0):
        """Split along ``dim`` into pieces of a size (the last may be smaller) or of given sizes:
        :func:`tinyattn.split`."""
        return _ops.split(self, split_size_or_sections, dim)

    def sqrt(self):
        """Elementwise square root: :func:`tinyattn.sqrt`."""
        return _ops.sqrt(self)

    def squeeze(self, dim=None):
        """``input`` without axes of size 1 (only those among ``dim``, when given, as PyTorch):
        :func:`tinyattn.squeeze`."""
        return _ops.squeeze(self, dim)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """Standard deviation: ``sqrt(var(...))`` with the same arguments: :func:`tinyattn.std`."""
        return _ops.std(self, dim, unbiased, keepdim, correction=correction)

    def sub(self, other, alpha=1):
        """Elementwise ``input - alpha · other`` with broadcasting: :func:`tinyattn.sub`."""
        return _ops.sub(self, other, alpha)

    def sum(self, dim=None, keepdim=False, dtype=None):
        """Sum over ``dim`` (all dims when None); bool and integer tensors sum in int64:
        :func:`tinyattn.sum`."""
        return _ops.sum(self, dim, keepdim, dtype)

    def tanh(self):
        """Elementwise hyperbolic tangent: :func:`tinyattn.tanh`."""
        return _ops.tanh(self)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        """The ``k`` largest (or smallest) entries along ``dim``, with their indices; the values:
        :func:`tinyattn.topk`."""
        return _ops.topk(self, k, dim, largest, sorted)

    def t(self):
        """The transpose of a matrix (a 0-D or 1-D tensor as it is): :func:`tinyattn.t`."""
        return _ops.t(self)

    def transpose(self, dim0, dim1):
        """``input`` with axes ``dim0`` and ``dim1`` swapped: :func:`tinyattn.transpose`."""
        return _ops.transpose(self, dim0, dim1)

    def tril(self, diagonal=0):
        """The lower triangle of the last two dims (elements with ``j - i <= diagonal``):
        :func:`tinyattn.tril`."""
        return _ops.tril(self, diagonal)

    def triu(self, diagonal=0):
        """The upper triangle of the last two dims (elements with ``j - i >= diagonal``):
        :func:`tinyattn.triu`."""
        return _ops.triu(self, diagonal)

    def unbind(self, dim=0):
        """The slices of ``input`` along ``dim``, without that dim: :func:`tinyattn.unbind`."""
        return _ops.unbind(self, dim)

    def unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
        """The distinct elements (slices along ``dim``), ascending: :func:`tinyattn.unique`."""
        return _ops.unique(self, sorted, return_inverse, return_counts, dim)

    def unflatten(self, dim, sizes):
        """``input`` with dim ``dim`` split into ``sizes`` (one may be -1):
        :func:`tinyattn.unflatten`."""
        return _ops.unflatten(self, dim, sizes)

    def unsqueeze(self, dim):
        """``input`` with a new axis of size 1 inserted at ``dim``: :func:`tinyattn.unsqueeze`."""
        return _ops.unsqueeze(self, dim)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """Variance over ``dim``: ``Σ (x − mean)² / (N − correction)``: :func:`tinyattn.var`."""
        return _ops.var(self, dim, unbiased, keepdim, correction=correction)

    def view(self, *shape):
        """``reshape`` that never copies: a non-contiguous layout that cannot be viewed is an error:
        :func:`tinyattn.view`."""
        return _ops.view(self, *shape)

    def abs_(self):
        """In place: writes ``abs(self, ...)`` into this tensor and returns it."""
        return self._in_place("abs_", _ops.abs)

    def add_(self, other, alpha=1):
        """In place: writes ``add(self, ...)`` into this tensor and returns it."""
        return self._in_place("add_", _ops.add, other, alpha)

    def clamp_(self, min=None, max=None):
        """In place: writes ``clamp(self, ...)`` into this tensor and returns it."""
        return self._in_place("clamp_", _ops.clamp, min, max)

    def cos_(self):
        """In place: writes ``cos(self, ...)`` into this tensor and returns it."""
        return self._in_place("cos_", _ops.cos)

    def div_(self, other, rounding_mode=None):
        """In place: writes ``div(self, ...)`` into this tensor and returns it."""
        return self._in_place("div_", _ops.div, other, rounding_mode)

    def exp_(self):
        """In place: writes ``exp(self, ...)`` into this tensor and returns it."""
        return self._in_place("exp_", _ops.exp)

    def log_(self):
        """In place: writes ``log(self, ...)`` into this tensor and returns it."""
        return self._in_place("log_", _ops.log)

    def masked_fill_(self, mask, value):
        """In place: writes ``masked_fill(self, ...)`` into this tensor and returns it."""
        return self._in_place("masked_fill_", _ops.masked_fill, mask, value)

    def mul_(self, other):
        """In place: writes ``mul(self, ...)`` into this tensor and returns it."""
        return self._in_place("mul_", _ops.mul, other)

    def neg_(self):
        """In place: writes ``neg(self, ...)`` into this tensor and returns it."""
        return self._in_place("neg_", _ops.neg)

    def pow_(self, exponent):
        """In place: writes ``pow(self, ...)`` into this tensor and returns it."""
        return self._in_place("pow_", _ops.pow, exponent)

    def relu_(self):
        """In place: writes ``relu(self, ...)`` into this tensor and returns it."""
        return self._in_place("relu_", _ops.relu)

    def sigmoid_(self):
        """In place: writes ``sigmoid(self, ...)`` into this tensor and returns it."""
        return self._in_place("sigmoid_", _ops.sigmoid)

    def sin_(self):
        """In place: writes ``sin(self, ...)`` into this tensor and returns it."""
        return self._in_place("sin_", _ops.sin)

    def sqrt_(self):
        """In place: writes ``sqrt(self, ...)`` into this tensor and returns it."""
        return self._in_place("sqrt_", _ops.sqrt)

    def sub_(self, other, alpha=1):
        """In place: writes ``sub(self, ...)`` into this tensor and returns it."""
        return self._in_place("sub_", _ops.sub, other, alpha)

    def tanh_(self):
        """In place: writes ``tanh(self, ...)`` into this tensor and returns it."""
        return self._in_place("tanh_", _ops.tanh)

    def tril_(self, diagonal=0):
        """In place: writes ``tril(self, ...)`` into this tensor and returns it."""
        return self._in_place("tril_", _ops.tril, diagonal)

    def triu_(self, diagonal=0):
        """In place: writes ``triu(self, ...)`` into this tensor and returns it."""
        return self._in_place("triu_", _ops.triu, diagonal)

    def prod(self, dim=None, keepdim=False, dtype=None):
        """The product of all elements, or along ``dim``: :func:`tinyattn.prod`."""
        return _ops.prod(self, dim, keepdim, dtype)

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        """The ``p``-norm (Frobenius by default) over ``dim``: :func:`tinyattn.norm`."""
        return _ops.norm(self, p, dim, keepdim, dtype=dtype)

    def expm1(self):
        """``e^x − 1``: :func:`tinyattn.expm1`."""
        return _ops.expm1(self)

    def log1p(self):
        """``ln(1 + x)``: :func:`tinyattn.log1p`."""
        return _ops.log1p(self)

    def square(self):
        """``x²``: :func:`tinyattn.square`."""
        return _ops.square(self)

    def reciprocal(self):
        """``1 / x``: :func:`tinyattn.reciprocal`."""
        return _ops.reciprocal(self)

    def sign(self):
        """−1, 0 or 1: :func:`tinyattn.sign`."""
        return _ops.sign(self)

    def floor(self):
        """Round down: :func:`tinyattn.floor`."""
        return _ops.floor(self)

    def ceil(self):
        """Round up: :func:`tinyattn.ceil`."""
        return _ops.ceil(self)

    def round(self, decimals=0):
        """Round half to even: :func:`tinyattn.round`."""
        return _ops.round(self, decimals)

    def trunc(self):
        """Round toward zero: :func:`tinyattn.trunc`."""
        return _ops.trunc(self)

    def sort(self, dim=-1, descending=False, stable=False):
        """The values sorted along ``dim`` and their int64 indices (stable; NaN as the
        largest): :func:`tinyattn.sort`."""
        return _ops.sort(self, dim, descending, stable)

    def argsort(self, dim=-1, descending=False, stable=False):
        """The int64 indices that sort along ``dim``: :func:`tinyattn.argsort`."""
        return _ops.argsort(self, dim, descending, stable)

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        """A copy with ``src`` (a tensor or a number) written at ``index`` along ``dim``:
        :func:`tinyattn.scatter`."""
        return _ops.scatter(self, dim, index, src, value=value, reduce=reduce)

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        """In place: writes ``scatter(self, ...)`` into this tensor and returns it."""
        return self._in_place("scatter_", _ops.scatter, dim, index, src, value=value,
                              reduce=reduce)

    def scatter_add(self, dim, index, src):
        """A copy with ``src`` added at ``index`` along ``dim`` (repeats summed):
        :func:`tinyattn.scatter_add`."""
        return _ops.scatter_add(self, dim, index, src)

    def scatter_add_(self, dim, index, src):
        """In place: writes ``scatter_add(self, ...)`` into this tensor and returns it."""
        return self._in_place("scatter_add_", _ops.scatter_add, dim, index, src)

    def index_fill(self, dim, index, value):
        """A copy with ``value`` written at the positions ``index`` along ``dim``:
        :func:`tinyattn.index_fill`."""
        return _ops.index_fill(self, dim, index, value)

    def index_fill_(self, dim, index, value):
        """In place: writes ``index_fill(self, ...)`` into this tensor and returns it."""
        return self._in_place("index_fill_", _ops.index_fill, dim, index, value)

    def nonzero(self, as_tuple=False):
        """The indices of the nonzero elements, ``(count, ndim)`` int64 (or one tensor per dim
        with ``as_tuple``): :func:`tinyattn.nonzero`."""
        return _ops.nonzero(self, as_tuple)

    def clip(self, min=None, max=None):
        """PyTorch's other name for :meth:`clamp`."""
        return _ops.clamp(self, min, max)

    def clip_(self, min=None, max=None):
        """PyTorch's other name for :meth:`clamp_`."""
        return self.clamp_(min, max)

    def where(self, condition, other):
        """``ta.where(condition, self, other)`` (PyTorch's argument order for the method)."""
        return _ops.where(condition, self, other)

    def view_as(self, other):
        """This tensor viewed with ``other``'s shape."""
        return _ops.view(self, other.shape)

    def reshape_as(self, other):
        """This tensor reshaped to ``other``'s shape."""
        return _ops.reshape(self, other.shape)

    def fill_(self, value):
        """Write ``value`` everywhere (a recorded op: the old value gets no gradient)."""
        return self._in_place("fill_", _ops.index_put, (Ellipsis,), value)

    def zero_(self):
        """Write zeros everywhere."""
        return self.fill_(0)

    def copy_(self, src, non_blocking=False):
        """Write ``src`` (broadcast, cast to this dtype) into this tensor; the gradient goes to
        ``src``."""
        return self._in_place("copy_", _ops.index_put, (Ellipsis,), src)

    # ---- dtypes and devices ------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other)`` (its dtype).

        The only device is the CPU: another one is a clear error.
        """
        dtype = kwargs.pop("dtype", None)
        check_device(kwargs.pop("device", None), "to")
        copy = kwargs.pop("copy", False)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to: unexpected arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, TensorMethods):
                dtype = arg.dtype
            elif isinstance(arg, str) or type(arg).__name__ == "device":
                check_device(arg, "to")
            elif arg is not None:
                dtype = arg
        result = self if dtype is None else _ops.cast(self, dtype)
        return _ops.clone(result) if copy and result is self else result

    def type(self, dtype=None):
        """With no argument the type name (``'tinyattn.FloatTensor'``); else ``to(dtype)``,
        where ``dtype`` may also be a legacy type (``torch.LongTensor``) or its name
        (``'torch.LongTensor'``), as in PyTorch."""
        if dtype is None:
            return f"tinyattn.{_TYPE_NAMES[self.dtype.name]}Tensor"
        from .creation import TYPED_TENSORS

        if isinstance(dtype, str) and dtype.rpartition(".")[2] in TYPED_TENSORS:
            dtype = TYPED_TENSORS[dtype.rpartition(".")[2]]
        if isinstance(dtype, type) and dtype.__name__ in TYPED_TENSORS:
            dtype = TYPED_TENSORS[dtype.__name__].dtype
        return _ops.cast(self, dtype)

    def type_as(self, other):
        """This tensor cast to ``other``'s dtype."""
        return _ops.cast(self, other.dtype)

    def float(self):
        """This tensor as float32."""
        return _ops.cast(self, dtypes.float32)

    def double(self):
        """This tensor as float64."""
        return _ops.cast(self, dtypes.float64)

    def half(self):
        """This tensor as float16 (elementwise ops compute in it; matmul, softmax and the other
        kernels take float32 and float64 only)."""
        return _ops.cast(self, dtypes.float16)

    def bfloat16(self):
        """An error: tinyattn has no bfloat16 storage (see :mod:`tinyattn.dtypes`)."""
        raise dtypes.bfloat16.error("Tensor.bfloat16")

    def long(self):
        """This tensor as int64."""
        return _ops.cast(self, dtypes.int64)

    def int(self):
        """This tensor as int32."""
        return _ops.cast(self, dtypes.int32)

    def bool(self):
        """This tensor as bool."""
        return _ops.cast(self, dtypes.bool_)

    def is_floating_point(self):
        """Whether the dtype is a floating point one."""
        return dtypes.is_floating_point(self)

    def cpu(self):
        """This tensor (the CPU is the only device)."""
        return self

    def cuda(self, *args, **kwargs):
        """An error: tinyattn runs on the CPU only."""
        check_device("cuda", "cuda")
        return self

    # ---- memory layout -----------------------------------------------------------------------
    def is_contiguous(self):
        """Whether the memory is C-contiguous."""
        return bool(self._data.flags.c_contiguous)

    def stride(self, dim=None):
        """Elements to step in memory per index of each dim (or of ``dim``)."""
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        return strides if dim is None else strides[normalize_dim("stride", dim, self.ndim)]

    # ---- reductions without gradient ---------------------------------------------------------
    def all(self, dim=None, keepdim=False):
        """Whether every element is true (along ``dim``)."""
        axes = normalize_dims("all", dim, self.ndim)
        return type(self)._from_op(np.all(self._data, axis=axes, keepdims=keepdim), None)

    def any(self, dim=None, keepdim=False):
        """Whether any element is true (along ``dim``)."""
        axes = normalize_dims("any", dim, self.ndim)
        return type(self)._from_op(np.any(self._data, axis=axes, keepdims=keepdim), None)

    # ---- filling in place from the generator ---------------------------------------------------
    def _fill_random(self, values):
        self._check_inplace("random fill")
        self._data[...] = values.astype(self.dtype)
        self._version.value += 1
        return self

    def uniform_(self, a=0.0, b=1.0):
        """Fill with draws from U(a, b) (tinyattn's generator)."""
        return self._fill_random(generator().uniform(a, b, self.shape))

    def normal_(self, mean=0.0, std=1.0):
        """Fill with draws from N(mean, std²) (tinyattn's generator)."""
        return self._fill_random(generator().normal(mean, std, self.shape))

    # ---- new tensors like this one -------------------------------------------------------------
    def _new(self, array, requires_grad):
        return type(self)(array).requires_grad_(requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        """Zeros of ``size``, with this tensor's dtype unless ``dtype`` is given."""
        check_device(device, "new_zeros")
        return self._new(np.zeros(shape_arg("new_zeros", size), self._dtype_or(dtype)),
                         requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        """Ones of ``size``, with this tensor's dtype unless ``dtype`` is given."""
        check_device(device, "new_ones")
        return self._new(np.ones(shape_arg("new_ones", size), self._dtype_or(dtype)),
                         requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        """A tensor of ``size`` (filled with zeros), with this tensor's dtype unless ``dtype``
        is given."""
        check_device(device, "new_empty")
        return self._new(np.zeros(shape_arg("new_empty", size), self._dtype_or(dtype)),
                         requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        """``fill_value`` everywhere in a tensor of ``size``."""
        check_device(device, "new_full")
        return self._new(np.full(tuple(size), fill_value, self._dtype_or(dtype)), requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A new tensor of ``data`` (copied), with this tensor's dtype unless ``dtype`` is
        given."""
        check_device(device, "new_tensor")
        return self._new(np.array(data, dtype=self._dtype_or(dtype)), requires_grad)

    def _dtype_or(self, dtype):
        return dtypes.as_dtype(dtype) if dtype is not None else self.dtype

    # ---- Jupyter -----------------------------------------------------------------------------
    def _repr_html_(self):
        """The tensor as an HTML table, which Jupyter shows (``repr`` stays the plain text)."""
        from .tables import tensor_html

        return tensor_html(self)
