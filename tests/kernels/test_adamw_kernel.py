"""Adam/AdamW step kernel: numpy twin, torch.optim parity over 10 steps, in-place rules,
preconditions."""

import numpy as np
import pytest
from kernel_helpers import DTYPES

from tinyattn.kernels import adamw
from tinyattn.kernels.adamw import adamw_step, adamw_step_numpy

# Spans both sides of the serial/parallel size threshold.
SHAPES = [(1,), (7,), (3, 5), (128,), (97, 131), (64, 200)]
HYPER = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1}


def make_state(rng, dtype, shapes=SHAPES):
    params = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    exp_avgs = [np.zeros_like(p) for p in params]
    exp_avg_sqs = [np.zeros_like(p) for p in params]
    return params, exp_avgs, exp_avg_sqs


def copy_state(state):
    return tuple([a.copy() for a in arrays] for arrays in state)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decoupled", [True, False])
@pytest.mark.parametrize("beta1", [0.9, 0.3])
def test_adamw_step_matches_numpy_twin_bitwise(dtype, decoupled, beta1):
    rng = np.random.default_rng(0)
    state = make_state(rng, dtype)
    twin_state = copy_state(state)
    hyper = dict(HYPER, beta1=beta1)
    for step in range(1, 4):
        grads = [rng.standard_normal(p.shape).astype(dtype) for p in state[0]]
        grads_before = [g.copy() for g in grads]
        adamw_step(state[0], grads, state[1], state[2], step, decoupled=decoupled, **hyper)
        adamw_step_numpy(twin_state[0], grads, twin_state[1], twin_state[2], step,
                         decoupled=decoupled, **hyper)
        for got, want in zip(sum(state, []), sum(twin_state, []), strict=True):
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, want)
        for grad, before in zip(grads, grads_before, strict=True):
            np.testing.assert_array_equal(grad, before)


# The kernel and its numpy twin share _step_scalars (decay, coupled weight decay, step size,
# bias corrections, the moment's lerp weight): only this comparison with torch.optim can see a
# mistake there. beta1 = 0.3 makes the lerp weight 1 − β1 = 0.7 ≥ 0.5, torch's other branch.
@pytest.mark.parametrize("decoupled", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta1", [0.9, 0.3])
def test_adamw_step_matches_torch_optim_over_ten_steps(decoupled, dtype, beta1):
    torch = pytest.importorskip("torch")
    hyper = dict(HYPER, beta1=beta1)
    rng = np.random.default_rng(1)
    params, exp_avgs, exp_avg_sqs = make_state(rng, dtype)
    t_params = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in params]
    optimizer_class = torch.optim.AdamW if decoupled else torch.optim.Adam
    optimizer = optimizer_class(t_params, lr=hyper["lr"], betas=(hyper["beta1"], hyper["beta2"]),
                                eps=hyper["eps"], weight_decay=hyper["weight_decay"],
                                foreach=False)
    for step in range(1, 11):
        grads = [rng.standard_normal(p.shape).astype(dtype) for p in params]
        adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, decoupled=decoupled, **hyper)
        for t_param, grad in zip(t_params, grads, strict=True):
            t_param.grad = torch.from_numpy(grad)
        optimizer.step()
    tol = {np.float32: 1e-6, np.float64: 1e-14}[dtype]
    for ours_p, ours_m, ours_v, t_param in zip(params, exp_avgs, exp_avg_sqs, t_params,
                                               strict=True):
        state = optimizer.state[t_param]
        np.testing.assert_allclose(ours_p, t_param.detach().numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(ours_m, state["exp_avg"].numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(ours_v, state["exp_avg_sq"].numpy(), rtol=tol, atol=tol)


def test_adamw_first_step_moves_each_element_by_lr_against_the_gradient_sign():
    params = [np.array([1.0, -2.0, 3.0])]
    grads = [np.array([0.5, -4.0, 1e-3])]
    adamw_step(params, grads, [np.zeros(3)], [np.zeros(3)], 1, lr=0.1, beta1=0.9, beta2=0.999,
               eps=0.0, weight_decay=0.0, decoupled=True)
    np.testing.assert_allclose(params[0], [0.9, -1.9, 2.9], rtol=1e-12)


def test_adamw_decoupled_weight_decay_shrinks_params_with_zero_gradient():
    params = [np.array([2.0, -4.0])]
    adamw_step(params, [np.zeros(2)], [np.zeros(2)], [np.zeros(2)], 1, lr=0.1, beta1=0.9,
               beta2=0.999, eps=1e-8, weight_decay=0.5, decoupled=True)
    np.testing.assert_array_equal(params[0], [2.0 * 0.95, -4.0 * 0.95])


def test_adamw_result_does_not_depend_on_the_parallel_threshold(monkeypatch):
    state = make_state(np.random.default_rng(2), np.float32)
    grads = [np.ones_like(p) * 0.3 for p in state[0]]
    serial_state = copy_state(state)
    adamw_step(state[0], grads, state[1], state[2], 3, decoupled=True, **HYPER)
    monkeypatch.setattr(adamw, "_PARALLEL_MIN_SIZE", 10**12)
    adamw_step(serial_state[0], grads, serial_state[1], serial_state[2], 3, decoupled=True,
               **HYPER)
    for got, want in zip(sum(state, []), sum(serial_state, []), strict=True):
        np.testing.assert_array_equal(got, want)


def _one_step(params, grads, exp_avgs, exp_avg_sqs, step=1, **hyper):
    adamw_step(params, grads, exp_avgs, exp_avg_sqs, step, decoupled=True, **dict(HYPER, **hyper))


@pytest.mark.parametrize("call", [
    lambda: _one_step([np.zeros(3)], [np.zeros(3)] * 2, [np.zeros(3)], [np.zeros(3)]),
    lambda: _one_step([np.zeros(3)], [np.zeros(4)], [np.zeros(3)], [np.zeros(3)]),
    lambda: _one_step([np.zeros(3)], [np.zeros(3, np.float32)], [np.zeros(3)], [np.zeros(3)]),
    lambda: _one_step([np.zeros(3)], [np.zeros(3)], [np.zeros(3)], [np.zeros(3)], step=0),
    lambda: _one_step([np.zeros(3)], [np.zeros(3)], [np.zeros(3)], [np.zeros(3)], beta1=1.0),
    lambda: _one_step([np.zeros((3, 4)).T], [np.zeros((4, 3))], [np.zeros((4, 3))],
                      [np.zeros((4, 3))]),
    lambda: _one_step([np.zeros(3, np.int32)], [np.zeros(3, np.int32)],
                      [np.zeros(3, np.int32)], [np.zeros(3, np.int32)]),
], ids=["lengths", "grad-shape", "grad-dtype", "step", "beta1", "strided-param", "int32"])
def test_arguments_outside_the_preconditions_fail_an_assert(call):
    with pytest.raises(AssertionError):
        call()
