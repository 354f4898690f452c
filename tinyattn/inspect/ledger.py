"""The memory ledger: every array a live graph keeps for its backward pass.

Each op saves what its backward needs (``ctx.save_for_backward``); those arrays stay alive
until the backward pass frees the graph, and they are what training memory is made of. The
ledger lists every saved array by node — shape, dtype, bytes (its ``nbytes``) — and flags the
ones that grow with the square of the sequence length: the composed attention path keeps the
``(T, S)`` weights of every head, the fused path only its output and one log-sum-exp per row.

Arrays often share memory (three projections save the same input; a reshape saves a view):
``total`` counts every entry, ``distinct`` each underlying buffer once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..autograd import Context
from ..tables import Row, TableReport, shape_text
from ..tensor import Tensor
from .graph import graph_nodes


@dataclass(frozen=True)
class SavedArray:
    """One array saved for backward.

    Attributes
    ----------
    index, name : int, str
        The node (``#k``) and its op.
    item : str
        Where in the node's saved values it sits (``saved[0]``, ``saved[5]['bias']``).
    shape, dtype, nbytes
        The array's shape, dtype and ``nbytes``.
    quadratic : bool
        Whether it grows with ``T²``: its last two dims are an attention's ``(T, S)``.
    shared_with : str
        The first entry (``#k saved[i]``) whose memory this array shares, or ``''``.
    """

    index: int
    name: str
    item: str
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int
    quadratic: bool
    shared_with: str


class MemoryLedger(TableReport):
    """Every :class:`SavedArray` of a graph, with totals.

    Attributes
    ----------
    entries : list of SavedArray
    lengths : set of (T, S)
        The attention lengths used to flag ``T²`` arrays.
    """

    def __init__(self, entries: list[SavedArray], lengths: set[tuple[int, int]],
                 distinct_bytes: int, quadratic_bytes: int):
        self.entries = entries
        self.lengths = lengths
        self.distinct_bytes = distinct_bytes
        self.quadratic_bytes = quadratic_bytes

    @property
    def total_bytes(self) -> int:
        """The sum of every entry's ``nbytes`` (shared memory counted each time)."""
        return sum(e.nbytes for e in self.entries)

    def table_header(self) -> Row:
        return ("#", "op", "saved", "shape", "dtype", "bytes", "T²", "shares memory with")

    def table_rows(self) -> list[Row]:
        return [(str(e.index), e.name, e.item, shape_text(e.shape), str(e.dtype),
                 f"{e.nbytes:,}", "T²" if e.quadratic else "", e.shared_with)
                for e in self.entries]

    def marked(self) -> list[bool]:
        return [e.quadratic for e in self.entries]

    def summary(self) -> str:
        quadratic = sum(e.quadratic and not e.shared_with for e in self.entries)
        lengths = ", ".join(f"T={t}, S={s}" for t, s in sorted(self.lengths)) or "none found"
        return (f"{len(self.entries)} saved arrays: {_size(self.total_bytes)} in total, "
                f"{_size(self.distinct_bytes)} distinct memory; growing with T² "
                f"(attention lengths: {lengths}): {_size(self.quadratic_bytes)} in "
                f"{quadratic} array{'' if quadratic == 1 else 's'}")

    def __repr__(self) -> str:
        return f"<MemoryLedger of {len(self.entries)} arrays, {_size(self.distinct_bytes)}>"


def _size(nbytes: int) -> str:
    for unit, factor in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= factor:
            return f"{nbytes / factor:.1f} {unit} ({nbytes:,} B)"
    return f"{nbytes:,} B"


def _arrays(value: Any, path: str) -> Iterator[tuple[str, np.ndarray]]:
    """The arrays inside a saved value (tensors, tuples, lists and dicts opened up)."""
    if isinstance(value, Tensor):
        value = value.numpy()
    if isinstance(value, np.ndarray):
        yield path, value
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _arrays(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _arrays(item, f"{path}[{key!r}]")


def _buffer(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory (following views to their base)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def attention_lengths(order: list[Context]) -> set[tuple[int, int]]:
    """The ``(T, S)`` of every attention in the graph: the last two dims of a softmax over at
    least two dims, or the query and key lengths of a fused attention."""
    lengths = set()
    for node in order:
        if node.name == "Softmax" and len(node.out_shape) >= 2:
            lengths.add(tuple(node.out_shape[-2:]))
        elif node.name == "FusedAttention":
            lengths.add((node.inputs[0].shape[-2], node.inputs[1].shape[-2]))
    return lengths


def memory_ledger(output: Tensor,
                  seq_len: int | tuple[int, int] | None = None) -> MemoryLedger:
    """Every array the graph behind ``output`` keeps for backward, node by node.

    Parameters
    ----------
    output : Tensor
        The output of a live graph (not yet backwarded, or with ``retain_graph=True``).
    seq_len : int or (T, S), optional
        The attention lengths that flag an array as ``T²``-sized; default: found in the
        graph (softmax and fused attention nodes).

    Examples
    --------
    >>> import tinyattn as ta
    >>> q = ta.randn(1, 2, 8, 4, requires_grad=True)
    >>> out = ta.F.scaled_dot_product_attention(q, q, q, impl="composed")
    >>> ledger = memory_ledger(out.sum())
    >>> ledger.quadratic_bytes                       # the softmax weights, (1, 2, 8, 8) float32
    512
    """
    order = graph_nodes(output, "memory_ledger")
    if seq_len is None:
        lengths = attention_lengths(order)
    elif isinstance(seq_len, int):
        lengths = {(seq_len, seq_len)}
    else:
        lengths = {tuple(seq_len)}
    entries: list[SavedArray] = []
    owners: dict[int, str] = {}
    buffers: dict[int, np.ndarray] = {}
    quadratic: dict[int, int] = {}
    for index, node in enumerate(order):
        for item, array in (found for label, value in node.kept_for_backward()
                            for found in _arrays(value, label)):
            buffer = _buffer(array)
            label = f"#{index} {item}"
            grows = array.ndim >= 2 and tuple(array.shape[-2:]) in lengths
            entries.append(SavedArray(index, node.name, item, array.shape, array.dtype,
                                      int(array.nbytes), grows, owners.get(id(buffer), "")))
            owners.setdefault(id(buffer), label)
            buffers[id(buffer)] = buffer
            if grows:
                quadratic[id(buffer)] = int(buffer.nbytes)
    return MemoryLedger(entries, lengths, sum(int(b.nbytes) for b in buffers.values()),
                        sum(quadratic.values()))
