"""Optimizers, LR schedules and gradient clipping against hand-written numpy formulas."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.optim import SGD, Adam, AdamW, CosineWarmup, LambdaLR, cosine_warmup_lr


def make_params(seed, shapes=((3, 4), (4,), (2, 3, 2)), dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [ta.nn.Parameter(rng.standard_normal(shape).astype(dtype)) for shape in shapes]


def gradient_sequence(params, steps, seed):
    """``steps`` lists of gradient arrays, one per parameter."""
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(p.shape).astype(p.dtype) for p in params] for _ in range(steps)]


def run(opt, params, grads_per_step):
    for grads in grads_per_step:
        for param, grad in zip(params, grads):
            param.grad = ta.tensor(grad.copy())
        opt.step()


def reference_sgd(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """SGD as written in the PyTorch docs, one parameter."""
    p = p.copy()
    buf = None
    for g in grads:
        d_p = g + weight_decay * p
        if momentum:
            buf = d_p.copy() if buf is None else momentum * buf + (1 - dampening) * d_p
            d_p = d_p + momentum * buf if nesterov else buf
        p = p - lr * d_p
    return p


def reference_adam(p, grads, lr, beta1, beta2, eps, weight_decay, decoupled):
    """Adam / AdamW from the papers' equations with bias correction, one parameter."""
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p - lr * weight_decay * p
        else:
            g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p


# ---- update rules ---------------------------------------------------------------------------
def test_sgd_single_step_is_p_minus_lr_times_grad():
    p = ta.nn.Parameter(np.array([1.0, -2.0, 3.0]))
    p.grad = ta.tensor(np.array([0.5, 0.25, -1.0]))
    SGD([p], lr=0.1).step()
    np.testing.assert_array_equal(p.numpy(), [1.0 - 0.05, -2.0 - 0.025, 3.0 + 0.1])


