"""tinyattn: a small autograd framework on numpy + numba for studying attention.

>>> import tinyattn as ta
>>> x = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> y = (x @ x).softmax(dim=-1)
>>> y.backward(ta.ones(2, 2))
>>> x.grad.shape
(2, 2)
"""

from . import functional, inspect, memory, models, nn, optim
from . import functional as F
from .autograd import detect_anomaly, enable_grad, is_grad_enabled, no_grad
from .creation import arange, full, ones, ones_like, rand, randn, tensor, zeros, zeros_like
from .gradcheck import GradcheckError, gradcheck
from .models import TransformerLM
from .ops import (
    cat,
    exp,
    log,
    log_softmax,
    matmul,
    relu,
    sigmoid,
    softmax,
    sqrt,
    stack,
    tanh,
    tril,
    triu,
    where,
)
from .random import manual_seed
from .tensor import Tensor, bool_, float32, float64, int64

__version__ = "0.1.0"

__all__ = [
    "F", "GradcheckError", "Tensor", "TransformerLM", "arange", "bool_", "cat", "detect_anomaly",
    "enable_grad", "exp", "float32", "float64", "full", "functional", "gradcheck", "inspect",
    "int64", "is_grad_enabled", "log", "log_softmax", "manual_seed", "matmul", "memory", "models",
    "nn", "no_grad", "ones", "ones_like", "optim", "rand", "randn", "relu", "sigmoid", "softmax",
    "sqrt", "stack", "tanh", "tensor", "tril", "triu", "where", "zeros", "zeros_like",
]
