"""The losses of ``nn.functional`` and their modules: values against numpy formulas and PyTorch,
gradients against finite differences (float64, random cotangent) and PyTorch, second
derivatives, PyTorch's argument lists (legacy ``size_average``/``reduce`` included), the errors
bad inputs get, and the Annotated Transformer's label smoothing."""

from __future__ import annotations

import inspect
import math
import re
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn

REDUCTIONS = ["mean", "sum", "none"]


# ---- numpy oracles ------------------------------------------------------------------------------
def _np_reduce(loss, reduction, denominator=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (loss.size if denominator is None else denominator)


def _np_kl(x, t, reduction, log_target=False):
    if log_target:
        loss = np.exp(t) * (t - x)
    else:
        loss = np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), 0.0) - t * x
    if reduction == "batchmean":
        return loss.sum() / x.shape[0]
    return _np_reduce(loss, reduction)


def _np_mse(x, t, reduction, w=None):
    loss = (x - t) ** 2
    return _np_reduce(loss if w is None else w * loss, reduction, None if w is None else w.sum())


def _np_l1(x, t, reduction, w=None):
    loss = np.abs(x - t)
    return _np_reduce(loss if w is None else w * loss, reduction, None if w is None else w.sum())


def _np_smooth_l1(x, t, reduction, beta=1.0):
    d = np.abs(x - t)
    loss = d if beta == 0 else np.where(d < beta, 0.5 * d**2 / beta, d - 0.5 * beta)
    return _np_reduce(loss, reduction)


def _np_huber(x, t, reduction, delta=1.0, w=None):
    d = np.abs(x - t)
    loss = np.where(d < delta, 0.5 * d**2, delta * (d - 0.5 * delta))
    return _np_reduce(loss if w is None else w * loss, reduction)


def _np_bce(p, t, reduction, w=None):
    with np.errstate(divide="ignore"):
        loss = -(t * np.maximum(np.log(p), -100) + (1 - t) * np.maximum(np.log(1 - p), -100))
    return _np_reduce(loss if w is None else w * loss, reduction)


def _np_bce_logits(z, t, reduction, w=None, pos=None):
    # the textbook definition through the sigmoid (fine for the moderate logits used here)
    s = 1 / (1 + np.exp(-z))
    pos = 1.0 if pos is None else pos
    loss = -(pos * t * np.log(s) + (1 - t) * np.log(1 - s))
    return _np_reduce(loss if w is None else w * loss, reduction)


def _np_nll(x, target, reduction, w=None, ignore_index=-100):
    kept = target != ignore_index
    safe = np.where(kept, target, 0)
    weights = (np.ones(x.shape[1]) if w is None else w)[safe] * kept
    loss = -x[np.arange(len(target)), safe] * weights
    return _np_reduce(loss, reduction, weights.sum())


def _np_log_softmax(x):
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _np_cross_entropy(x, target, reduction, w=None, smoothing=0.0):
    lp = _np_log_softmax(x)
    if w is not None:
        return _np_nll(lp, target, reduction, w)
    kept = target != -100
    picked = lp[np.arange(len(target)), np.where(kept, target, 0)]
    loss = np.where(kept, -(1 - smoothing) * picked - smoothing * lp.mean(axis=1), 0.0)
    return _np_reduce(loss, reduction, kept.sum())


# ---- the cases: one per loss and option set -----------------------------------------------------
RNG = np.random.default_rng(2024)
X = RNG.normal(size=(3, 4))
T = RNG.normal(size=(3, 4))
PROBS = RNG.uniform(0.1, 0.9, size=(3, 4))
DIST = RNG.uniform(0.1, 1.0, size=(3, 4))
DIST[0, 1] = 0.0  # kl_div's 0 branch
W = RNG.uniform(0.5, 2.0, size=(3, 4))
POS = RNG.uniform(0.5, 3.0, size=(4,))
CLASSES = np.array([1, -100, 3])
W_CLASSES = RNG.uniform(0.5, 2.0, size=(4,))
SOFT = RNG.uniform(0.05, 0.95, size=(3, 4))  # BCE targets: finite differences stay in [0, 1]


def _away(x, t, *kinks):
    """``x`` moved so that ``|x − t|`` is at least 0.1 away from every kink."""
    x = x.copy()
    for kink in kinks:
        for sign in (1, -1):
            d = x - t - sign * kink
            near = np.abs(d) < 0.1
            x[near] = t[near] + sign * kink + np.where(d[near] >= 0, 0.1, -0.1)
    return x


