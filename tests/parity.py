"""Comparing tinyattn's numbers with PyTorch's in the parity tests (needs torch)."""

import numpy as np
import pytest

import tinyattn

torch = pytest.importorskip("torch")


def as_numpy(value):
    """A torch tensor, a tinyattn tensor or anything array-like, as a numpy array."""
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    return value.numpy() if isinstance(value, tinyattn.Tensor) else np.asarray(value)


def assert_close(ours, theirs, rtol=1e-10):
    """Equal to ``rtol`` relative to the largest magnitude of ``theirs``."""
    theirs = as_numpy(theirs)
    scale = max(float(np.abs(theirs).max(initial=0.0)), 1e-300)
    np.testing.assert_allclose(as_numpy(ours), theirs, rtol=rtol, atol=rtol * scale)
