"""A seeded training run repeats bit for bit: the same losses and final parameters run to run,
and whether numba runs the parallel kernels on one thread or two."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from kernels.kernel_helpers import numba_threads

import tinyattn as ta

CONFIG = ta.models.TransformerLMConfig(vocab_size=29, context_length=16, embed_dim=32,
                                       num_heads=2, num_layers=1, dropout=0.2)
STEPS = 50
TWO_THREADS = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                                 reason="numba can use only one thread here")


def _seeded_run(threads: int) -> tuple[list[float], dict[str, np.ndarray]]:
    """50 AdamW steps of a small TransformerLM with dropout on, from ``manual_seed(0)``."""
    with numba_threads(threads):
        ta.manual_seed(0)
        model = ta.TransformerLM(CONFIG)
        optimizer = ta.optim.AdamW(model.parameters(), lr=3e-3)
        tokens = ta.randn(8, 17).numpy()  # drawn from the seeded generator too
        data = (np.abs(tokens) * 1000).astype(np.int64) % CONFIG.vocab_size  # (8, T + 1)
        idx, targets = ta.tensor(data[:, :-1]), ta.tensor(data[:, 1:])  # (8, 16) each
        losses = []
        for _ in range(STEPS):
            _, loss = model(idx, targets=targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses, model.state_dict()


def _assert_identical(first, second) -> None:
    losses_a, params_a = first
    losses_b, params_b = second
    assert losses_a == losses_b  # exact float equality, step by step
    assert params_a.keys() == params_b.keys()
    for name in params_a:
        assert params_a[name].numpy().tobytes() == params_b[name].numpy().tobytes(), name


@pytest.fixture(scope="module")
def two_thread_run():
    return _seeded_run(threads=2)


@TWO_THREADS
def test_two_seeded_runs_with_dropout_and_adamw_are_bitwise_identical(two_thread_run):
    losses, _ = two_thread_run
    assert losses[-1] < losses[0]  # the run trains, so the comparison is not of constants
    _assert_identical(two_thread_run, _seeded_run(threads=2))


@TWO_THREADS
def test_one_and_two_numba_threads_give_bitwise_identical_runs(two_thread_run):
    _assert_identical(two_thread_run, _seeded_run(threads=1))