# name: (call on a library's F, numpy oracle, arrays, which arrays get gradients checked,
#        reductions). Every case is twice differentiable at its arrays (kinks are avoided).
CASES = {
    "kl_div": (
        lambda F, x, t, r: F.kl_div(x, t, reduction=r),
        lambda x, t, r: _np_kl(x, t, r), (X, DIST), (0,), ["mean", "batchmean", "sum", "none"]),
    "kl_div(target grad)": (
        lambda F, x, t, r: F.kl_div(x, t, reduction=r),
        lambda x, t, r: _np_kl(x, t, r), (X, PROBS), (0, 1), ["batchmean", "sum", "none"]),
    "kl_div(log_target)": (
        lambda F, x, t, r: F.kl_div(x, t, reduction=r, log_target=True),
        lambda x, t, r: _np_kl(x, t, r, True), (X, np.log(PROBS)), (0, 1),
        ["batchmean", "sum", "none"]),
    "kl_div(broadcast target)": (  # a target of (1, 4) against (3, 4): broadcast first
        lambda F, x, t, r: F.kl_div(x, t, reduction=r),
        lambda x, t, r: _np_kl(x, t, r), (X, PROBS[:1]), (0, 1), ["batchmean", "sum", "none"]),
    "kl_div(log_target, broadcast target)": (
        lambda F, x, t, r: F.kl_div(x, t, reduction=r, log_target=True),
        lambda x, t, r: _np_kl(x, t, r, True), (X, np.log(PROBS[:, :1])), (0, 1),
        ["batchmean", "sum", "none"]),
    "mse_loss": (
        lambda F, x, t, r: F.mse_loss(x, t, reduction=r),
        lambda x, t, r: _np_mse(x, t, r), (X, T), (0, 1), REDUCTIONS),
    "mse_loss(weight)": (
        lambda F, x, t, w, r: F.mse_loss(x, t, reduction=r, weight=w),
        lambda x, t, w, r: _np_mse(x, t, r, w), (X, T, W), (0, 1, 2), REDUCTIONS),
    "l1_loss": (
        lambda F, x, t, r: F.l1_loss(x, t, reduction=r),
        lambda x, t, r: _np_l1(x, t, r), (_away(X, T, 0.0), T), (0, 1), REDUCTIONS),
    "l1_loss(weight)": (
        lambda F, x, t, w, r: F.l1_loss(x, t, reduction=r, weight=w),
        lambda x, t, w, r: _np_l1(x, t, r, w), (_away(X, T, 0.0), T, W), (0, 1, 2),
        REDUCTIONS),
    "smooth_l1_loss": (
        lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r),
        lambda x, t, r: _np_smooth_l1(x, t, r), (_away(X, T, 1.0), T), (0, 1), REDUCTIONS),
    "smooth_l1_loss(beta=0.3)": (
        lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.3),
        lambda x, t, r: _np_smooth_l1(x, t, r, 0.3), (_away(X, T, 0.3), T), (0, 1),
        REDUCTIONS),
    "smooth_l1_loss(beta=0)": (
        lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.0),
        lambda x, t, r: _np_smooth_l1(x, t, r, 0.0), (_away(X, T, 0.0), T), (0, 1),
        REDUCTIONS),
    "huber_loss(delta=0.7)": (
        lambda F, x, t, r: F.huber_loss(x, t, reduction=r, delta=0.7),
        lambda x, t, r: _np_huber(x, t, r, 0.7), (_away(X, T, 0.7), T), (0, 1), REDUCTIONS),
    "huber_loss(weight)": (
        lambda F, x, t, w, r: F.huber_loss(x, t, reduction=r, weight=w),
        lambda x, t, w, r: _np_huber(x, t, r, 1.0, w), (_away(X, T, 1.0), T, W), (0, 1, 2),
        REDUCTIONS),
    # an input (3, 1) against a target (4,): both expanded to (3, 4) (PyTorch warns)
    "mse_loss(broadcast)": (
        lambda F, x, t, r: F.mse_loss(x, t, reduction=r),
        lambda x, t, r: _np_mse(x, t, r), (X[:, :1], T[0]), (0, 1), REDUCTIONS),
    "mse_loss(weight, broadcast)": (  # the weight has the input's shape as given
        lambda F, x, t, w, r: F.mse_loss(x, t, reduction=r, weight=w),
        lambda x, t, w, r: _np_mse(x, t, r, w), (X[:, :1], T[0], W[:, :1]), (0, 1, 2),
        REDUCTIONS),
    "l1_loss(broadcast)": (  # |x − t| >= 0.2 here
        lambda F, x, t, r: F.l1_loss(x, t, reduction=r),
        lambda x, t, r: _np_l1(x, t, r), (X[:, :1], T[0]), (0, 1), REDUCTIONS),
    "smooth_l1_loss(beta=0.7, broadcast)": (  # |x − t| at least 0.2 from 0.7 here
        lambda F, x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.7),
        lambda x, t, r: _np_smooth_l1(x, t, r, 0.7), (X[:, :1], T[0]), (0, 1), REDUCTIONS),
    "huber_loss(delta=0.7, broadcast)": (
        lambda F, x, t, r: F.huber_loss(x, t, reduction=r, delta=0.7),
        lambda x, t, r: _np_huber(x, t, r, 0.7), (X[:, :1], T[0]), (0, 1), REDUCTIONS),
    "binary_cross_entropy": (
        lambda F, p, t, r: F.binary_cross_entropy(p, t, reduction=r),
        lambda p, t, r: _np_bce(p, t, r), (PROBS, SOFT), (0, 1), REDUCTIONS),
    "binary_cross_entropy(weight)": (
        lambda F, p, t, w, r: F.binary_cross_entropy(p, t, weight=w, reduction=r),
        lambda p, t, w, r: _np_bce(p, t, r, w), (PROBS, SOFT, W[0]), (0, 1), REDUCTIONS),
    "binary_cross_entropy_with_logits": (
        lambda F, z, t, r: F.binary_cross_entropy_with_logits(z, t, reduction=r),
        lambda z, t, r: _np_bce_logits(z, t, r), (X * 3, PROBS), (0, 1), REDUCTIONS),
    "binary_cross_entropy_with_logits(weight, pos_weight)": (
        lambda F, z, t, w, p, r: F.binary_cross_entropy_with_logits(z, t, w, reduction=r,
                                                                    pos_weight=p),
        lambda z, t, w, p, r: _np_bce_logits(z, t, r, w, p), (X * 3, PROBS, W, POS), (0, 1),
        REDUCTIONS),
    "nll_loss": (
        lambda F, x, r: F.nll_loss(x, _index(F, CLASSES), reduction=r),
        lambda x, r: _np_nll(x, CLASSES, r), (X,), (0,), REDUCTIONS),
    "nll_loss(weight)": (
        lambda F, x, w, r: F.nll_loss(x, _index(F, CLASSES), w, reduction=r),
        lambda x, w, r: _np_nll(x, CLASSES, r, w), (X, W_CLASSES), (0,), REDUCTIONS),
    "cross_entropy(label_smoothing)": (
        lambda F, x, r: F.cross_entropy(x, _index(F, CLASSES), reduction=r,
                                        label_smoothing=0.2),
        lambda x, r: _np_cross_entropy(x, CLASSES, r, smoothing=0.2), (X,), (0,), REDUCTIONS),
    "cross_entropy(weight)": (
        lambda F, x, w, r: F.cross_entropy(x, _index(F, CLASSES), w, reduction=r),
        lambda x, w, r: _np_cross_entropy(x, CLASSES, r, w), (X, W_CLASSES), (0,), REDUCTIONS),
    "cross_entropy(probabilities)": (
        lambda F, x, t, r: F.cross_entropy(x, t, reduction=r),
        lambda x, t, r: _np_reduce(-(t * _np_log_softmax(x)).sum(axis=1), r), (X, SOFT),
        (0, 1), REDUCTIONS),
}
"""The class weights of nll_loss/cross_entropy and the weights of the BCE losses are left out of
the differentiable inputs: PyTorch refuses them (tinyattn differentiates them: see the tests
further down)."""
PARAMS = [(name, r) for name, case in CASES.items() for r in case[4]]
IDS = [f"{name}-{r}" for name, r in PARAMS]


def _index(F, classes):
    """An int64 class-index tensor of the library ``F`` belongs to."""
    if F is ta.F:
        return ta.tensor(classes)
    import torch

    return torch.tensor(classes)


def _ta_inputs(arrays, differentiable, dtype=np.float64):
    return [ta.tensor(a, dtype=dtype, requires_grad=i in differentiable)
            for i, a in enumerate(arrays)]


