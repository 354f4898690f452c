"""The one source of randomness in tinyattn, so that ``ta.manual_seed`` repeats a run bit for bit.

Every random draw (parameter init, dropout masks, ``ta.rand``/``ta.randn``, sampling) goes
through :func:`generator`, unless a :class:`Generator` object is passed explicitly (the
samplers of ``ta.utils.data`` and ``random_split`` take one, as in PyTorch). Kernels that
need randomness (the fused attention's dropout) take an integer seed drawn here and use a
counter-based generator, so forward and backward regenerate the same mask without storing it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .validation import check_int

_generator = np.random.default_rng()

_FRESH_GENERATOR_SEED = 67280421310721
"""The seed a new ``torch.Generator()`` starts from in PyTorch (its ``initial_seed()``)."""


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


class Generator:
    """A random number generator object of its own, as ``torch.Generator``: samplers and
    ``random_split`` draw from it instead of the global generator when given one.

    It is backed by a numpy ``Generator``, so its numbers are not PyTorch's. As in PyTorch, a
    new generator starts from the same fixed seed (67280421310721) until it is re-seeded.

    Parameters
    ----------
    device : str or ta.device, default 'cpu'
        Only the CPU exists in tinyattn; any other device is an error.

    Examples
    --------
    >>> import tinyattn as ta
    >>> g = ta.Generator().manual_seed(42)
    >>> first = list(ta.utils.data.RandomSampler(range(5), generator=g))
    >>> _ = g.manual_seed(42)
    >>> list(ta.utils.data.RandomSampler(range(5), generator=g)) == first
    True
    """

    def __init__(self, device: Any = "cpu") -> None:
        from .devices import CPU, check_device

        check_device(device, "Generator")
        self.device = CPU
        self.manual_seed(_FRESH_GENERATOR_SEED)

    def manual_seed(self, seed: int) -> Generator:
        """Re-seed this generator with the int ``seed`` (>= 0); returns the generator."""
        self._initial_seed = check_int("Generator.manual_seed", "seed", seed, 0)
        self.numpy_generator = np.random.default_rng(self._initial_seed)
        return self

    def seed(self) -> int:
        """Re-seed from fresh entropy; returns the seed used."""
        value = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
        self.manual_seed(value)
        return value

    def initial_seed(self) -> int:
        """The seed this generator was last seeded with."""
        return self._initial_seed

    def __repr__(self) -> str:
        return f"<tinyattn.Generator initial_seed={self._initial_seed}>"


def numpy_generator(generator_: Generator | None, op: str) -> np.random.Generator:
    """The numpy generator to draw from: ``generator_``'s own, or the global one for None."""
    if generator_ is None:
        return _generator
    if not isinstance(generator_, Generator):
        raise TypeError(f"{op}: generator must be a tinyattn.Generator or None, got "
                        f"{type(generator_).__module__}.{type(generator_).__name__}")
    return generator_.numpy_generator
