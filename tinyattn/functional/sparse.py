"""``embedding`` (checks its arguments and applies the :class:`Embedding` op of
:mod:`tinyattn.ops.embedding`) and ``one_hot``, as in ``torch.nn.functional``.

Indices are checked here, before any kernel runs, because numba does not bounds-check.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ops.embedding import Embedding
from ..tensor import Tensor, check_float, check_kernel_dtype
from ..validation import check_int


def _indices(op: str, input: object) -> np.ndarray:
    indices = input.numpy() if isinstance(input, Tensor) else np.asarray(input)
    if indices.dtype.kind not in "iu":
        raise DTypeError(f"{op}: expected integer indices (Long or Int), got dtype "
                           f"{indices.dtype}")
    return indices


def normalize_padding_idx(op: str, padding_idx: int | None, num_embeddings: int) -> int | None:
    """``padding_idx`` in ``[0, num_embeddings)`` (a negative one counts from the end), or None."""
    if padding_idx is None:
        return None
    padding_idx = check_int(op, "padding_idx", padding_idx)
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"{op}: padding_idx {padding_idx} is out of range for "
                         f"{num_embeddings} embeddings (expected -{num_embeddings} <= "
                         f"padding_idx < {num_embeddings})")
    return padding_idx % num_embeddings


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Look up the rows of ``weight`` named by the integer tensor ``input``.

    Parameters
    ----------
    input : Tensor of integers, any shape, each in ``[0, num_embeddings)``
    weight : Tensor, shape (num_embeddings, embedding_dim), float
    padding_idx : int or None
        The row that receives no gradient (negative values count from the end).
    max_norm, norm_type, scale_grad_by_freq, sparse
        PyTorch's options; only their defaults are supported.

    Returns
    -------
    Tensor, shape ``input.shape + (embedding_dim,)``

    Examples
    --------
    >>> import tinyattn as ta
    >>> table = ta.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
    >>> ta.F.embedding(ta.tensor([[2, 1]]), table).tolist()
    [[[3.0, 4.0], [1.0, 2.0]]]
    """
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: tinyattn has no max_norm, scale_grad_by_freq or "
                                  "sparse gradients")
    check_float("embedding", "weight", weight)
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must have shape (num_embeddings, "
                           f"embedding_dim), got {weight.shape}")
    indices = _indices("embedding", input)
    num_embeddings = weight.shape[0]
    if indices.size and (indices.min() < 0 or indices.max() >= num_embeddings):
        bad = (indices < 0) | (indices >= num_embeddings)
        raise IndexError(f"embedding: index {int(indices[bad][0])} is out of range for a table "
                         f"of {num_embeddings} embeddings (expected 0 <= index < "
                         f"{num_embeddings})")
    padding_idx = normalize_padding_idx("embedding", padding_idx, num_embeddings)
    check_kernel_dtype("embedding", weight)
    return Embedding.apply(weight, indices=indices, padding_idx=padding_idx)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """``(..., num_classes)`` int64 with a 1 at each index (``num_classes = max + 1`` if -1)."""
    indices = _indices("one_hot", tensor)
    if indices.size and indices.min() < 0:
        raise ValueError("one_hot: class values must be non-negative")
    if num_classes == -1:
        num_classes = int(indices.max()) + 1 if indices.size else 0
    num_classes = check_int("one_hot", "num_classes", num_classes, 0)
    if indices.size and indices.max() >= num_classes:
        raise ValueError(f"one_hot: class values must be smaller than num_classes "
                           f"{num_classes}")
    return Tensor((indices[..., None] == np.arange(num_classes)).astype(np.int64))
