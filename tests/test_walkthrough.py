"""The walkthrough's steps: each one's numbers against an independent computation.

The forward intermediates are written out again in numpy; the gradients computed three ways
(by hand, by autograd, by finite differences) are checked against PyTorch's autograd on the
same inputs; a planted error in a hand gradient must show up in the comparison.
"""

import dataclasses
import io

import numpy as np
import pytest

from tinyattn import walkthrough
from tinyattn.study import SEED_EMBEDDINGS

GRADIENT_NAMES = [field.name for field in dataclasses.fields(walkthrough.Gradients)]


@pytest.fixture
def inputs():
    return walkthrough.make_inputs()


def test_inputs_are_the_seed_sentence_and_seeded_draws():
    first, again = (walkthrough.make_inputs(seed=5, d_out=3) for _ in range(2))
    assert np.array_equal(first.X, np.array(SEED_EMBEDDINGS))
    assert first.W_q.shape == first.W_k.shape == first.W_v.shape == (3, 3)
    assert first.G.shape == (6, 3) and first.scale == pytest.approx(1 / np.sqrt(3))
    assert all(np.array_equal(getattr(first, n), getattr(again, n)) for n in ("W_q", "G"))
    assert not np.array_equal(first.W_q, first.W_k)


@pytest.mark.parametrize("d_out", [0, -2, 2.5, True, "2"])
def test_make_inputs_rejects_a_width_that_is_not_a_positive_integer(d_out):
    with pytest.raises((TypeError, ValueError), match=r"walkthrough: d_out must be an int"):
        walkthrough.make_inputs(d_out=d_out)


def test_forward_intermediates_match_numpy_written_out(inputs):
    forward_pass = walkthrough.forward(inputs)
    X, G = inputs.X, inputs.G
    Q, K, V = X @ inputs.W_q, X @ inputs.W_k, X @ inputs.W_v
    S = Q @ K.T / np.sqrt(Q.shape[1])
    P = np.exp(S) / np.exp(S).sum(axis=1, keepdims=True)  # small scores: no shift needed
    expected = {"Q": Q, "K": K, "V": V, "S": S, "P": P, "O": P @ V}
    for name, value in expected.items():
        np.testing.assert_allclose(getattr(forward_pass, name).numpy(), value, rtol=0, atol=1e-14,
                                   err_msg=name)
    assert forward_pass.loss.item() == pytest.approx(float(np.sum(P @ V * G)), abs=1e-13)


def _torch_gradients(inputs):
    """Every gradient of L = Σ softmax(X W_q (X W_k)ᵀ s) X W_v ⊙ G, by PyTorch's autograd."""
    torch = pytest.importorskip("torch")
    X = torch.tensor(inputs.X)
    W = {n: torch.tensor(getattr(inputs, n), requires_grad=True) for n in ("W_q", "W_k", "W_v")}
    Q, K, V = X @ W["W_q"], X @ W["W_k"], X @ W["W_v"]
    S = Q @ K.T * inputs.scale
    P = torch.softmax(S, dim=-1)
    O = P @ V
    for t in (Q, K, V, S, P, O):
        t.retain_grad()
    (O * torch.tensor(inputs.G)).sum().backward()
    found = dict(Q=Q, K=K, V=V, S=S, P=P, O=O, **W)
    return {f"d{name}": t.grad.numpy() for name, t in found.items()}


@pytest.mark.parametrize("way, tol", [("backward_by_hand", 1e-13),
                                      ("backward_by_autograd", 1e-13),
                                      ("backward_by_finite_differences", 1e-8)])
def test_every_way_of_taking_the_gradients_agrees_with_pytorch(inputs, way, tol):
    forward_pass = walkthrough.forward(inputs)
    expected = _torch_gradients(inputs)
    step = getattr(walkthrough, way)
    found = step(forward_pass) if way == "backward_by_autograd" else step(inputs, forward_pass)
    assert sorted(expected) == sorted(GRADIENT_NAMES)
    for name in GRADIENT_NAMES:
        np.testing.assert_allclose(getattr(found, name), expected[name], rtol=0, atol=tol,
                                   err_msg=name)


def test_a_wrong_hand_gradient_shows_up_in_both_comparisons_and_fails_the_verdict(inputs):
    forward_pass = walkthrough.forward(inputs)
    hand = walkthrough.backward_by_hand(inputs, forward_pass)
    wrong_dS = hand.dS.copy()
    wrong_dS[2, 3] += 1e-3
    check = walkthrough.compare_gradients(
        dataclasses.replace(hand, dS=wrong_dS), walkthrough.backward_by_autograd(forward_pass),
        walkthrough.backward_by_finite_differences(inputs, forward_pass))
    assert check.errors["dS autograd"] == pytest.approx(1e-3, abs=1e-12)
    assert check.errors["dS finite-diff"] == pytest.approx(1e-3, abs=1e-8)
    others = {k: v for k, v in check.errors.items() if not k.startswith("dS ")}
    assert len(others) == 16 and max(others.values()) < walkthrough.TOLERANCE
    assert "dS = P * (dP - rowsum(dP * P))  (by hand)" in str(check)
    verdict = walkthrough.verdict(check.errors).strip()
    assert verdict.startswith("CHECK FAILED: 18 checks, worst dS ")
    assert verdict.endswith(" = 1.00e-03 (tolerance 1e-07)")


def test_composed_and_fused_paths_agree_plain_and_causal(inputs):
    paths = walkthrough.compare_paths(inputs, walkthrough.forward(inputs))
    assert list(paths.errors) == ["fused vs composed", "fused vs composed (causal)"]
    assert max(paths.errors.values()) < 1e-12


def test_the_trace_starts_from_the_loss_and_sees_G_arrive_at_the_attention_output(inputs):
    traced = walkthrough.trace_backward(inputs, walkthrough.forward(inputs))
    rows = list(traced.trace)
    assert [row.name for row in rows[:2]] == ["Sum", "Mul"]
    assert rows[1].out_shape == (1, 6, 2)
    # d(Σ A ⊙ G)/dA = G: the gradient reaching the attention output has the norm of G
    assert rows[1].input_grad_norms[0] == pytest.approx(np.linalg.norm(inputs.G), rel=1e-12)
    assert any(row.name == "Softmax" and row.out_shape == (1, 6, 6) for row in rows)
    assert str(traced).startswith("\n4. A trace of the backward pass")


def test_run_prints_every_section_in_order_and_returns_twenty_checks():
    out = io.StringIO()
    errors = walkthrough.run(out, d_out=4)
    text = out.getvalue()
    sections = ["Backprop through one attention head", "1. Forward", "d_out = 4",
                "2. Backward by hand", "The weights receive", "3. The composed path",
                "4. A trace", "all checks passed: 20 checks"]
    positions = [text.index(section) for section in sections]
    assert positions == sorted(positions)
    expected = [f"{name} {way}" for name in GRADIENT_NAMES for way in ("autograd", "finite-diff")]
    assert list(errors) == expected + ["fused vs composed", "fused vs composed (causal)"]
    assert max(errors.values()) < walkthrough.TOLERANCE


def test_verdict_needs_at_least_one_check():
    with pytest.raises(ValueError, match="walkthrough.verdict: got no checks"):
        walkthrough.verdict({})