def _quiet(call, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div's 'mean' warning is tested on its own
        return call(*args)


@pytest.mark.parametrize("name, reduction", PARAMS, ids=IDS)
def test_value_matches_the_numpy_formula(name, reduction):
    call, oracle, arrays, differentiable, _ = CASES[name]
    got = _quiet(call, F, *_ta_inputs(arrays, differentiable), reduction)
    expected = oracle(*arrays, reduction)
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name, reduction", PARAMS, ids=IDS)
def test_gradient_matches_finite_differences(name, reduction):
    call, _, arrays, differentiable, _ = CASES[name]
    inputs = _ta_inputs(arrays, differentiable)
    assert _quiet(ta.gradcheck, lambda *a: call(F, *a, reduction), inputs)


@pytest.mark.parametrize("name, reduction", PARAMS, ids=IDS)
def test_second_derivative_matches_finite_differences(name, reduction):
    call, _, arrays, differentiable, _ = CASES[name]
    inputs = _ta_inputs(arrays, differentiable)
    assert _quiet(ta.gradgradcheck, lambda *a: call(F, *a, reduction), inputs)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name, reduction", PARAMS, ids=IDS)
def test_value_and_gradients_match_pytorch(name, reduction, dtype):
    torch = pytest.importorskip("torch")
    call, _, arrays, differentiable, _ = CASES[name]
    torch_grads = differentiable
    ours = _ta_inputs(arrays, torch_grads, dtype)
    theirs = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=i in torch_grads)
              for i, a in enumerate(arrays)]
    got = _quiet(call, F, *ours, reduction)
    expected = _quiet(call, torch.nn.functional, *theirs, reduction)
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == "float64" else dict(rtol=2e-6, atol=1e-6)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), **tol)
    cotangent = np.random.default_rng(5).standard_normal(got.shape)
    got.backward(ta.tensor(cotangent, dtype=dtype))
    expected.backward(torch.tensor(cotangent, dtype=getattr(torch, dtype)))
    for i in torch_grads:
        np.testing.assert_allclose(ours[i].grad.numpy(), theirs[i].grad.numpy(), **tol)


@pytest.mark.parametrize("name", ["mse_loss", "binary_cross_entropy_with_logits(weight, "
                                  "pos_weight)", "kl_div(log_target)", "smooth_l1_loss"])
def test_second_derivatives_match_pytorch(name):
    torch = pytest.importorskip("torch")
    call, _, arrays, differentiable, _ = CASES[name]
    ours = _ta_inputs(arrays, differentiable)
    theirs = [torch.tensor(a, requires_grad=i in differentiable) for i, a in enumerate(arrays)]
    v = np.random.default_rng(6).standard_normal(arrays[0].shape)
    (g,) = ta.autograd.grad(call(F, *ours, "sum"), [ours[0]], create_graph=True)
    (h,) = torch.autograd.grad(call(torch.nn.functional, *theirs, "sum"), [theirs[0]],
                               create_graph=True)
    second = ta.autograd.grad((g * ta.tensor(v)).sum(), [ours[i] for i in differentiable],
                              allow_unused=True)
    expected = torch.autograd.grad((h * torch.tensor(v)).sum(),
                                   [theirs[i] for i in differentiable], allow_unused=True)
    for a, b, x in zip(second, expected, arrays):
        a = np.zeros_like(x) if a is None else a.numpy()
        b = np.zeros_like(x) if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_the_modules_equal_the_functions():
    x, t = ta.tensor(X), ta.tensor(T)
    p, d = ta.tensor(PROBS), ta.tensor(DIST)
    w = ta.tensor(W_CLASSES)
    pairs = [
        (nn.KLDivLoss(reduction="batchmean")(x, d), F.kl_div(x, d, reduction="batchmean")),
        (nn.KLDivLoss(reduction="sum", log_target=True)(x, t),
         F.kl_div(x, t, reduction="sum", log_target=True)),
        (nn.MSELoss(reduction="sum")(x, t), F.mse_loss(x, t, reduction="sum")),
        (nn.L1Loss()(x, t), F.l1_loss(x, t)),
        (nn.SmoothL1Loss(beta=0.4)(x, t), F.smooth_l1_loss(x, t, beta=0.4)),
        (nn.HuberLoss(reduction="none", delta=0.6)(x, t),
         F.huber_loss(x, t, reduction="none", delta=0.6)),
        (nn.BCELoss(weight=ta.tensor(W))(p, d), F.binary_cross_entropy(p, d, ta.tensor(W))),
        (nn.BCEWithLogitsLoss(pos_weight=ta.tensor(POS))(x, p),
         F.binary_cross_entropy_with_logits(x, p, pos_weight=ta.tensor(POS))),
        (nn.BCEWithLogitsLoss(ta.tensor(W), reduction="sum")(x, p),
         F.binary_cross_entropy_with_logits(x, p, ta.tensor(W), reduction="sum")),
        (nn.NLLLoss(w, ignore_index=3)(x, ta.tensor([0, 3, 2])),
         F.nll_loss(x, ta.tensor([0, 3, 2]), w, ignore_index=3)),
        (nn.CrossEntropyLoss(w, reduction="sum")(x, ta.tensor([0, 3, 2])),
         F.cross_entropy(x, ta.tensor([0, 3, 2]), w, reduction="sum")),
    ]
    for module_value, function_value in pairs:
        assert module_value.shape == function_value.shape
        np.testing.assert_array_equal(module_value.numpy(), function_value.numpy())
    assert len({float(a.sum().item()) for a, _ in pairs}) == len(pairs)  # all different losses


# ---- PyTorch's argument lists -------------------------------------------------------------------
FUNCTIONS = ["kl_div", "nll_loss", "cross_entropy", "mse_loss", "l1_loss", "smooth_l1_loss",
             "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"]
MODULES = ["KLDivLoss", "NLLLoss", "CrossEntropyLoss", "MSELoss", "L1Loss", "SmoothL1Loss",
           "HuberLoss", "BCELoss", "BCEWithLogitsLoss"]


def _arguments(fn):
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()
            if p.name != "self"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_functions_take_pytorchs_arguments_in_its_order(name):
    torch = pytest.importorskip("torch")
    assert _arguments(getattr(F, name)) == _arguments(getattr(torch.nn.functional, name))


@pytest.mark.parametrize("name", MODULES)
def test_modules_take_pytorchs_arguments_in_its_order(name):
    torch = pytest.importorskip("torch")
    assert _arguments(getattr(nn, name).__init__) == _arguments(getattr(torch.nn, name).__init__)


LEGACY = [(None, None), (True, None), (False, None), (None, True), (None, False),
          (True, True), (False, True), (True, False), (False, False)]


