"""The study helpers the examples and the walkthrough share."""

import io

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import study
from tinyattn.kernels import softmax


def test_seed_sentence_has_one_3d_embedding_per_token():
    assert np.array(study.SEED_EMBEDDINGS).shape == (len(study.SEED_TOKENS), 3) == (6, 3)


def test_numeric_gradient_matches_the_analytic_gradient_element_by_element():
    x = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    found = study.numeric_gradient(lambda z: float(np.sum(z ** 3) + z[0, 0] * z[1, 2]), x)
    expected = 3 * x ** 2
    expected[0, 0] += x[1, 2]
    expected[1, 2] += x[0, 0]
    assert found.dtype == np.float64 and found.shape == x.shape
    np.testing.assert_allclose(found, expected, rtol=0, atol=study.TOLERANCE)


def test_compare_prints_ok_and_returns_the_largest_difference_for_tensors_and_arrays():
    out = io.StringIO()
    worst = study.compare("close", ta.tensor([1.0, 2.0]), np.array([1.0, 2.5]), tol=1.0,
                          stream=out)
    assert worst == 0.5
    assert out.getvalue() == "  [ok] close: max |difference| = 5.00e-01\n"


def test_compare_fails_loudly_above_the_tolerance_and_on_different_shapes():
    out = io.StringIO()
    with pytest.raises(AssertionError, match=r"far: max \|difference\| 1\.000e-03 > tolerance"):
        study.compare("far", np.zeros(3), np.array([0.0, 1e-3, 0.0]), tol=1e-6, stream=out)
    assert out.getvalue().startswith("  [FAIL] far")
    with pytest.raises(AssertionError, match=r"shapes differ, \(3,\) vs \(1, 3\)"):
        study.compare("shapes", np.zeros(3), np.zeros((1, 3)), stream=out)


def test_the_numpy_softmax_of_the_study_code_is_the_kernel_twin():
    assert study.softmax_forward_numpy is softmax.softmax_forward_numpy