@pytest.mark.parametrize("options", [
    dict(momentum=0.9),
    dict(momentum=0.9, dampening=0.3),
    dict(momentum=0.8, nesterov=True),
    dict(weight_decay=0.1),
    dict(momentum=0.5, weight_decay=0.05, nesterov=True),
])
def test_sgd_matches_reference_formula_over_several_steps(options):
    params = make_params(0)
    start = [p.numpy().copy() for p in params]
    grads = gradient_sequence(params, 5, seed=1)
    run(SGD(params, lr=0.05, **options), params, grads)
    for k, param in enumerate(params):
        expected = reference_sgd(start[k], [step[k] for step in grads], 0.05, **options)
        np.testing.assert_allclose(param.numpy(), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cls, weight_decay", [(Adam, 0.0), (Adam, 0.1), (AdamW, 0.1)])
def test_adam_matches_reference_formula_over_several_steps(cls, weight_decay):
    params = make_params(2)
    start = [p.numpy().copy() for p in params]
    grads = gradient_sequence(params, 6, seed=3)
    run(cls(params, lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=weight_decay),
        params, grads)
    for k, param in enumerate(params):
        expected = reference_adam(start[k], [step[k] for step in grads], 0.01, 0.8, 0.95, 1e-6,
                                  weight_decay, decoupled=cls is AdamW)
        np.testing.assert_allclose(param.numpy(), expected, rtol=1e-12, atol=1e-14)


def test_adamw_default_weight_decay_is_decoupled_and_adam_default_is_zero():
    assert AdamW(make_params(0)).defaults["weight_decay"] == 0.01
    assert Adam(make_params(0)).defaults["weight_decay"] == 0
    p = ta.nn.Parameter(np.array([2.0]))
    p.grad = ta.tensor(np.array([0.0]))
    AdamW([p], lr=0.5).step()  # zero gradient: only the decay 1 - lr * wd acts
    np.testing.assert_allclose(p.numpy(), [2.0 * (1 - 0.5 * 0.01)], rtol=1e-15)


def test_adam_state_holds_integer_step_and_moments_like_torch():
    params = make_params(4)
    opt = Adam(params, lr=0.1, betas=(0.5, 0.75))
    grads = gradient_sequence(params, 2, seed=5)
    run(opt, params, grads)
    state = opt.state[params[0]]
    assert sorted(state) == ["exp_avg", "exp_avg_sq", "step"]
    assert type(state["step"]) is int and state["step"] == 2
    g1, g2 = grads[0][0], grads[1][0]
    np.testing.assert_allclose(state["exp_avg"], 0.5 * (0.5 * g1) + 0.5 * g2, rtol=1e-14)
    np.testing.assert_allclose(state["exp_avg_sq"], 0.75 * 0.25 * g1**2 + 0.25 * g2**2,
                               rtol=1e-14)


def test_float32_parameters_stay_float32_and_match_reference_loosely():
    params = make_params(6, dtype=np.float32)
    start = [p.numpy().astype(np.float64) for p in params]
    grads = gradient_sequence(params, 3, seed=7)
    run(AdamW(params, lr=0.01), params, grads)
    for k, param in enumerate(params):
        assert param.dtype == np.float32
        expected = reference_adam(start[k], [step[k].astype(np.float64) for step in grads],
                                  0.01, 0.9, 0.999, 1e-8, 0.01, decoupled=True)
        np.testing.assert_allclose(param.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_updates_are_in_place_and_gradients_untouched():
    params = make_params(8)
    arrays = [p.numpy() for p in params]
    for cls, options in ((SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.1)), (Adam, {})):
        grads = gradient_sequence(params, 1, seed=9)[0]
        for param, grad in zip(params, grads):
            param.grad = ta.tensor(grad.copy())
        cls(params, **options).step()
        for param, array, grad in zip(params, arrays, grads):
            assert param.numpy() is array
            np.testing.assert_array_equal(param.grad.numpy(), grad)


def test_adam_updates_a_strided_parameter_in_place_like_a_contiguous_one():
    base = np.random.default_rng(10).standard_normal((4, 3))
    strided = ta.nn.Parameter(base.T)  # (3, 4) view, not C-contiguous
    contiguous = ta.nn.Parameter(np.ascontiguousarray(base.T))
    view = strided.numpy()
    grads = gradient_sequence([contiguous], 3, seed=11)
    run(Adam([strided], lr=0.1), [strided], grads)
    run(Adam([contiguous], lr=0.1), [contiguous], grads)
    assert strided.numpy() is view
    np.testing.assert_array_equal(strided.numpy(), contiguous.numpy())


def test_parameters_without_grad_are_skipped():
    with_grad, without_grad = make_params(12, shapes=((3,), (2,)))
    before = without_grad.numpy().copy()
    with_grad.grad = ta.tensor(np.ones(3))
    for opt in (SGD([with_grad, without_grad], lr=0.1, momentum=0.9), Adam([with_grad,
                                                                            without_grad])):
        opt.step()
        np.testing.assert_array_equal(without_grad.numpy(), before)
        assert without_grad not in opt.state


def test_param_groups_use_their_own_options():
    a, b = make_params(13, shapes=((3,), (3,)))
    start_a, start_b = a.numpy().copy(), b.numpy().copy()
    opt = SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[1]["momentum"] == 0.9
    grads = gradient_sequence([a, b], 3, seed=14)
    run(opt, [a, b], grads)
    np.testing.assert_allclose(a.numpy(), reference_sgd(start_a, [g[0] for g in grads], 0.1),
                               rtol=1e-13)
    np.testing.assert_allclose(
        b.numpy(), reference_sgd(start_b, [g[1] for g in grads], 0.5, momentum=0.9), rtol=1e-13)


def test_add_param_group_fills_defaults_and_later_params_count_their_own_steps():
    a, b = make_params(15, shapes=((2,), (2,)))
    opt = Adam([a], lr=0.1)
    a.grad = ta.tensor(np.ones(2))
    opt.step()
    opt.add_param_group({"params": [b], "lr": 0.2})
    assert opt.param_groups[1]["betas"] == (0.9, 0.999) and opt.param_groups[1]["lr"] == 0.2
    b.grad = ta.tensor(np.ones(2))
    opt.step()
    assert opt.state[a]["step"] == 2 and opt.state[b]["step"] == 1


def test_zero_grad_sets_none_or_zeroes_in_place():
    a, b = make_params(16, shapes=((2,), (3,)))
    a.grad, b.grad = ta.tensor(np.ones(2)), ta.tensor(np.ones(3))
    opt = SGD([a, b], lr=0.1)
    grad_array = a.grad.numpy()
    opt.zero_grad(set_to_none=False)
    assert a.grad.numpy() is grad_array
    np.testing.assert_array_equal(a.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert a.grad is None and b.grad is None


def test_step_returns_the_closure_loss():
    p = ta.nn.Parameter(np.array([3.0]))
    opt = SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 9.0
    np.testing.assert_array_equal(p.numpy(), [3.0 - 0.25 * 6.0])


def test_repeated_runs_are_bitwise_identical_including_parallel_kernel_sizes():
    results = []
    for _ in range(2):
        params = make_params(17, shapes=((100, 90), (7,)))
        run(AdamW(params, lr=0.01), params, gradient_sequence(params, 3, seed=18))
        results.append([p.numpy().copy() for p in params])
    for first, second in zip(*results):
        np.testing.assert_array_equal(first, second)


# ---- state dicts ----------------------------------------------------------------------------
@pytest.mark.parametrize("cls, options", [
    (SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    (Adam, dict(lr=0.01, weight_decay=0.1)),
    (AdamW, dict(lr=0.01)),
])
def test_state_dict_round_trip_resumes_bitwise(cls, options):
    params = make_params(20)
    groups = [{"params": params[:2]}, {"params": params[2:], "lr": 0.003}]
    grads = gradient_sequence(params, 6, seed=21)
    opt = cls(groups, **options)
    run(opt, params, grads[:3])
    saved = opt.state_dict()
    saved_params = [p.numpy().copy() for p in params]
    run(opt, params, grads[3:])

    resumed = [ta.nn.Parameter(array.copy()) for array in saved_params]
    other = cls([{"params": resumed[:2]}, {"params": resumed[2:]}], **options)
    saved_arrays = {(i, k): v.copy() for i, s in saved["state"].items() for k, v in s.items()
                    if isinstance(v, np.ndarray)}
    other.load_state_dict(saved)
    assert other.param_groups[1]["lr"] == 0.003
    run(other, resumed, grads[3:])
    for original, copy in zip(params, resumed):
        np.testing.assert_array_equal(original.numpy(), copy.numpy())
    for (index, key), array in saved_arrays.items():  # loading copied the arrays
        np.testing.assert_array_equal(saved["state"][index][key], array)


def test_state_dict_has_torch_structure_and_is_a_snapshot():
    params = make_params(22)
    opt = Adam([{"params": params[:1]}, {"params": params[1:], "lr": 0.5}])
    run(opt, params, gradient_sequence(params, 1, seed=23))
    saved = opt.state_dict()
    assert [g["params"] for g in saved["param_groups"]] == [[0], [1, 2]]
    assert saved["param_groups"][1]["lr"] == 0.5
    assert sorted(saved["state"]) == [0, 1, 2] and saved["state"][2]["step"] == 1
    exp_avg = saved["state"][0]["exp_avg"].clone()
    run(opt, params, gradient_sequence(params, 1, seed=24))
    np.testing.assert_array_equal(saved["state"][0]["exp_avg"], exp_avg)


def _corrupt(saved, how):
    if how == "groups":
        saved["param_groups"] = saved["param_groups"][:1]
    elif how == "group size":
        saved["param_groups"][0]["params"] = [0]
    elif how == "shape":
        saved["state"][1]["exp_avg"] = np.zeros((5,))
    elif how == "step":
        saved["state"][0]["step"] = -1
    elif how == "entries":
        del saved["state"][0]["exp_avg_sq"]
    elif how == "option":
        saved["param_groups"][1]["betas"] = (1.5, 0.9)
    elif how == "unknown index":
        saved["state"][7] = saved["state"][0]
    elif how == "keys":
        del saved["state"]
    return saved


@pytest.mark.parametrize("how", ["groups", "group size", "shape", "step", "entries", "option",
                                 "unknown index", "keys"])
def test_mismatched_state_dict_raises_and_changes_nothing(how):
    params = make_params(25)
    opt = Adam([{"params": params[:2]}, {"params": params[2:], "lr": 0.5}])
    run(opt, params, gradient_sequence(params, 2, seed=26))
    before = opt.state_dict()
    with pytest.raises(ValueError, match="load_state_dict"):
        opt.load_state_dict(_corrupt(opt.state_dict(), how))
    after = opt.state_dict()
    assert after["param_groups"] == before["param_groups"]
    for index, state in before["state"].items():
        assert after["state"][index]["step"] == state["step"]
        np.testing.assert_array_equal(after["state"][index]["exp_avg"], state["exp_avg"])


# ---- bad input ------------------------------------------------------------------------------
def test_empty_parameter_list_is_rejected():
    with pytest.raises(ValueError, match="^optimizer got an empty parameter list$"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        Adam(iter([]))


@pytest.mark.parametrize("cls, key, value", [
    (SGD, "lr", -0.1), (SGD, "lr", math.nan), (SGD, "weight_decay", -1.0),
    (SGD, "momentum", -0.5), (SGD, "weight_decay", math.inf),
    (Adam, "lr", -1e-3), (Adam, "lr", math.inf), (Adam, "eps", -1e-8), (Adam, "eps", math.nan),
    (Adam, "weight_decay", -0.1), (AdamW, "weight_decay", math.inf), (AdamW, "lr", -2.0),
])
def test_bad_hyperparameters_are_rejected_with_their_value(cls, key, value):
    options = {"lr": 0.1, key: value}
    with pytest.raises(ValueError, match=f"{cls.__name__}: {key} .*got {value}"):
        cls(make_params(0), **options)


@pytest.mark.parametrize("betas", [(1.0, 0.999), (0.9, 1.0), (-0.1, 0.9), (0.9, 1.5)])
def test_betas_outside_zero_one_are_rejected(betas):
    with pytest.raises(ValueError, match=r"betas\[[01]\] must be in \[0, 1\)"):
        Adam(make_params(0), betas=betas)
    with pytest.raises(ValueError, match="betas"):
        AdamW([{"params": make_params(0), "betas": betas}])


def test_nesterov_needs_momentum_and_no_dampening():
    with pytest.raises(ValueError, match="nesterov=True requires momentum > 0.*momentum=0"):
        SGD(make_params(0), lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="dampening=0.5"):
        SGD(make_params(0), lr=0.1, momentum=0.9, dampening=0.5, nesterov=True)


def test_bad_option_in_one_group_is_rejected():
    a, b = make_params(0, shapes=((2,), (2,)))
    with pytest.raises(ValueError, match="lr must be a number >= 0, got -1"):
        SGD([{"params": [a]}, {"params": [b], "lr": -1}], lr=0.1)


def test_parameter_in_two_groups_is_rejected():
    a, b = make_params(0, shapes=((2,), (2,)))
    with pytest.raises(ValueError, match="more than one parameter group"):
        SGD([{"params": [a, b]}, {"params": [b]}], lr=0.1)
    opt = Adam([a])
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    assert len(opt.param_groups) == 1
    with pytest.raises(ValueError, match="appears twice"):
        SGD([a, a], lr=0.1)


def test_non_float_non_tensor_and_non_leaf_parameters_are_rejected():
    with pytest.raises(TypeError, match="float tensors.*int64"):
        SGD([ta.tensor([1, 2, 3])], lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors.*ndarray"):
        Adam([np.zeros(3)])
    with pytest.raises(TypeError, match="single Tensor"):
        Adam(make_params(0)[0])
    with pytest.raises(TypeError, match="set"):
        Adam([{"params": set(make_params(0))}])
    leaf = make_params(0)[0]
    with pytest.raises(ValueError, match="non-leaf"):
        SGD([leaf * 2], lr=0.1)


def test_gradient_of_wrong_shape_is_refused_when_assigned_as_in_pytorch():
    a, b = make_params(27, shapes=((2,), (3,)))
    a.grad = ta.tensor(np.ones(2))
    with pytest.raises(RuntimeError, match=r"gradient of shape \(4,\) to a tensor of shape \(3,\)"):
        b.grad = ta.tensor(np.ones(4))
    assert b.grad is None
    # a parameter whose data was swapped for another shape is caught before any update
    b.grad = ta.tensor(np.ones(3))
    b.data = np.ones(4)
    before = a.numpy().copy()
    with pytest.raises(ValueError, match=r"gradient of shape \(3,\).*parameter of shape \(4,\)"):
        SGD([a, b], lr=0.1).step()
    np.testing.assert_array_equal(a.numpy(), before)


# ---- learning-rate schedules ----------------------------------------------------------------
def closed_form_cosine(step, base, warmup, total, floor):
    if step < warmup:
        return base * (step + 1) / (warmup + 1)
    progress = min(step - warmup, total - warmup) / (total - warmup)
    return floor + 0.5 * (base - floor) * (1 + math.cos(math.pi * progress))


def test_cosine_warmup_values_at_warmup_peak_middle_and_end():
    base, floor = 3e-3, 1e-4
    assert cosine_warmup_lr(0, base, 9, 109, floor) == pytest.approx(base / 10, rel=1e-15)
    assert cosine_warmup_lr(4, base, 9, 109, floor) == pytest.approx(base / 2, rel=1e-15)
    assert cosine_warmup_lr(9, base, 9, 109, floor) == base
    assert cosine_warmup_lr(59, base, 9, 109, floor) == pytest.approx((base + floor) / 2,
                                                                      rel=1e-14)
    assert cosine_warmup_lr(109, base, 9, 109, floor) == pytest.approx(floor, rel=1e-14)
    assert cosine_warmup_lr(500, base, 9, 109, floor) == floor
    for step in range(0, 130, 7):
        assert cosine_warmup_lr(step, base, 9, 109, floor) == pytest.approx(
            closed_form_cosine(step, base, 9, 109, floor), rel=1e-14)


def test_cosine_warmup_scheduler_drives_each_group_from_its_initial_lr():
    a, b = make_params(30, shapes=((2,), (2,)))
    opt = AdamW([{"params": [a]}, {"params": [b], "lr": 0.01}], lr=0.1)
    scheduler = CosineWarmup(opt, warmup_steps=3, total_steps=10, min_lr=1e-3)
    seen = []
    for _ in range(12):
        seen.append([group["lr"] for group in opt.param_groups])
        assert scheduler.get_last_lr() == seen[-1]
        opt.step()
        scheduler.step()
    for step, (lr_a, lr_b) in enumerate(seen):
        assert lr_a == pytest.approx(closed_form_cosine(step, 0.1, 3, 10, 1e-3), rel=1e-14)
        assert lr_b == pytest.approx(closed_form_cosine(step, 0.01, 3, 10, 1e-3), rel=1e-14)
    assert opt.param_groups[0]["initial_lr"] == 0.1


def test_scheduler_state_dict_resumes_the_schedule():
    opt = SGD(make_params(31), lr=0.2)
    scheduler = CosineWarmup(opt, 2, 8)
    for _ in range(4):
        scheduler.step()
    saved = scheduler.state_dict()
    other_opt = SGD(make_params(31), lr=0.2)
    other = CosineWarmup(other_opt, 2, 8)
    other.load_state_dict(saved)
    scheduler.step()
    other.step()
    assert other.get_last_lr() == scheduler.get_last_lr()
    with pytest.raises(ValueError, match="expected keys"):
        other.load_state_dict({"last_epoch": 3})


def test_lambda_lr_multiplies_initial_lr_per_group():
    a, b = make_params(32, shapes=((2,), (2,)))
    opt = SGD([{"params": [a]}, {"params": [b], "lr": 2.0}], lr=1.0)
    scheduler = LambdaLR(opt, [lambda s: 0.5**s, lambda s: 1.0 / (s + 1)])
    assert scheduler.get_last_lr() == [1.0, 2.0]
    scheduler.step()
    scheduler.step()
    assert scheduler.get_last_lr() == [0.25, 2.0 / 3.0]
    assert [g["lr"] for g in opt.param_groups] == [0.25, 2.0 / 3.0]


@pytest.mark.parametrize("args, error, message", [
    ((-1, 1.0, 2, 10, 0.0), ValueError, "step must be an int >= 0"),
    ((0, 1.0, -1, 10, 0.0), ValueError, "warmup_steps must be an int >= 0"),
    ((0, 1.0, 5, 5, 0.0), ValueError, "total_steps must be an int >= 6"),
    ((0, 1.0, 2, 10, 2.0), ValueError, "min_lr must be <= base_lr"),
    ((0, -1.0, 2, 10, 0.0), ValueError, "base_lr must be a number >= 0"),
    ((0, 1.0, 2.5, 10, 0.0), TypeError, "warmup_steps must be an int"),
])
def test_bad_schedule_arguments_are_rejected(args, error, message):
    with pytest.raises(error, match=message):
        cosine_warmup_lr(*args)


def test_bad_scheduler_construction_is_rejected():
    opt = SGD([{"params": make_params(0)[:1]}, {"params": make_params(1)[:1]}], lr=0.1)
    with pytest.raises(ValueError, match="expected 2 lr_lambdas.*got 1"):
        LambdaLR(opt, [lambda s: 1.0])
    with pytest.raises(ValueError, match="min_lr must be <= base_lr"):
        CosineWarmup(opt, 1, 10, min_lr=1.0)
    with pytest.raises(ValueError, match="initial_lr"):
        LambdaLR(opt, lambda s: 1.0, last_epoch=3)


# ---- gradient clipping ----------------------------------------------------------------------
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_numpy(norm_type, max_norm):
    params = make_params(40)
    grads = gradient_sequence(params, 1, seed=41)[0]
    for param, grad in zip(params, grads):
        param.grad = ta.tensor(grad.copy())
    flat = np.concatenate([g.ravel() for g in grads])
    if norm_type == math.inf:
        expected_norm = np.abs(flat).max()
    else:
        expected_norm = (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    total = ta.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    assert isinstance(total, ta.Tensor) and total.shape == ()
    np.testing.assert_allclose(total.item(), expected_norm, rtol=1e-13)
    scale = min(max_norm / (expected_norm + 1e-6), 1.0)
    for param, grad in zip(params, grads):
        np.testing.assert_allclose(param.grad.numpy(), grad * scale, rtol=1e-13)


def test_clip_grad_norm_skips_missing_grads_and_handles_none_at_all():
    a, b = make_params(42, shapes=((2,), (3,)))
    a.grad = ta.tensor(np.array([6.0, 8.0]))
    assert ta.nn.utils.clip_grad_norm_([a, b], 5.0).item() == 10.0
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 4.0], rtol=1e-6)
    assert b.grad is None
    empty = ta.nn.utils.clip_grad_norm_([b], 1.0)
    assert empty.item() == 0.0 and empty.dtype == np.float32


def test_clip_grad_norm_keeps_float32_and_accepts_a_single_tensor():
    p = ta.nn.Parameter(np.zeros(2, dtype=np.float32))
    p.grad = ta.tensor(np.array([3.0, 4.0], dtype=np.float32))
    total = ta.nn.utils.clip_grad_norm_(p, 1.0)
    assert total.dtype == np.float32 and p.grad.dtype == np.float32
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_clip_grad_norm_nonfinite_and_bad_arguments():
    p = ta.nn.Parameter(np.zeros(2))
    p.grad = ta.tensor(np.array([np.inf, 1.0]))
    with pytest.raises(RuntimeError, match="error_if_nonfinite"):
        ta.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(p.grad.numpy(), [np.inf, 1.0])
    with pytest.raises(ValueError, match="max_norm must be >= 0, got -1.0"):
        ta.nn.utils.clip_grad_norm_([p], -1.0)
    with pytest.raises(ValueError, match="norm_type must be a number > 0 or inf, got 0.0"):
        ta.nn.utils.clip_grad_norm_([p], 1.0, norm_type=0)
    with pytest.raises(TypeError, match=r"parameters\[0\] must be a Tensor"):
        ta.nn.utils.clip_grad_norm_([np.zeros(2)], 1.0)


# ---- AMSGrad, maximize, grad mode -----------------------------------------------------------
def reference_amsgrad(p, grads, lr, beta1, beta2, eps, weight_decay, decoupled):
    """AMSGrad as in PyTorch's docs: Adam with the running maximum of v̂ in the denominator."""
    p, m, v, v_max = p.copy(), np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p - lr * weight_decay * p
        else:
            g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        v_max = np.maximum(v_max, v)
        p = p - lr / (1 - beta1**t) * m / (np.sqrt(v_max / (1 - beta2**t)) + eps)
    return p


@pytest.mark.parametrize("cls, weight_decay", [(Adam, 0.0), (Adam, 0.1), (AdamW, 0.1)])
def test_amsgrad_matches_reference_formula(cls, weight_decay):
    params = make_params(50)
    start = [p.numpy().copy() for p in params]
    grads = gradient_sequence(params, 6, seed=51)
    for step in grads[3:]:  # small late gradients: v falls below its running maximum
        for g in step:
            g *= 0.01
    opt = cls(params, lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=weight_decay,
              amsgrad=True)
    run(opt, params, grads)
    for k, param in enumerate(params):
        expected = reference_amsgrad(start[k], [step[k] for step in grads], 0.01, 0.8, 0.95,
                                     1e-6, weight_decay, decoupled=cls is AdamW)
        np.testing.assert_allclose(param.numpy(), expected, rtol=1e-12, atol=1e-14)
        without = reference_adam(start[k], [step[k] for step in grads], 0.01, 0.8, 0.95, 1e-6,
                                 weight_decay, decoupled=cls is AdamW)
        assert not np.allclose(expected, without, rtol=1e-6)  # the maximum mattered
    assert sorted(opt.state[params[0]]) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]


@pytest.mark.parametrize("cls, options", [(SGD, dict(lr=0.1, momentum=0.9)),
                                          (Adam, dict(lr=0.1)), (AdamW, dict(lr=0.1))])
def test_maximize_is_descent_on_the_negated_gradient(cls, options):
    up, down = make_params(52), make_params(52)
    grads = gradient_sequence(up, 3, seed=53)
    run(cls(up, maximize=True, **options), up, grads)
    run(cls(down, **options), down, [[-g for g in step] for step in grads])
    for a, b in zip(up, down):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_step_runs_outside_the_graph_and_the_closure_inside_it():
    p = ta.nn.Parameter(np.array([1.0, 2.0]))
    seen = []

    class Recording(SGD):
        def _update(self, group, params, grads):
            seen.append(("update", ta.is_grad_enabled()))
            super()._update(group, params, grads)

    opt = Recording([p], lr=0.1)

    def closure():
        seen.append(("closure", ta.is_grad_enabled()))
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    opt.step(closure)
    assert seen == [("closure", True), ("update", False)]
    assert ta.is_grad_enabled()


def test_an_old_state_dict_without_the_newer_options_loads_with_the_defaults():
    params = make_params(54)
    opt = Adam(params, lr=0.02)
    run(opt, params, gradient_sequence(params, 2, seed=55))
    saved = opt.state_dict()
    for group in saved["param_groups"]:
        for key in ("amsgrad", "maximize", "foreach", "fused", "decoupled_weight_decay"):
            del group[key]
    other = Adam(make_params(54), lr=0.5)
    other.load_state_dict(saved)
    assert other.param_groups[0]["lr"] == 0.02 and other.param_groups[0]["amsgrad"] is False


def test_amsgrad_state_round_trips_and_is_required_on_load():
    params = make_params(56)
    opt = AdamW(params, amsgrad=True)
    run(opt, params, gradient_sequence(params, 2, seed=57))
    saved = opt.state_dict()
    other = AdamW(make_params(56), amsgrad=True)
    other.load_state_dict(saved)
    np.testing.assert_array_equal(other.state_dict()["state"][0]["max_exp_avg_sq"],
                                  saved["state"][0]["max_exp_avg_sq"])
    del saved["state"][0]["max_exp_avg_sq"]
    with pytest.raises(ValueError, match=r"state\[0\]: expected entries \['exp_avg', "
                                         r"'exp_avg_sq', 'max_exp_avg_sq', 'step'\]"):
        other.load_state_dict(saved)


# ---- PyTorch's schedulers, closed forms -----------------------------------------------------
def lrs_of(scheduler, steps):
    lrs = []
    for _ in range(steps):
        lrs.append(scheduler.get_last_lr()[0])
        scheduler.step()
    return lrs


def test_step_lr_is_gamma_to_the_number_of_finished_periods():
    opt = SGD(make_params(60), lr=0.8)
    lrs = lrs_of(ta.optim.StepLR(opt, step_size=3, gamma=0.5), 10)
    assert lrs == pytest.approx([0.8 * 0.5 ** (s // 3) for s in range(10)], rel=1e-15)


def test_linear_lr_interpolates_the_factor_then_holds():
    opt = SGD(make_params(61), lr=2.0)
    lrs = lrs_of(ta.optim.LinearLR(opt, start_factor=0.2, end_factor=0.8, total_iters=4), 8)
    factors = [0.2 + 0.6 * min(s, 4) / 4 for s in range(8)]
    assert lrs == pytest.approx([2.0 * f for f in factors], rel=1e-13)


def test_cosine_annealing_follows_the_closed_form_within_t_max():
    opt = SGD(make_params(62), lr=0.3)
    lrs = lrs_of(ta.optim.CosineAnnealingLR(opt, T_max=10, eta_min=0.01), 11)
    closed = [0.01 + 0.29 * (1 + math.cos(math.pi * s / 10)) / 2 for s in range(11)]
    assert lrs == pytest.approx(closed, rel=1e-12)


def test_recursive_schedules_resume_from_their_state_dict():
    for make in (lambda o: ta.optim.StepLR(o, 2), lambda o: ta.optim.LinearLR(o),
                 lambda o: ta.optim.CosineAnnealingLR(o, 6)):
        opt = SGD(make_params(63), lr=0.4)
        scheduler = make(opt)
        for _ in range(3):
            scheduler.step()
        saved_opt, saved = opt.state_dict(), scheduler.state_dict()
        expected = lrs_of(scheduler, 5)
        other_opt = SGD(make_params(63), lr=0.4)
        other = make(other_opt)
        other_opt.load_state_dict(saved_opt)
        other.load_state_dict(saved)
        assert lrs_of(other, 5) == expected


@pytest.mark.parametrize("make, error, message", [
    (lambda o: ta.optim.StepLR(o, step_size=0), ValueError,
     "StepLR: step_size must be an int >= 1"),
    (lambda o: ta.optim.StepLR(o, step_size=2.5), TypeError, "step_size must be an int"),
    (lambda o: ta.optim.StepLR(o, 2, gamma=-0.1), ValueError,
     "StepLR: gamma must be a number >= 0"),
    (lambda o: ta.optim.LinearLR(o, start_factor=0.0), ValueError,
     r"LinearLR: start_factor must be in \(0, 1\], got 0.0"),
    (lambda o: ta.optim.LinearLR(o, end_factor=1.5), ValueError,
     r"end_factor must be a number in \[0, 1\], got 1.5"),
    (lambda o: ta.optim.LinearLR(o, total_iters=0), ValueError, "total_iters must be an int >= 1"),
    (lambda o: ta.optim.CosineAnnealingLR(o, T_max=0), ValueError, "T_max must be an int >= 1"),
    (lambda o: ta.optim.CosineAnnealingLR(o, 5, eta_min=-1.0), ValueError, "eta_min must be"),
    (lambda o: ta.optim.StepLR([1.0], 2), TypeError, "StepLR: expected an Optimizer, got list"),
])
def test_bad_scheduler_arguments_are_rejected(make, error, message):
    opt = SGD(make_params(64), lr=0.1)
    with pytest.raises(error, match=message):
        make(opt)
    assert opt.param_groups[0]["lr"] == 0.1


# ---- clip_grad_value_ -------------------------------------------------------------------------
def test_clip_grad_value_clamps_in_place_and_checks_its_arguments():
    a, b = make_params(65, shapes=((4,), (2,)))
    a.grad = ta.tensor(np.array([-3.0, -0.5, 0.25, 9.0]))
    array = a.grad.numpy()
    ta.nn.utils.clip_grad_value_([a, b], 1.0)
    assert a.grad.numpy() is array
    np.testing.assert_array_equal(array, [-1.0, -0.5, 0.25, 1.0])
    with pytest.raises(ValueError, match="clip_grad_value_: clip_value must be >= 0, got -1.0"):
        ta.nn.utils.clip_grad_value_([a], -1.0)
    with pytest.raises(TypeError, match="clip_grad_value_: clip_value must be a real number"):
        ta.nn.utils.clip_grad_value_([a], "1")
    with pytest.raises(TypeError, match=r"clip_grad_value_: parameters\[0\] must be a Tensor"):
        ta.nn.utils.clip_grad_value_([np.zeros(2)], 1.0)
