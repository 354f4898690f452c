"""The second-order walkthrough: each quantity against an independent computation."""

import io

import numpy as np
import pytest

from tinyattn import curvature


def test_softmax_jacobian_of_a_seed_row_is_the_closed_form():
    result = curvature.softmax_jacobian(curvature.make_head(), row=2)
    p = result.p
    np.testing.assert_allclose(result.J, np.diag(p) - np.outer(p, p), atol=1e-15)
    assert result.error < curvature.TOLERANCE and result.token == "starts"


def test_an_unscaled_row_saturates_and_passes_less_gradient():
    (_, spread_top, spread_entropy, spread), (_, sharp_top, sharp_entropy, sharp) = \
        curvature.saturation().rows
    assert sharp_top > spread_top and sharp_entropy < spread_entropy
    assert spread > 100 * sharp


def test_power_iteration_finds_the_top_eigenvalue_that_pytorch_finds():
    torch = pytest.importorskip("torch")
    head = curvature.make_head()
    found = curvature.hessian_eigenvalues(head).eigenvalues
    X, Y, s = (torch.tensor(a) for a in (head.X, head.target, np.float64(head.scale)))
    w = {n: torch.tensor(v) for n, v in head.weights.items()}

    def loss(wq, wk, wv):
        p = ((X @ wq) @ (X @ wk).T * s).softmax(-1)
        return 0.5 * ((p @ (X @ wv) - Y) ** 2).sum()

    for name, index in (("W_q", 0), ("W_v", 2)):
        def along(x, index=index):
            args = [w["W_q"], w["W_k"], w["W_v"]]
            args[index] = x
            return loss(*args)
        H = torch.autograd.functional.hessian(along, w[name]).reshape(6, 6).numpy()
        assert abs(found[name] - np.linalg.eigvalsh(H).max()) < 1e-8


def test_gradient_penalty_training_lowers_the_penalised_loss():
    steps = curvature.gradient_penalty(curvature.make_head()).steps
    totals = [loss + 0.5 * penalty for _, loss, penalty in steps]
    assert all(b < a for a, b in zip(totals, totals[1:]))


def test_run_prints_every_section_and_passes():
    out = io.StringIO()
    errors = curvature.run(out)
    text = out.getvalue()
    for heading in ("1. Softmax Jacobian", "2. Saturation", "3. Curvature", "4. Training"):
        assert heading in text
    assert max(errors.values()) < curvature.TOLERANCE
