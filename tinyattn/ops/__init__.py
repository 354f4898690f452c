"""Every differentiable primitive: one ``Function`` per op, forward beside backward (and its
differentiable form), each with the math in its docstring, plus the function that checks an
op's inputs and applies it to tensors.

=====================  ==========================================================
file                   ops
=====================  ==========================================================
``arithmetic.py``      Add, Sub, Mul, Div, Neg, Pow, PowScalar
``unary.py``           Exp, Log, Sqrt, Rsqrt, Tanh (TanhBackward), Sigmoid
                       (SigmoidBackward), Relu, Abs, Sin, Cos, Erf, Clamp, Cast
``compare.py``         comparisons, logic, Maximum (maximum/minimum)
``reduce.py``          Sum, Mean, Var (std), Prod, Extremum (amax/amin, max/min),
                       LogSumExp, CumSum, CumProd, Norm (norm, vector and matrix norms)
``shape.py``           Reshape, Permute, Expand, Tile (repeat), Flip, Roll, Copy
                       (clone/contiguous)
``index.py``           GetItem, IndexScatter, IndexPut (setitem), Cat, Stack, Scatter
                       (scatter/scatter_add), IndexFill, Sort (sort/argsort, topk),
                       Unique
``masking.py``         Where, MaskedFill, Triangle (triu/tril)
``matmul.py``          MatMul (matmul, mm, bmm, dot), and outer (a broadcast Mul)
``softmax.py``         Softmax, LogSoftmax
``linear.py``          Linear
``activation.py``      Gelu
``dropout.py``         Dropout
``normalization.py``   LayerNorm
``loss.py``            CrossEntropy (and BinaryCrossEntropy, in
                       ``binary_cross_entropy.py``)
``embedding.py``       Embedding
``attention.py``       FusedAttention, and the composed attention path
=====================  ==========================================================
"""

from .arithmetic import add, div, floor_divide, mul, neg, pow, remainder, sub
from .compare import (
    allclose,
    eq,
    equal,
    ge,
    gt,
    isclose,
    isfinite,
    isinf,
    isnan,
    le,
    logical_and,
    logical_not,
    logical_op,
    logical_or,
    lt,
    maximum,
    minimum,
    ne,
)
from .index import (
    argsort,
    cat,
    gather,
    getitem,
    index_fill,
    index_put,
    index_select,
    nonzero,
    scatter,
    scatter_add,
    setitem,
    sort,
    stack,
    topk,
    unique,
)
from .masking import masked_fill, tril, triu, where
from .matmul import bmm, dot, matmul, mm, outer
from .reduce import (
    amax,
    amin,
    argmax,
    argmin,
    bincount,
    cumprod,
    cumsum,
    logsumexp,
    max,
    mean,
    min,
    norm,
    prod,
    std,
    sum,
    var,
)
from .shape import (
    chunk,
    clone,
    contiguous,
    expand,
    expand_as,
    flatten,
    flip,
    movedim,
    permute,
    repeat,
    repeat_interleave,
    reshape,
    roll,
    split,
    squeeze,
    t,
    transpose,
    unbind,
    unflatten,
    unsqueeze,
    view,
)
from .softmax import log_softmax, softmax
from .unary import (
    abs,
    cast,
    ceil,
    clamp,
    cos,
    erf,
    exp,
    expm1,
    floor,
    log,
    log1p,
    reciprocal,
    relu,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    tanh,
    trunc,
)

__all__ = [
    "abs", "add", "allclose", "amax", "amin", "argmax", "argmin", "bincount", "bmm", "cast", "cat",
    "ceil", "chunk", "clamp", "clone", "contiguous", "cos", "cumprod", "cumsum", "div", "dot", "eq",
    "equal", "erf", "exp", "expand", "expand_as", "expm1", "flatten", "flip", "floor",
    "floor_divide", "gather", "ge", "getitem", "gt", "index_put", "index_select", "isclose",
    "isfinite", "isinf", "isnan", "le", "log", "log1p", "log_softmax", "logical_and", "logical_not",
    "logical_op", "logical_or", "logsumexp", "lt", "masked_fill", "matmul", "max", "maximum",
    "mean", "min", "minimum", "mm", "movedim", "mul", "ne", "neg", "norm", "permute", "pow", "prod",
    "reciprocal", "relu", "remainder", "repeat", "repeat_interleave", "reshape", "roll", "round",
    "rsqrt", "setitem", "sigmoid", "sign", "sin", "softmax", "split", "sqrt", "square", "squeeze",
    "stack", "std", "sub", "sum", "t", "tanh", "topk", "transpose", "tril", "triu", "trunc",
    "unbind", "unflatten", "unsqueeze", "var", "view", "where", "argsort", "index_fill", "nonzero",
    "outer", "scatter", "scatter_add", "sort", "unique",
]
