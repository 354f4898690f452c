"""tinyattn: a small autograd framework on numpy + numba for studying attention.

Its names, signatures and semantics are PyTorch's wherever PyTorch has the thing, so that
attention code written for PyTorch runs with ``import tinyattn as torch``.

>>> import tinyattn as ta
>>> x = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> y = (x @ x).softmax(dim=-1)
>>> y.backward(ta.ones(2, 2))
>>> x.grad.shape
(2, 2)
"""

import math as _math

from . import (
    amp,
    autograd,
    backends,
    compiler,
    cuda,
    distributed,
    dtypes,
    functional,
    inspect,
    interop,
    linalg,
    memory,
    models,
    nn,
    optim,
    testing,
    utils,
)
from . import functional as F  # noqa: N812
from .amp import autocast
from .autograd import (
    detect_anomaly,
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .backends import get_float32_matmul_precision, set_float32_matmul_precision
from .compiler import compile
from .creation import (
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    linspace,
    multinomial,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .devices import device
from .dtypes import (
    bfloat16,
    bool_,
    finfo,
    float16,
    float32,
    float64,
    get_default_dtype,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    is_floating_point,
    promote_types,
    result_type,
    set_default_dtype,
    uint8,
)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .kernels.parallel import get_num_threads, set_num_threads
from .missing import missing as _missing
from .models import TransformerLM
from .ops import (
    abs,
    add,
    allclose,
    amax,
    amin,
    argmax,
    argmin,
    argsort,
    bincount,
    bmm,
    cat,
    ceil,
    chunk,
    clamp,
    clone,
    cos,
    cumprod,
    cumsum,
    div,
    dot,
    eq,
    equal,
    erf,
    exp,
    expm1,
    flatten,
    flip,
    floor,
    gather,
    index_fill,
    index_select,
    isclose,
    isfinite,
    isinf,
    isnan,
    log,
    log1p,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    logsumexp,
    masked_fill,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mm,
    movedim,
    mul,
    nonzero,
    norm,
    outer,
    permute,
    pow,
    prod,
    reciprocal,
    relu,
    repeat_interleave,
    reshape,
    roll,
    round,
    rsqrt,
    scatter,
    scatter_add,
    sigmoid,
    sign,
    sin,
    softmax,
    sort,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    std,
    sub,
    sum,
    t,
    tanh,
    topk,
    transpose,
    tril,
    triu,
    trunc,
    unbind,
    unique,
    unsqueeze,
    var,
    where,
)
from .printing import set_printoptions
from .random import Generator, manual_seed, seed
from .serialization import load, save
from .tensor import Size, Tensor, from_numpy

autograd.gradcheck, autograd.gradgradcheck = gradcheck, gradgradcheck  # torch.autograd's names

# PyTorch's other names for the dtypes, and its constants
float = float32  # noqa: A001
double = float64
half = float16
int = int32  # noqa: A001
long = int64
short = int16
bool = bool_  # noqa: A001
pi = _math.pi
e = _math.e
inf = _math.inf
nan = _math.nan
clip = clamp
concat = concatenate = cat
swapaxes = transpose
__version__ = "0.2.0"

__all__ = [
    "abs", "add", "allclose", "amax", "amin", "arange", "argmax", "argmin", "argsort", "as_tensor",
    "autograd", "bincount", "bmm", "bool", "bool_", "cat", "chunk", "clamp", "clip", "clone",
    "concat", "concatenate", "cos", "cuda", "cumprod", "cumsum", "detect_anomaly", "device", "div",
    "dot", "double", "dtypes", "e", "empty", "empty_like", "enable_grad", "eq", "equal", "erf",
    "exp", "eye", "F", "flatten", "flip", "float", "float32", "float64", "from_numpy", "full",
    "full_like", "functional", "gather", "Generator", "get_default_dtype", "get_num_threads",
    "gradcheck", "GradcheckError", "gradgradcheck", "index_fill", "index_select", "inf",
    "inference_mode", "inspect", "int", "int16", "int32", "int64", "int8", "interop",
    "is_floating_point", "is_grad_enabled", "isclose", "isfinite", "isinf", "isnan", "linalg",
    "linspace", "load", "log", "log_softmax", "logical_and", "logical_not", "logical_or",
    "logsumexp", "long", "manual_seed", "masked_fill", "matmul", "max", "maximum", "mean", "memory",
    "min", "minimum", "mm", "models", "movedim", "mul", "multinomial", "nan", "nn", "no_grad",
    "nonzero", "norm", "ones", "ones_like", "optim", "permute", "pi", "pow", "prod",
    "promote_types", "rand", "rand_like", "randint", "randn", "randn_like", "randperm", "relu",
    "repeat_interleave", "reshape", "result_type", "roll", "rsqrt", "save", "scatter",
    "scatter_add", "seed", "set_grad_enabled", "set_num_threads", "set_printoptions", "short",
    "sigmoid", "sin", "Size", "softmax", "sort", "split", "sqrt", "squeeze", "stack", "std", "sub",
    "sum", "swapaxes", "t", "tanh", "Tensor", "tensor", "topk", "TransformerLM", "transpose",
    "tril", "triu", "uint8", "unbind", "unique", "unsqueeze", "utils", "var", "where", "zeros",
    "zeros_like",
]
# elementwise functions and the outer product that PyTorch also offers at the top level
__all__ += ["ceil", "expm1", "floor", "log1p", "outer", "reciprocal", "round", "sign",
            "square", "trunc"]
# PyTorch's legacy typed constructors (torch.LongTensor([[1, 2]]), isinstance(x, FloatTensor))
__all__ += ["BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor",
            "HalfTensor", "IntTensor", "LongTensor", "ShortTensor"]
# what training scripts touch on a CPU (tinyattn.run runs them unchanged)
__all__ += [
    "amp", "autocast", "backends", "bfloat16", "compile", "compiler", "distributed", "finfo",
    "float16", "get_float32_matmul_precision", "half", "iinfo", "interop", "memory",
    "set_default_dtype",
    "set_float32_matmul_precision", "testing",
]


def __getattr__(name: str) -> object:
    """A PyTorch name that tinyattn does not have: say so clearly, naming the caller's line
    (an ``ImportError`` inside ``from torch import name``)."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(f"torch.{name}", "it covers what attention and small-GPT code uses (see "
                                    "'What runs unchanged' in the README)")