@pytest.mark.parametrize("size_average, reduce", LEGACY)
def test_legacy_arguments_map_to_pytorchs_reduction(size_average, reduce):
    torch = pytest.importorskip("torch")
    tF = torch.nn.functional
    x, t, p = (ta.tensor(a) for a in (X, T, PROBS))
    tx, tt, tp = (torch.tensor(a) for a in (X, T, PROBS))
    calls = [
        (lambda F, x, t, p: F.mse_loss(x, t, size_average, reduce)),
        (lambda F, x, t, p: F.l1_loss(x, t, size_average=size_average, reduce=reduce)),
        (lambda F, x, t, p: F.smooth_l1_loss(x, t, size_average, reduce, beta=0.5)),
        (lambda F, x, t, p: F.kl_div(x, p, size_average, reduce, "batchmean")),
        (lambda F, x, t, p: F.binary_cross_entropy(p, p * p, None, size_average, reduce)),
        (lambda F, x, t, p: F.binary_cross_entropy_with_logits(x, p, None, size_average, reduce)),
        (lambda F, x, t, p: F.nll_loss(x, _index(F, CLASSES), None, size_average, -100,
                                       reduce)),
        (lambda F, x, t, p: F.cross_entropy(x, _index(F, CLASSES), None, size_average, -100,
                                            reduce, "sum")),
    ]
    legacy = size_average is not None or reduce is not None
    for call in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = call(F, x, t, p)
        assert any("size_average and reduce are deprecated" in str(w.message)
                   for w in caught) == legacy
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = call(tF, tx, tt, tp)
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("size_average, reduce", LEGACY[1:])
def test_legacy_arguments_map_in_the_module_constructors(size_average, reduce):
    torch = pytest.importorskip("torch")
    for name in ["MSELoss", "L1Loss", "SmoothL1Loss", "KLDivLoss", "BCELoss",
                 "BCEWithLogitsLoss", "NLLLoss", "CrossEntropyLoss"]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = getattr(nn, name)(size_average=size_average, reduce=reduce)
        assert "size_average and reduce are deprecated" in str(caught[0].message)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = getattr(torch.nn, name)(size_average=size_average, reduce=reduce)
        assert ours.reduction == theirs.reduction, name


def test_legacy_arguments_that_are_not_bools_are_refused():
    with pytest.raises(TypeError, match=r"mse_loss: size_average must be a bool or None, got "
                                        r"str 'yes'"):
        F.mse_loss(ta.ones(2), ta.ones(2), size_average="yes")
    with pytest.raises(TypeError, match=r"MSELoss: reduce must be a bool or None, got float"):
        nn.MSELoss(reduce=0.5)


def test_positional_arguments_land_where_pytorch_puts_them():
    x, target = ta.tensor(X), ta.tensor(np.array([1, 2, 3]))
    w = ta.tensor(W_CLASSES)
    # nll_loss(input, target, weight, size_average, ignore_index, reduce, reduction)
    np.testing.assert_allclose(F.nll_loss(x, target, w, None, 2, None, "sum").numpy(),
                               _np_nll(X, np.array([1, 2, 3]), "sum", W_CLASSES, 2), rtol=1e-12)
    module = nn.CrossEntropyLoss(w, None, 2, None, "none", 0.0)
    assert (module.ignore_index, module.reduction) == (2, "none")
    assert nn.NLLLoss(None, None, 7).ignore_index == 7


def test_loss_weights_are_buffers_as_in_pytorch():
    torch = pytest.importorskip("torch")
    w = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    for name, kwargs in [("CrossEntropyLoss", {}), ("NLLLoss", {}), ("BCELoss", {}),
                         ("BCEWithLogitsLoss", {"pos_weight": w})]:
        ours = getattr(nn, name)(ta.tensor(w), **{k: ta.tensor(v) for k, v in kwargs.items()})
        theirs = getattr(torch.nn, name)(torch.tensor(w),
                                         **{k: torch.tensor(v) for k, v in kwargs.items()})
        assert list(ours.state_dict()) == list(theirs.state_dict())
        assert ours.double().weight.dtype == np.float64
    assert list(nn.BCEWithLogitsLoss().state_dict()) == []


# ---- kl_div -------------------------------------------------------------------------------------
def test_kl_div_mean_warns_as_pytorch_does_and_divides_by_every_element():
    torch = pytest.importorskip("torch")
    x, t = ta.tensor(X), ta.tensor(DIST)
    with pytest.warns(UserWarning, match=r"kl_div: reduction='mean' divides the sum by the "
                                         r"number of elements .* 'batchmean'"):
        mean = F.kl_div(x, t)
    with pytest.warns(UserWarning, match="'batchmean'"):
        torch.nn.functional.kl_div(torch.tensor(X), torch.tensor(DIST))
    total = F.kl_div(x, t, reduction="sum").item()
    assert mean.item() == pytest.approx(total / 12, rel=1e-14)
    assert F.kl_div(x, t, reduction="batchmean").item() == pytest.approx(total / 3, rel=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for the other reductions
        for reduction in ("batchmean", "sum", "none"):
            F.kl_div(x, t, reduction=reduction)
            nn.KLDivLoss(reduction=reduction)(x, t)


def test_kl_div_of_a_distribution_from_itself_is_zero_and_matches_the_definition():
    p = np.array([[0.2, 0.3, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25]])
    q = np.array([[0.1, 0.6, 0.2, 0.1], [0.4, 0.3, 0.2, 0.1]])
    loss = F.kl_div(ta.tensor(np.log(q)), ta.tensor(p), reduction="batchmean")
    kl = sum(sum(pi * math.log(pi / qi) for pi, qi in zip(pr, qr) if pi > 0)
             for pr, qr in zip(p, q)) / 2
    assert loss.item() == pytest.approx(kl, rel=1e-12)
    same = F.kl_div(ta.tensor(np.log(q)), ta.tensor(q), reduction="batchmean")
    assert abs(same.item()) < 1e-15
    log_same = F.kl_div(ta.tensor(np.log(q)), ta.tensor(np.log(q)), reduction="sum",
                        log_target=True)
    assert abs(log_same.item()) < 1e-15


def test_kl_div_zero_targets_add_nothing_and_negative_targets_give_nan_as_in_pytorch():
    torch = pytest.importorskip("torch")
    x = np.array([-1.0, -2.0, -0.5, -3.0])
    t = np.array([0.0, 0.3, -0.1, 0.0])
    got = F.kl_div(ta.tensor(x), ta.tensor(t), reduction="none").numpy()
    expected = torch.nn.functional.kl_div(torch.tensor(x), torch.tensor(t),
                                          reduction="none").numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    assert got[0] == 0.0 and got[3] == 0.0 and np.isnan(got[2])
    np.testing.assert_allclose(got[1], 0.3 * (math.log(0.3) + 2.0), rtol=1e-14)


def test_kl_div_target_gradient_at_zero_is_that_of_the_zero_branch():
    # documented: PyTorch gives nan there (t ln t has slope −∞ at 0); tinyattn gives −x
    x = ta.tensor([-1.5, -2.0], dtype=ta.float64, requires_grad=True)
    t = ta.tensor([0.0, 0.4], dtype=ta.float64, requires_grad=True)
    F.kl_div(x, t, reduction="sum").backward()
    np.testing.assert_allclose(t.grad.numpy(), [1.5, math.log(0.4) + 1 + 2.0], rtol=1e-14)
    np.testing.assert_allclose(x.grad.numpy(), [0.0, -0.4], rtol=1e-14)


def test_kl_div_broadcasts_as_pytorch_and_batchmean_uses_the_inputs_first_dim():
    torch = pytest.importorskip("torch")
    x, t = np.log(PROBS[:1, :]), DIST  # (1, 4) against (3, 4)
    for reduction in ["batchmean", "sum", "none"]:
        got = F.kl_div(ta.tensor(x), ta.tensor(t), reduction=reduction)
        expected = torch.nn.functional.kl_div(torch.tensor(x), torch.tensor(t),
                                              reduction=reduction)
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)
    scalar = F.kl_div(ta.tensor(-1.0), ta.tensor(0.5), reduction="batchmean")
    assert scalar.item() == pytest.approx(0.5 * (math.log(0.5) + 1.0), rel=1e-6)
    with pytest.raises(ValueError, match=r"kl_div: shapes \(3, 4\) and \(2, 4\) are not "
                                         r"broadcastable"):
        F.kl_div(ta.tensor(X), ta.ones(2, 4), reduction="sum")


