"""Shared fixtures: every test must leave grad mode and anomaly detection as it found them, and
gets print options (numpy's and tinyattn's) reset after it, since examples run in-process set
them."""

import os

import numpy as np
import pytest
from hypothesis import settings

import tinyattn as ta
from tinyattn import autograd

# The suite's processes compile without the compile-ahead helper (tinyattn.kernels.compile_ahead),
# so that what a test counts of its own compiling does not depend on a second process;
# tests/kernels/test_compile_ahead.py turns it on where it is tested.
os.environ.setdefault("TINYATTN_COMPILE_AHEAD", "0")

# numba compiles on first call, so no example may be timed out for being the first.
settings.register_profile("tinyattn", deadline=None, max_examples=25, derandomize=True)
settings.load_profile("tinyattn")


@pytest.fixture(autouse=True)
def _print_options_are_reset():
    numpy_options = np.get_printoptions()
    yield
    np.set_printoptions(**numpy_options)
    ta.set_printoptions(profile="default")


@pytest.fixture(autouse=True)
def _grad_mode_is_not_leaked():
    assert ta.is_grad_enabled(), "grad mode was off before the test started"
    yield
    leaked_grad = not ta.is_grad_enabled()
    leaked_anomaly = autograd.is_anomaly_enabled()
    autograd.grad_mode._set_grad_enabled(True)
    assert not leaked_grad, "the test left grad mode off (a no_grad() region was not exited)"
    assert not leaked_anomaly, "the test left detect_anomaly on"

# PyTorch scripts that tests/test_scripts_in_style.py runs through ``tinyattn run`` (and under
# PyTorch itself): they are programs, not test modules, and import ``torch``.
collect_ignore_glob = ["scripts_in_style/*"]
