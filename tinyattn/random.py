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