def test_kl_div_rejects_bad_arguments():
    with pytest.raises(TypeError, match="kl_div: target must be a floating point tensor, got "
                                        "dtype int64"):
        F.kl_div(ta.zeros(3), ta.tensor([0, 1, 0]), reduction="sum")
    with pytest.raises(TypeError, match="kl_div: input must be a floating point tensor"):
        F.kl_div(ta.tensor([0, 1, 0]), ta.zeros(3), reduction="sum")
    with pytest.raises(ValueError, match=r"kl_div: reduction must be 'mean', 'batchmean', "
                                         r"'sum' or 'none', got 'avg'"):
        F.kl_div(ta.zeros(3), ta.zeros(3), reduction="avg")
    with pytest.raises(ValueError, match="KLDivLoss: reduction must be 'mean', 'batchmean'"):
        nn.KLDivLoss(reduction="max")
    with pytest.raises(TypeError, match="kl_div: log_target must be a bool, got str"):
        F.kl_div(ta.zeros(3), ta.zeros(3), reduction="sum", log_target="yes")


# ---- regression losses --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_different_shapes_broadcast_with_pytorchs_warning(name):
    torch = pytest.importorskip("torch")
    x, t = X[:, :1], T[0]  # (3, 1) against (4,): a (3, 4) loss
    with pytest.warns(UserWarning, match=rf"{name}: target of shape \(4,\) and input of shape "
                                         r"\(3, 1\) differ; they are broadcast to \(3, 4\)"):
        got = getattr(F, name)(ta.tensor(x), ta.tensor(t), reduction="none")
    with pytest.warns(UserWarning, match="different to the input size"):
        expected = getattr(torch.nn.functional, name)(torch.tensor(x), torch.tensor(t),
                                                      reduction="none")
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match=rf"{name}: shapes \(3, 4\) and \(3,\) are not "
                                         "broadcastable"):
        getattr(F, name)(ta.tensor(X), ta.tensor(T[:, 0]))


def test_same_shapes_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"]:
            getattr(F, name)(ta.tensor(X), ta.tensor(T))


def test_smooth_l1_with_beta_zero_is_l1_and_huber_is_delta_times_smooth_l1():
    x, t = ta.tensor(X), ta.tensor(T)
    np.testing.assert_array_equal(F.smooth_l1_loss(x, t, beta=0.0).numpy(),
                                  F.l1_loss(x, t).numpy())
    np.testing.assert_allclose(F.huber_loss(x, t, delta=0.6, reduction="none").numpy(),
                               0.6 * F.smooth_l1_loss(x, t, beta=0.6, reduction="none").numpy(),
                               rtol=1e-12)


def test_regression_gradients_at_the_kinks_are_pytorchs():
    torch = pytest.importorskip("torch")
    x = np.array([0.0, 1.0, -1.0, 2.0, 0.5])
    t = np.array([0.0, 0.0, 0.0, 1.0, 0.0])
    for name, kwargs in [("l1_loss", {}), ("smooth_l1_loss", {}), ("huber_loss", {}),
                         ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {"delta": 0.5}),
                         ("smooth_l1_loss", {"beta": 0.5})]:
        ours = ta.tensor(x, requires_grad=True)
        theirs = torch.tensor(x, requires_grad=True)
        getattr(F, name)(ours, ta.tensor(t), reduction="sum", **kwargs).backward()
        getattr(torch.nn.functional, name)(theirs, torch.tensor(t), reduction="sum",
                                           **kwargs).backward()
        np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_regression_losses_reject_bad_arguments():
    x = ta.ones(3)
    with pytest.raises(TypeError, match="mse_loss: input or target must be a floating point "
                                        "tensor, got dtypes int64 and int64"):
        F.mse_loss(ta.tensor([1, 2, 3]), ta.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="mse_loss: target must be a Tensor, got float"):
        F.mse_loss(x, 1.0)
    with pytest.raises(ValueError, match=r"l1_loss: weight must have the input's shape \(3,\), "
                                         r"got \(2,\)"):
        F.l1_loss(x, x, weight=ta.ones(2))
    with pytest.raises(ValueError, match="smooth_l1_loss: beta must be a number >= 0, got -1"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(ValueError, match="smooth_l1_loss: beta must be a number >= 0, got -0.5"):
        nn.SmoothL1Loss(beta=-0.5)(x, x)
    with pytest.raises(ValueError, match="huber_loss: delta must be a number > 0, got 0.0"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(ValueError, match="huber_loss: delta must be a number > 0, got -2.0"):
        F.huber_loss(x, x, delta=-2.0)
    with pytest.raises(ValueError, match="mse_loss: reduction must be 'mean', 'sum' or 'none', "
                                         "got 'batchmean'"):
        F.mse_loss(x, x, reduction="batchmean")
    with pytest.raises(ValueError, match="MSELoss: reduction must be"):
        nn.MSELoss(reduction="avg")


def test_weighted_regression_means_follow_pytorchs_definitions():
    x, t, w = ta.tensor(X), ta.tensor(T), ta.tensor(W)
    sq, ab = (X - T) ** 2, np.abs(X - T)
    assert F.mse_loss(x, t, weight=w).item() == pytest.approx((W * sq).sum() / W.sum(), 1e-13)
    assert F.l1_loss(x, t, weight=w).item() == pytest.approx((W * ab).sum() / W.sum(), 1e-13)
    huber = np.where(ab < 1, 0.5 * sq, ab - 0.5)
    assert F.huber_loss(x, t, weight=w).item() == pytest.approx((W * huber).mean(), 1e-13)


# ---- binary cross-entropy -----------------------------------------------------------------------
def test_bce_clamps_its_logs_at_minus_100_and_matches_pytorch_at_the_ends():
    torch = pytest.importorskip("torch")
    p = np.array([0.0, 1.0, 0.0, 1.0, 1e-50, 0.3])
    t = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.5])
    ours, theirs = ta.tensor(p, requires_grad=True), torch.tensor(p, requires_grad=True)
    got = F.binary_cross_entropy(ours, ta.tensor(t), reduction="none")
    expected = torch.nn.functional.binary_cross_entropy(theirs, torch.tensor(t),
                                                        reduction="none")
    np.testing.assert_allclose(got.numpy(), [0, 0, 100, 100, 100, -math.log(0.3 * 0.7) / 2],
                               rtol=1e-14)
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-14)
    got.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-14)
    assert np.isfinite(ours.grad.numpy()).all()


