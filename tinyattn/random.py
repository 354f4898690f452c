"""The one source of randomness in tinyattn, so that ``ta.manual_seed`` repeats a run bit for bit.

Every random draw (parameter init, dropout masks, ``ta.rand``/``ta.randn``, sampling) goes
through :func:`generator`. Kernels that need randomness (the fused attention's dropout) take an
integer seed drawn here and use a counter-based generator, so forward and backward regenerate
the same mask without storing it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .validation import check_int

_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seed every random draw in tinyattn.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.manual_seed(0); a = ta.randn(3).numpy()
    >>> ta.manual_seed(0); b = ta.randn(3).numpy()
    >>> bool((a == b).all())
    True
    """
    global _generator
    _generator = np.random.default_rng(check_int("manual_seed", "seed", seed))


def generator() -> np.random.Generator:
    """The generator behind every random draw (re-created by :func:`manual_seed`)."""
    return _generator


def draw_seed() -> int:
    """A 63-bit integer seed for a counter-based kernel generator, drawn from :func:`generator`."""
    return int(_generator.integers(0, 2**63 - 1))


def seed() -> int:
    """Seed the generator from fresh entropy and return the seed used."""
    value = int(np.random.SeedSequence().generate_state(1)[0])
    manual_seed(value)
    return value


def multinomial(input: Any, num_samples: int, replacement: bool = False) -> Any:
    """Indices sampled from the rows of ``input`` (non-negative weights, not necessarily
    normalised), as ``torch.multinomial``: shape ``(num_samples,)`` or ``(B, num_samples)``.

    Examples
    --------
    >>> import tinyattn as ta
    >>> ta.manual_seed(0)
    >>> ta.multinomial(ta.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
    [1, 1]
    """
    from .errors import ShapeError
    from .tensor import Tensor, check_tensor
    from .validation import check_int

    check_tensor("multinomial", "input", input)
    num_samples = check_int("multinomial", "num_samples", num_samples, 1)
    weights = input.numpy().astype(np.float64)
    if weights.ndim not in (1, 2):
        raise ShapeError(f"multinomial: input must be 1-D or 2-D, got shape {input.shape}")
    rows = weights.reshape(-1, weights.shape[-1])
    if not np.all(np.isfinite(rows)) or (rows < 0).any():
        raise ValueError("multinomial: probabilities must be finite and non-negative")
    totals = rows.sum(axis=1)
    if (totals <= 0).any():
        raise ShapeError("multinomial: each row must have a positive sum")
    if not replacement and (np.count_nonzero(rows, axis=1) < num_samples).any():
        raise ShapeError(f"multinomial: cannot draw {num_samples} samples without "
                           "replacement from a row with fewer non-zero weights")
    draws = np.stack([_generator.choice(rows.shape[1], size=num_samples,
                                        replace=replacement, p=row / total)
                      for row, total in zip(rows, totals)])
    return Tensor(draws.reshape(weights.shape[:-1] + (num_samples,)).astype(np.int64))
