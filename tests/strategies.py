"""Hypothesis strategies shared by the op tests: shapes, broadcastable pairs, float64 arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyattn as ta


def shapes(min_dims: int = 1, max_dims: int = 3, max_side: int = 4) -> st.SearchStrategy:
    """Small array shapes (every side >= 1)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=max_side)


def broadcastable_pair(max_dims: int = 3, max_side: int = 4) -> st.SearchStrategy:
    """Two shapes that broadcast together, size-1 and missing leading dims included."""
    return hnp.mutually_broadcastable_shapes(
        num_shapes=2, min_dims=0, max_dims=max_dims, min_side=1, max_side=max_side
    ).map(lambda result: result.input_shapes)


def leaf(
    shape: tuple[int, ...], seed: int, low: float = -2.0, high: float = 2.0, away_from: float | None
    = None,
) -> ta.Tensor:
    """A float64 leaf requiring grad, uniform in [low, high), kept 0.1 away from ``away_from``."""
    rng = np.random.default_rng(seed)
    data = rng.uniform(low, high, size=shape)
    if away_from is not None:
        near = np.abs(data - away_from) < 0.1
        data[near] = away_from + np.where(data[near] >= away_from, 0.1, -0.1)
    return ta.tensor(data, dtype=np.float64, requires_grad=True)


seeds = st.integers(min_value=0, max_value=2**31 - 1)