def test_bce_of_a_saturated_float32_sigmoid_has_pytorchs_finite_gradient():
    # composed of log ops, the gradient would be −t/x: about −5e34 at z = −80, inf below −88
    torch = pytest.importorskip("torch")
    z = np.array([-80.0, -30.0, 0.0, 30.0], dtype=np.float32)
    t = np.array([1.0, 1.0, 1.0, 0.0], dtype=np.float32)
    ours, theirs = ta.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    got = F.binary_cross_entropy(ours.sigmoid(), ta.tensor(t))
    expected = torch.nn.functional.binary_cross_entropy(theirs.sigmoid(), torch.tensor(t))
    got.backward()
    expected.backward()
    assert got.item() == pytest.approx(expected.item(), rel=1e-6)
    assert np.isfinite(ours.grad.numpy()).all()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-12)
    assert abs(ours.grad.numpy()[0]) < 1e-20  # PyTorch's bounded rule, not σ(z) − 1 ≈ −1
    deeper = ta.tensor([-90.0, -100.0, -200.0], requires_grad=True)  # σ denormal, then 0
    F.binary_cross_entropy(deeper.sigmoid(), ta.ones(3)).backward()
    assert np.isfinite(deeper.grad.numpy()).all()


@pytest.mark.parametrize("p", [[0.2, 0.7, 1e-20], [0.2, 0.7, 0.01]])
def test_bce_target_gradient_and_second_derivatives_are_pytorchs(p):
    torch = pytest.importorskip("torch")
    p, t = np.array(p), np.array([0.3, 0.9, 1.0])
    ours = [ta.tensor(a, requires_grad=True) for a in (p, t)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (p, t)]
    g = ta.autograd.grad(F.binary_cross_entropy(*ours, reduction="sum"), ours,
                         create_graph=True)
    h = torch.autograd.grad(torch.nn.functional.binary_cross_entropy(*theirs, reduction="sum"),
                            theirs, create_graph=True)
    for a, b in zip(g, h):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-13)
    if p[2] < 1e-12:
        return  # x (1 − x) < 1e-12: PyTorch's double backward has its own rule there
    for first, expected_first in zip(g, h):
        second = ta.autograd.grad(first.sum(), ours, allow_unused=True)
        expected = torch.autograd.grad(expected_first.sum(), theirs, allow_unused=True)
        for a, b, x in zip(second, expected, (p, t)):
            a = np.zeros_like(x) if a is None else a.numpy()
            b = np.zeros_like(x) if b is None else b.numpy()
            np.testing.assert_allclose(a, b, rtol=1e-9)  # PyTorch's own double-backward formula


def test_bce_weights_get_gradients_checked_by_finite_differences():
    # PyTorch refuses weights that require grad; tinyattn differentiates them (documented)
    p, t, w, pos = (ta.tensor(a, requires_grad=True) for a in (PROBS, SOFT, W, POS))
    assert ta.gradcheck(lambda a, b, c: F.binary_cross_entropy(a, b, c), (p, t, w))
    assert ta.gradcheck(lambda a, b, c, d: F.binary_cross_entropy_with_logits(
        a, b, c, pos_weight=d), (ta.tensor(X * 3, requires_grad=True), t, w, pos))


def test_bce_rejects_bad_inputs():
    p, t = ta.tensor([0.2, 0.5]), ta.tensor([0.0, 1.0])
    with pytest.raises(ValueError, match=r"binary_cross_entropy: every element of input must be "
                                         r"in \[0, 1\], got values from 0.2 to 1.5 "
                                         r"\(probabilities: apply sigmoid first"):
        F.binary_cross_entropy(ta.tensor([0.2, 1.5]), t)
    with pytest.raises(ValueError, match="every element of input must be in .* got NaN"):
        F.binary_cross_entropy(ta.tensor([0.2, float("nan")]), t)
    with pytest.raises(ValueError, match=r"every element of target must be in \[0, 1\], got "
                                         "values from -2 to 0"):
        F.binary_cross_entropy(p, ta.tensor([0.0, -2.0]))
    with pytest.raises(TypeError, match="binary_cross_entropy: target must have the input's "
                                        r"dtype float32, got float64 \(use target.to"):
        F.binary_cross_entropy(p, ta.tensor([0.0, 1.0], dtype=ta.float64))
    with pytest.raises(TypeError, match="target must have the input's dtype float32, got int64"):
        F.binary_cross_entropy(p, ta.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"binary_cross_entropy: target must have the input's "
                                         r"shape \(2,\), got \(1, 2\)"):
        F.binary_cross_entropy(p, ta.tensor([[0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"weight of shape \(2, 1, 2\) must broadcast to the "
                                         r"input's shape \(2,\)"):
        F.binary_cross_entropy(p, t, weight=ta.ones(2, 1, 2))
    with pytest.raises(TypeError, match="binary_cross_entropy: input must be a floating point"):
        F.binary_cross_entropy(ta.tensor([0, 1]), t)


def test_bce_weight_broadcasts_and_keeps_the_inputs_dtype_as_in_pytorch():
    torch = pytest.importorskip("torch")
    p, t = PROBS.astype(np.float32), DIST.clip(0, 1).astype(np.float32)
    w = np.array([1.0, 2.0, 0.5, 3.0])
    got = F.binary_cross_entropy(ta.tensor(p), ta.tensor(t), weight=ta.tensor(w))
    expected = torch.nn.functional.binary_cross_entropy(torch.tensor(p), torch.tensor(t),
                                                        weight=torch.tensor(w))
    assert got.dtype == np.float32 and expected.dtype == torch.float32
    assert got.item() == pytest.approx(expected.item(), rel=1e-6)


def test_bce_with_logits_is_exact_for_huge_logits_and_at_zero():
    torch = pytest.importorskip("torch")
    z = np.array([1000.0, -1000.0, 1000.0, -1000.0, 0.0, 0.0, 40.0, -40.0])
    t = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.3, 0.5, 0.5])
    pos = np.array([2.0])
    for dtype in ("float32", "float64"):
        ours = ta.tensor(z, dtype=dtype, requires_grad=True)
        theirs = torch.tensor(z, dtype=getattr(torch, dtype), requires_grad=True)
        got = F.binary_cross_entropy_with_logits(ours, ta.tensor(t, dtype=dtype),
                                                 reduction="none",
                                                 pos_weight=ta.tensor(pos, dtype=dtype))
        expected = torch.nn.functional.binary_cross_entropy_with_logits(
            theirs, torch.tensor(t, dtype=getattr(torch, dtype)), reduction="none",
            pos_weight=torch.tensor(pos, dtype=getattr(torch, dtype)))
        assert np.isfinite(got.numpy()).all()
        np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(got.numpy()[:2], [1000.0, 2000.0], rtol=1e-6)
        got.sum().backward()
        expected.sum().backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6,
                                   atol=1e-7)
    # at exactly 0: σ(0)(1 + (p − 1) t) − p t
    np.testing.assert_allclose(ours.grad.numpy()[4:6], [0.5 * 2 - 2, 0.5 * 1.3 - 0.6],
                               rtol=1e-14)


