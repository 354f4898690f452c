"""Primitive differentiable ops: each a ``Function`` with forward and backward side by side,
plus the function that validates its inputs and applies it to tensors."""

from .arithmetic import add, div, mul, neg, pow, sub
from .index import cat, chunk, getitem, masked_fill, split, stack, tril, triu, where
from .linalg import matmul
from .reduce import max, mean, sum, var
from .shape import contiguous, expand, permute, reshape, squeeze, transpose, unsqueeze
from .softmax import log_softmax, softmax
from .unary import cast, exp, log, relu, sigmoid, sqrt, tanh
from .validate import normalize_dim

__all__ = [
    "add", "cast", "cat", "chunk", "contiguous", "div", "exp", "expand", "getitem", "log",
    "log_softmax", "masked_fill", "matmul", "max", "mean", "mul", "neg", "normalize_dim",
    "permute", "pow", "relu", "reshape", "sigmoid", "softmax", "split", "sqrt", "squeeze",
    "stack", "sub", "sum", "tanh", "transpose", "tril", "triu", "unsqueeze", "var", "where",
]
