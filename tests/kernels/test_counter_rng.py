"""The counter-based generator of attention and element dropout against SplitMix64 written out
here with Python integers.

The kernels (``fold_key``, ``keep_threshold`` and ``kept``) and their numpy twins
(``uniform_numpy``, ``dropout_keep_mask_numpy``, ``dropout_apply_numpy``) share the constants of
``kernels/counter_rng.py``, so a twin test cannot see a wrong multiplier or shift there: this
reference, checked against the published outputs of splitmix64.c, can.
"""

from fractions import Fraction

import numpy as np
import pytest

from tinyattn.kernels.counter_rng import (
    dropout_keep_mask,
    dropout_keep_mask_numpy,
    keep_threshold,
    kept,
    uniform_numpy,
)
from tinyattn.kernels.dropout import dropout_apply, dropout_apply_numpy

MASK = 2**64 - 1
GAMMA = 0x9E3779B97F4A7C15  # SplitMix64's increment (Steele, Lea and Flood, 2014)
# the first outputs of splitmix64.c (Vigna) from state 0, as published with it
SPLITMIX64_FROM_ZERO = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F,
                        0xF88BB8A8724C81EC]
SEEDS = [0, 7, 2**63 + 5, 2**64 - 1]


def mix(z: int) -> int:
    """SplitMix64's finaliser."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def reference_uniform(seed: int, *keys: int) -> float:
    """``state ← mix(state + (key + 1) γ)`` for each key from ``state = seed``; the top 53 bits
    of the last state as a float in [0, 1) (the module docstring's definition)."""
    state = seed
    for key in keys:
        state = mix((state + (key + 1) * GAMMA) & MASK)
    return (state >> 11) / 2**53


def test_the_reference_gives_splitmix64s_published_outputs():
    state, outputs = 0, []
    for _ in range(4):
        state = (state + GAMMA) & MASK
        outputs.append(mix(state))
    assert outputs == SPLITMIX64_FROM_ZERO
    # one key k folded into seed 0 is SplitMix64's output k + 1
    assert [reference_uniform(0, k) for k in range(4)] == [
        (x >> 11) / 2**53 for x in SPLITMIX64_FROM_ZERO]


@pytest.mark.parametrize("seed", SEEDS)
def test_uniform_numbers_are_the_references(seed):
    n = np.arange(50)
    assert uniform_numpy(seed, n).tolist() == [reference_uniform(seed, k) for k in range(50)]
    b, h, i, j = np.ix_(range(2), range(3), range(4), range(5))
    expected = [[[[reference_uniform(seed, *key) for key in
                   ((bb, hh, ii, jj) for jj in range(5))] for ii in range(4)]
                 for hh in range(3)] for bb in range(2)]
    assert uniform_numpy(seed, b, h, i, j).tolist() == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_the_attention_dropout_mask_keeps_weight_bhij_when_its_number_is_at_least_p(seed):
    B, H, T, S, p = 2, 3, 5, 7, 0.3
    expected = np.array([[[[reference_uniform(seed, b, h, i, j) >= p for j in range(S)]
                           for i in range(T)] for h in range(H)] for b in range(B)])
    assert 0 < expected.sum() < expected.size
    np.testing.assert_array_equal(dropout_keep_mask(seed, B, H, T, S, p), expected)  # kernel
    np.testing.assert_array_equal(dropout_keep_mask_numpy(seed, B, H, T, S, p), expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", SEEDS)
def test_element_dropout_keeps_element_n_when_its_number_is_at_least_p(seed, dtype):
    p = 0.3
    x = np.random.default_rng(0).standard_normal((3, 70)).astype(dtype)
    keep = np.array([reference_uniform(seed, n) >= p for n in range(x.size)]).reshape(x.shape)
    expected = np.where(keep, x * dtype(1 / (1 - p)), dtype(0))
    for apply in (dropout_apply, dropout_apply_numpy):  # the kernel and its twin
        np.testing.assert_array_equal(apply(x, seed, p), expected)


@pytest.mark.parametrize("p", [0.0, 2**-53, 0.1, 0.3, 0.5, 1 - 2**-53, 1.0])
def test_the_kernels_integer_keep_test_is_the_number_at_least_p(p):
    """``kept(state, keep_threshold(p))`` against ``top53 / 2⁵³ >= p`` in exact fractions, at
    the states on either side of the boundary (and the ends of the range)."""
    threshold = int(keep_threshold(p))
    boundary = int(Fraction(p) * 2**53)  # the smallest top53 with top53 / 2⁵³ >= p, or one less
    tops = {0, 2**53 - 1} | {t for t in range(boundary - 2, boundary + 3) if 0 <= t < 2**53}
    for top in sorted(tops):
        for low in (0, 2**11 - 1):  # the 11 low bits play no part
            state = np.uint64((top << 11) | low)
            assert bool(kept(state, np.uint64(threshold))) == (Fraction(top, 2**53) >= Fraction(p))