def test_bce_with_logits_rejects_bad_inputs():
    z, t = ta.zeros(2, 3), ta.ones(2, 3)
    op = "binary_cross_entropy_with_logits"
    with pytest.raises(TypeError, match=f"{op}: target must be a floating point tensor, got "
                                        "dtype int64"):
        F.binary_cross_entropy_with_logits(z, ta.tensor([[0, 1, 1], [1, 0, 0]]))
    with pytest.raises(ValueError, match=rf"{op}: target must have the input's shape \(2, 3\), "
                                         r"got \(3,\)"):
        F.binary_cross_entropy_with_logits(z, ta.ones(3))
    with pytest.raises(ValueError, match=r"pos_weight of shape \(4,\) must broadcast to the "
                                         r"target's shape \(2, 3\)"):
        F.binary_cross_entropy_with_logits(z, t, pos_weight=ta.ones(4))
    with pytest.raises(ValueError, match=r"weight of shape \(2, 2, 3\) must broadcast to the "
                                         r"input's shape \(2, 3\)"):
        F.binary_cross_entropy_with_logits(z, t, weight=ta.ones(2, 2, 3))
    with pytest.raises(ValueError, match=f"{op}: reduction must be 'mean', 'sum' or 'none'"):
        F.binary_cross_entropy_with_logits(z, t, reduction="avg")


def test_bce_with_logits_equals_bce_of_the_sigmoid():
    z, t = X * 2, PROBS
    a = F.binary_cross_entropy_with_logits(ta.tensor(z), ta.tensor(t), ta.tensor(W))
    b = F.binary_cross_entropy(ta.tensor(z).sigmoid(), ta.tensor(t), ta.tensor(W))
    assert a.item() == pytest.approx(b.item(), rel=1e-12)


# ---- nll_loss and cross_entropy -----------------------------------------------------------------
def test_nll_loss_weight_gets_a_gradient_checked_by_finite_differences():
    # PyTorch refuses a weight that requires grad; tinyattn differentiates it (documented)
    x = ta.tensor(X, requires_grad=True)
    w = ta.tensor(W_CLASSES, requires_grad=True)
    target = ta.tensor(np.array([1, 3, 3]))
    assert ta.gradcheck(lambda a, b: F.nll_loss(a, target, b), (x, w))
    assert ta.gradcheck(lambda a, b: F.cross_entropy(a, target, b), (x, w))
    F.nll_loss(x, target, w, reduction="sum").backward()
    np.testing.assert_allclose(w.grad.numpy(), [0, -X[0, 1], 0, -X[1, 3] - X[2, 3]],
                               rtol=1e-14)


def test_nll_loss_rejects_bad_weights_and_targets():
    x = ta.zeros(4, 5)
    target = ta.tensor([1, 2, 3, 0])
    with pytest.raises(ValueError, match=r"nll_loss: weight must have one entry per class, shape "
                                         r"\(5,\), got \(4,\)"):
        F.nll_loss(x, target, weight=ta.ones(4))
    with pytest.raises(TypeError, match="nll_loss: weight must have the input's dtype float32, "
                                        "got float64"):
        F.nll_loss(x, target, weight=ta.ones(5, dtype=ta.float64))
    with pytest.raises(TypeError, match=r"nll_loss: target must hold class indices as integers "
                                        r"\(int64, PyTorch's Long: use target.long\(\)\), got "
                                        "dtype float32"):
        F.nll_loss(x, ta.tensor([1.0, 2.0, 3.0, 0.0]))
    with pytest.raises(ValueError, match="NLLLoss: reduction must be 'mean', 'sum' or 'none', "
                                         "got 'batchmean'"):
        nn.NLLLoss(reduction="batchmean")
    with pytest.raises(ValueError, match="nll_loss: reduction must be"):
        F.nll_loss(x, target, reduction="batchmean")


def test_pytorch_rejects_the_same_nll_arguments():
    torch = pytest.importorskip("torch")
    x, target = torch.zeros(4, 5), torch.tensor([1, 2, 3, 0])
    for kwargs in [{"weight": torch.ones(4)}, {"weight": torch.ones(5, dtype=torch.float64)}]:
        with pytest.raises(RuntimeError):
            torch.nn.functional.nll_loss(x, target, **kwargs)
    with pytest.raises(RuntimeError, match="Long"):
        torch.nn.functional.nll_loss(x, target.float())


def test_float_class_targets_get_pytorchs_meaning():
    with pytest.raises(TypeError) as raised:
        F.cross_entropy(ta.zeros(4, 5), ta.tensor([1.0, 2.0, 3.0, 0.0]))
    message = str(raised.value)
    assert message == ("cross_entropy: target has the shape (4,) of class indices but dtype "
                       "float32: class indices must be integers (int64, PyTorch's Long: use "
                       "target.long()); a float target is read as class probabilities and must "
                       "have the input's shape (4, 5)")
    assert isinstance(raised.value, RuntimeError)  # PyTorch raises a RuntimeError
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="expected target dtype to be Long"):
        torch.nn.functional.cross_entropy(torch.zeros(4, 5), torch.tensor([1.0, 2.0, 3.0, 0.0]))
    # the advice works: .long() gives PyTorch's loss
    fixed = F.cross_entropy(ta.tensor(X), ta.tensor([1.0, 2.0, 0.0]).long())
    expected = torch.nn.functional.cross_entropy(torch.tensor(X), torch.tensor([1, 2, 0]))
    assert fixed.item() == pytest.approx(expected.item(), rel=1e-12)


def test_float_targets_of_another_shape_say_both_forms():
    with pytest.raises(TypeError, match=r"cross_entropy: a float target holds class "
                                        r"probabilities and must have the input's shape "
                                        r"\(4, 5\), got \(4, 6\); class indices \(shape \(4,\)\) "
                                        r"must be integers"):
        F.cross_entropy(ta.zeros(4, 5), ta.zeros(4, 6))


