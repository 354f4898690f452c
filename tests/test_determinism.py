"""A seeded training run repeats bit for bit: the same losses and final parameters run to run,
and whether numba runs the parallel kernels on one thread or two.

Each run is a process of its own (tests/seeded_run.py) started with ``NUMBA_NUM_THREADS=2``, so
two threads are there whatever the environment of the test session (one core, or
``NUMBA_NUM_THREADS=1`` in it): the comparison of one and two threads always runs, never skips.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).with_name("seeded_run.py")


def seeded_run(directory: Path, threads: int, all_parallel: bool = False) -> dict[str, np.ndarray]:
    """The losses (``"losses"``) and final parameters (``"param:<name>"``) of a seeded run on
    ``threads`` numba threads, in a fresh process; with ``all_parallel`` every kernel takes its
    parallel variant."""
    mode = "-all-parallel" if all_parallel else ""
    out = directory / f"run-{threads}{mode}-{os.urandom(4).hex()}.npz"
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="2")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--threads", str(threads),
         *(["--all-parallel"] if all_parallel else [])],
        cwd=directory, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    with np.load(out) as saved:
        run = {name: saved[name] for name in saved.files}
    assert int(run.pop("threads")) == threads  # the kernels really had this many threads
    return run


def assert_bitwise_identical(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> None:
    assert first.keys() == second.keys()
    assert len([name for name in first if name.startswith("param:")]) >= 10
    for name in first:
        assert first[name].dtype == second[name].dtype and first[name].shape == second[name].shape
        assert first[name].tobytes() == second[name].tobytes(), name  # exact, bit for bit


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("seeded_runs")


@pytest.fixture(scope="module")
def two_thread_run(runs):
    return seeded_run(runs, threads=2)


def test_the_run_trains(two_thread_run):
    losses = two_thread_run["losses"]
    assert losses.shape == (50,) and np.isfinite(losses).all()
    assert losses[-1] < 0.6 * losses[0]  # so the comparisons are not of constants


def test_two_seeded_runs_with_dropout_and_adamw_are_bitwise_identical(runs, two_thread_run):
    assert_bitwise_identical(two_thread_run, seeded_run(runs, threads=2))


def test_one_and_two_numba_threads_give_bitwise_identical_runs(runs, two_thread_run):
    assert_bitwise_identical(two_thread_run, seeded_run(runs, threads=1))


def test_one_and_two_threads_agree_with_every_kernel_on_its_parallel_variant(runs):
    assert_bitwise_identical(seeded_run(runs, threads=2, all_parallel=True),
                             seeded_run(runs, threads=1, all_parallel=True))
