"""Optimizers, gradient clipping and LambdaLR against PyTorch, step by step, in float64."""

import math

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

SHAPES = ((4, 3), (3,), (2, 2, 5))
STEPS = 10


def twin_params(seed):
    """The same starting values as tinyattn Parameters and as torch leaf tensors (float64)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape) for shape in SHAPES]
    ours = [ta.nn.Parameter(array.copy()) for array in arrays]
    theirs = [torch.tensor(array.copy(), requires_grad=True) for array in arrays]
    return ours, theirs


def run_both(ours_opt, ours, theirs_opt, theirs, seed, steps=STEPS):
    """Give both optimizers the same random gradients each step; compare parameters each step."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        for p, q in zip(ours, theirs):
            grad = rng.standard_normal(p.shape)
            p.grad = ta.tensor(grad.copy())
            q.grad = torch.tensor(grad.copy())
        ours_opt.step()
        theirs_opt.step()
        assert_params_equal(ours, theirs)


def assert_params_equal(ours, theirs, rtol=1e-10):
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=rtol, atol=1e-13)


@pytest.mark.parametrize("options", [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.2, weight_decay=0.01),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.02, momentum=0.9, nesterov=True, weight_decay=0.1),
])
def test_sgd_matches_torch(options):
    ours, theirs = twin_params(0)
    run_both(ta.optim.SGD(ours, **options), ours, torch.optim.SGD(theirs, **options), theirs,
             seed=1)


@pytest.mark.parametrize("name, options", [
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.01, betas=(0.5, 0.9), eps=1e-7, weight_decay=0.3)),
])
def test_adam_and_adamw_match_torch(name, options):
    ours, theirs = twin_params(2)
    ours_opt = getattr(ta.optim, name)(ours, **options)
    theirs_opt = getattr(torch.optim, name)(theirs, **options)
    run_both(ours_opt, ours, theirs_opt, theirs, seed=3)
    for p, q in zip(ours, theirs):
        ours_state, theirs_state = ours_opt.state[p], theirs_opt.state[q]
        assert ours_state["step"] == int(theirs_state["step"].item()) == STEPS
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(ours_state[key], theirs_state[key].numpy(), rtol=1e-10)


@pytest.mark.parametrize("name", ["SGD", "AdamW"])
def test_param_groups_match_torch(name):
    ours, theirs = twin_params(4)
    ours_groups = [{"params": ours[:2]}, {"params": ours[2:], "lr": 0.003, "weight_decay": 0.2}]
    theirs_groups = [{"params": theirs[:2]},
                     {"params": theirs[2:], "lr": 0.003, "weight_decay": 0.2}]
    options = dict(lr=0.03, momentum=0.9) if name == "SGD" else dict(lr=0.03)
    ours_opt = getattr(ta.optim, name)(ours_groups, **options)
    theirs_opt = getattr(torch.optim, name)(theirs_groups, **options)
    run_both(ours_opt, ours, theirs_opt, theirs, seed=5)
    ours_groups_saved = ours_opt.state_dict()["param_groups"]
    theirs_groups_saved = theirs_opt.state_dict()["param_groups"]
    for mine, torchs in zip(ours_groups_saved, theirs_groups_saved):
        assert mine["params"] == torchs["params"]
        assert {k: torchs[k] for k in mine} == mine


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, math.inf])
@pytest.mark.parametrize("max_norm", [0.3, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    ours, theirs = twin_params(6)
    rng = np.random.default_rng(7)
    for p, q in zip(ours, theirs):
        grad = rng.standard_normal(p.shape)
        p.grad, q.grad = ta.tensor(grad.copy()), torch.tensor(grad.copy())
    total = ta.nn.utils.clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    np.testing.assert_allclose(total.item(), expected.item(), rtol=1e-12)
    assert total.dtype == np.float64
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def test_lambda_lr_matches_torch():
    ours, theirs = twin_params(8)
    ours_opt = ta.optim.SGD([{"params": ours[:1]}, {"params": ours[1:], "lr": 0.5}], lr=0.1)
    theirs_opt = torch.optim.SGD([{"params": theirs[:1]}, {"params": theirs[1:], "lr": 0.5}],
                                 lr=0.1)
    lambdas = [lambda s: 0.9**s, lambda s: 1.0 / (1 + s) ** 0.5]
    ours_sched = ta.optim.LambdaLR(ours_opt, lambdas)
    theirs_sched = torch.optim.lr_scheduler.LambdaLR(theirs_opt, lambdas)
    for _ in range(6):
        assert ours_sched.get_last_lr() == theirs_sched.get_last_lr()
        assert [g["lr"] for g in ours_opt.param_groups] == [
            g["lr"] for g in theirs_opt.param_groups]
        assert [g["initial_lr"] for g in ours_opt.param_groups] == [0.1, 0.5]
        theirs_opt.step()
        ours_sched.step()
        theirs_sched.step()


@pytest.mark.parametrize("name, options", [
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.2, betas=(0.6, 0.8))),
    ("Adam", dict(lr=0.01, maximize=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, maximize=True, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.3, decoupled_weight_decay=True)),
    ("SGD", dict(lr=0.05, momentum=0.9, maximize=True, weight_decay=0.1)),
    ("SGD", dict()),
])
def test_amsgrad_maximize_and_decoupled_options_match_torch(name, options):
    ours, theirs = twin_params(10)
    ours_opt = getattr(ta.optim, name)(ours, **options)
    theirs_opt = getattr(torch.optim, name)(theirs, **options)
    run_both(ours_opt, ours, theirs_opt, theirs, seed=11)
    saved = ours_opt.state_dict()["param_groups"][0]
    assert {k: theirs_opt.state_dict()["param_groups"][0][k] for k in saved} == saved
    if options.get("amsgrad"):
        for p, q in zip(ours, theirs):
            np.testing.assert_allclose(ours_opt.state[p]["max_exp_avg_sq"],
                                       theirs_opt.state[q]["max_exp_avg_sq"].numpy(),
                                       rtol=1e-10)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW"])