def _suggested_calls(message):
    return re.findall(r"(?:cross_entropy|nll_loss)\((input\.[^,]+(?:, \d+\))?), "
                      r"(target(?:\.\w+\(-1\))?)\)", message)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("contiguous", [True, False])
def test_classes_last_gets_a_message_whose_fixes_work(shape, op, contiguous):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    logits = rng.normal(size=shape)
    target = rng.integers(0, shape[-1], size=shape[:-1])
    input = ta.tensor(logits)
    if not contiguous:  # the same values through a transposed view
        input = ta.tensor(np.swapaxes(logits, 0, -1).copy()).transpose(0, -1)
        assert not input.is_contiguous()
    fn = getattr(F, op)
    with pytest.raises(ValueError) as raised:
        fn(input, ta.tensor(target))
    message = str(raised.value)
    expected_shape = (shape[0],) + shape[2:]
    assert message.startswith(f"{op}: input of shape {shape} needs a target of shape "
                              f"{expected_shape}, got target of shape {shape[:-1]}. The classes "
                              "must be in dim 1")
    flat = "view" if contiguous else "reshape"
    assert f"input.{flat}(-1, {shape[-1]})" in message and "target.view(-1)" in message
    suggested = _suggested_calls(message)
    assert len(suggested) == 2, message
    rows = torch.tensor(logits).reshape(-1, shape[-1])
    expected = getattr(torch.nn.functional, op)(rows, torch.tensor(target).reshape(-1))
    for input_code, target_code in suggested:
        got = fn(eval(input_code, {"input": input}),
                 eval(target_code, {"target": ta.tensor(target)}))
        assert got.item() == pytest.approx(expected.item(), rel=1e-12), (input_code, target_code)


def test_float_targets_with_classes_last_get_both_hints():
    with pytest.raises(TypeError) as raised:
        F.cross_entropy(ta.zeros(2, 3, 5), ta.zeros(2, 3))
    message = str(raised.value)
    assert "must be integers (int64, PyTorch's Long: use target.long())" in message
    assert "input.view(-1, 5), target.view(-1)" in message
    assert "input.transpose(1, 2)" in message


@pytest.mark.parametrize("input_shape, target_shape", [((4, 5), (3,)), ((2, 5, 3), (2, 4)),
                                                       ((2, 5, 3), (3, 2)), ((5,), (1,))])
def test_the_classes_last_hint_is_only_given_when_the_shapes_say_so(input_shape, target_shape):
    with pytest.raises(ValueError) as raised:
        F.cross_entropy(ta.zeros(*input_shape), ta.zeros(*target_shape, dtype=ta.int64))
    assert "needs a target of shape" in str(raised.value)
    assert "The classes must be in dim 1" not in str(raised.value)


def test_classes_last_with_as_many_steps_as_classes_runs_as_in_pytorch():
    # (B, T, C) with T == C has the shape PyTorch expects: no error in either library
    torch = pytest.importorskip("torch")
    logits, target = X.reshape(3, 4, 1) * np.ones((1, 1, 4)), np.zeros((3, 4), dtype=np.int64)
    got = F.cross_entropy(ta.tensor(logits), ta.tensor(target))
    expected = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target))
    assert got.item() == pytest.approx(expected.item(), rel=1e-12)


# ---- the Annotated Transformer's label smoothing ------------------------------------------------
def _smoothing_module(torch, nn):
    """Label smoothing written as the Annotated Transformer writes it (its calls, in its order):
    a KL-divergence criterion summed over tokens, against a target distribution built in place
    from ``x.data`` with ``fill_``, ``scatter_``, an index assignment, ``nonzero`` and
    ``index_fill_``."""

    class SmoothedTargets(nn.Module):
        def __init__(self, vocab, pad, eps):
            super().__init__()
            self.loss_fn = nn.KLDivLoss(reduction="sum")
            self.vocab, self.pad, self.eps = vocab, pad, eps
            self.last_dist = None

        def forward(self, log_probs, labels):
            assert log_probs.size(1) == self.vocab
            dist = log_probs.data.clone()
            dist.fill_(self.eps / (self.vocab - 2))
            dist.scatter_(1, labels.data.unsqueeze(1), 1.0 - self.eps)
            dist[:, self.pad] = 0
            rows = torch.nonzero(labels.data == self.pad)
            if rows.dim() > 0:
                dist.index_fill_(0, rows.squeeze(), 0.0)
            self.last_dist = dist
            return self.loss_fn(log_probs, dist.clone().detach())

    return SmoothedTargets


@pytest.mark.skipif(not hasattr(ta.Tensor, "scatter_"),
                    reason="needs Tensor.scatter_, index_fill_ and nonzero (added separately)")
@pytest.mark.parametrize("labels", [[2, 0, 4, 1, 0], [3, 1, 4, 0, 2], [2, 3, 4, 1, 3]])
def test_annotated_transformer_label_smoothing_runs_and_matches_pytorch(labels):
    torch = pytest.importorskip("torch")
    vocab, pad, eps = 5, 0, 0.4
    logits = np.random.default_rng(9).normal(size=(len(labels), vocab))
    ours = ta.tensor(logits, requires_grad=True)
    theirs = torch.tensor(logits, requires_grad=True)
    ours_module = _smoothing_module(ta, ta.nn)(vocab, pad, eps)
    theirs_module = _smoothing_module(torch, torch.nn)(vocab, pad, eps)
    got = ours_module(ours.log_softmax(dim=-1), ta.tensor(labels))
    expected = theirs_module(theirs.log_softmax(dim=-1), torch.tensor(labels))
    # the smoothed distribution, from numpy
    dist = np.full((len(labels), vocab), eps / (vocab - 2))
    dist[np.arange(len(labels)), labels] = 1 - eps
    dist[:, pad] = 0
    dist[np.array(labels) == pad] = 0
    np.testing.assert_allclose(ours_module.last_dist.numpy(), dist, rtol=1e-14)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    assert got.item() == pytest.approx(_np_kl(log_probs, dist, "sum"), rel=1e-12)
    assert got.item() == pytest.approx(expected.item(), rel=1e-12)
    got.backward()
    expected.backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("value", [-0.95, 0.0, 0.3, math.inf])
def test_kl_div_over_an_empty_broadcast_gives_a_zero_target_gradient(log_target, value):
    """A (1, 1) target against a (1, 0) input: the loss sums no terms, so its gradient with
    respect to the target is an empty sum, 0, whatever the target holds (the target's own
    terms, t ln t and eᵗ, may be nan or inf there)."""
    x = ta.zeros((1, 0), requires_grad=True)
    target = ta.tensor([[value]], requires_grad=True)
    loss = F.kl_div(x.log_softmax(-1), target, reduction="batchmean", log_target=log_target)
    assert loss.item() == 0.0
    (grad,) = ta.autograd.grad(loss, [target])
    np.testing.assert_array_equal(grad.numpy(), np.zeros((1, 1), np.float32))