def test_editing_param_groups_and_adding_one_mid_run_match_torch(name):
    ours, theirs = twin_params(12)
    options = dict(lr=0.02, momentum=0.5) if name == "SGD" else dict(lr=0.02)
    ours_opt = getattr(ta.optim, name)(ours[:2], **options)
    theirs_opt = getattr(torch.optim, name)(theirs[:2], **options)
    run_both(ours_opt, ours[:2], theirs_opt, theirs[:2], seed=13, steps=3)
    for opt in (ours_opt, theirs_opt):
        opt.param_groups[0]["lr"] = 0.07
        opt.param_groups[0]["weight_decay"] = 0.05
    ours_opt.add_param_group({"params": [ours[2]], "lr": 0.004})
    theirs_opt.add_param_group({"params": [theirs[2]], "lr": 0.004})
    run_both(ours_opt, ours, theirs_opt, theirs, seed=14, steps=4)


def test_optimizer_state_dict_resume_follows_torchs_trajectory():
    ours, theirs = twin_params(15)
    ours_opt = ta.optim.AdamW(ours, lr=0.03, amsgrad=True)
    theirs_opt = torch.optim.AdamW(theirs, lr=0.03, amsgrad=True)
    run_both(ours_opt, ours, theirs_opt, theirs, seed=16, steps=3)
    saved = ours_opt.state_dict()
    resumed = [ta.nn.Parameter(p.numpy().copy()) for p in ours]
    resumed_opt = ta.optim.AdamW(resumed, lr=0.5, amsgrad=True)
    resumed_opt.load_state_dict(saved)
    assert resumed_opt.param_groups[0]["lr"] == 0.03
    run_both(resumed_opt, resumed, theirs_opt, theirs, seed=17, steps=3)


def schedule_pair(name, options):
    ours, theirs = twin_params(18)
    ours_opt = ta.optim.SGD([{"params": ours[:1]}, {"params": ours[1:], "lr": 0.5}], lr=0.1)
    theirs_opt = torch.optim.SGD([{"params": theirs[:1]}, {"params": theirs[1:], "lr": 0.5}],
                                 lr=0.1)
    return (getattr(ta.optim.lr_scheduler, name)(ours_opt, **options), ours_opt,
            getattr(torch.optim.lr_scheduler, name)(theirs_opt, **options), theirs_opt)


@pytest.mark.parametrize("name, options", [
    ("StepLR", dict(step_size=3)),
    ("StepLR", dict(step_size=2, gamma=0.7)),
    ("LinearLR", dict()),
    ("LinearLR", dict(start_factor=0.1, end_factor=0.5, total_iters=4)),
    ("LinearLR", dict(start_factor=1.0, end_factor=0.0, total_iters=6)),
    ("CosineAnnealingLR", dict(T_max=5)),
    ("CosineAnnealingLR", dict(T_max=4, eta_min=0.01)),
    ("LambdaLR", dict(lr_lambda=lambda step: 1 / (1 + step))),
])
def test_schedulers_give_torchs_learning_rates_step_by_step(name, options):
    ours, ours_opt, theirs, theirs_opt = schedule_pair(name, options)
    for step in range(14):  # past T_max / total_iters: the cosine climbs back, linear holds
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-13, abs=1e-15)
        assert [g["lr"] for g in ours_opt.param_groups] == pytest.approx(
            [g["lr"] for g in theirs_opt.param_groups], rel=1e-13, abs=1e-15)
        if step == 6:  # a change made outside the scheduler is kept, as in PyTorch
            for opt in (ours_opt, theirs_opt):
                opt.param_groups[1]["lr"] *= 0.5
        theirs_opt.step()
        ours.step()
        theirs.step()


@pytest.mark.parametrize("clip_value", [0.3, 10.0])
def test_clip_grad_value_matches_torch(clip_value):
    ours, theirs = twin_params(19)
    rng = np.random.default_rng(20)
    for p, q in zip(ours, theirs):
        grad = rng.standard_normal(p.shape)
        p.grad, q.grad = ta.tensor(grad.copy()), torch.tensor(grad.copy())
    ours[1].grad = None
    theirs[1].grad = None
    assert ta.nn.utils.clip_grad_value_(ours, clip_value, foreach=None) is None
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    for p, q in zip(ours, theirs):
        if q.grad is None:
            assert p.grad is None
        else:
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
