"""The threaded arithmetic of large arrays: numpy's bits on every path and thread count."""

import numba
import numpy as np
import pytest

import tinyattn as ta
from tinyattn.kernels import elementwise
from tinyattn.kernels.elementwise import (
    OPS,
    PARALLEL_MIN_ELEMENTS,
    binary,
    binary_numpy,
    run_binary,
)

DTYPES = [np.float32, np.float64]
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e-30, 3.0]


def _operands(dtype, size, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(size) * 3).astype(dtype)
    b = (rng.standard_normal(size) * 3).astype(dtype)
    a[:len(SPECIALS)] = SPECIALS  # each special against a special and a plain value
    b[:len(SPECIALS)] = SPECIALS[::-1]
    b[len(SPECIALS):2 * len(SPECIALS)] = SPECIALS
    return a, b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("layout", ["arrays", "scalar second", "scalar first"])
@pytest.mark.parametrize("parallel", [False, True])
def test_each_op_gives_numpys_bits(dtype, op, layout, parallel):
    a, b = _operands(dtype, 1000 + 3)  # not a multiple of the vector width
    if layout == "scalar second":
        b = np.array(-0.7, dtype)
    elif layout == "scalar first":
        a = np.array(2.5, dtype)
    with np.errstate(all="ignore"):
        expected = binary_numpy(op, a, b)
        got = run_binary(op, a, b, parallel=parallel)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_operands_take_the_threads_and_give_the_same_bits_for_any_thread_count(
        dtype, monkeypatch):
    a, b = _operands(dtype, 5 * (PARALLEL_MIN_ELEMENTS // 5 + 1))
    a = a.reshape(-1, 5)  # any shape: the kernel runs over the elements in C order
    b = b.reshape(-1, 5)
    assert elementwise._threaded(a, b) or elementwise.available_threads() < 2
    calls = []
    monkeypatch.setattr(elementwise, "run_binary",
                        lambda *args, **kwargs: calls.append(args[0]) or run_binary(*args,
                                                                                     **kwargs))
    results = []
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        numba.set_num_threads(threads)
        try:
            with np.errstate(all="ignore"):
                results.append([binary(op, a, b) for op in OPS])
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    with np.errstate(all="ignore"):
        for op, one, many in zip(OPS, *results, strict=True):
            np.testing.assert_array_equal(one, binary_numpy(op, a, b))
            np.testing.assert_array_equal(many, one)
    if elementwise.available_threads() >= 2:
        assert calls == list(OPS) * 2


@pytest.mark.parametrize("a, b", [
    (np.ones(PARALLEL_MIN_ELEMENTS, np.float32), np.ones(1, np.float32)),  # a broadcast
    (np.ones((2, PARALLEL_MIN_ELEMENTS), np.float32), np.ones(PARALLEL_MIN_ELEMENTS, np.float32)),
    (np.ones((512, 1024), np.float32).T, np.ones((1024, 512), np.float32)),  # not C-contiguous
    (np.ones(PARALLEL_MIN_ELEMENTS, np.float32), np.ones(PARALLEL_MIN_ELEMENTS, np.float64)),
    (np.ones(PARALLEL_MIN_ELEMENTS, np.float16), np.ones(PARALLEL_MIN_ELEMENTS, np.float16)),
    (np.ones(PARALLEL_MIN_ELEMENTS - 1, np.float32), np.ones(PARALLEL_MIN_ELEMENTS - 1,
                                                             np.float32)),
])
def test_what_the_kernel_does_not_take_goes_to_numpy(a, b, monkeypatch):
    monkeypatch.setattr(elementwise, "run_binary", lambda *args, **kwargs: pytest.fail(
        "the kernel took operands it does not handle"))
    for op in OPS:
        got = binary(op, a, b)
        expected = binary_numpy(op, a, b)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_arithmetic_ops_and_their_gradients_on_large_tensors(dtype, monkeypatch):
    """Add, Sub, Mul, Div and their rules at a size the kernel takes, against numpy."""
    ops = []
    monkeypatch.setattr(elementwise, "run_binary",
                        lambda *args, **kwargs: ops.append(args[0]) or run_binary(*args,
                                                                                  **kwargs))
    a_np, b_np = _operands(np.dtype(dtype), PARALLEL_MIN_ELEMENTS + 100)
    a_np, b_np = a_np[100:].reshape(-1, 4), b_np[100:].reshape(-1, 4) + 10.0  # finite, b > 0
    g_np = np.random.default_rng(1).standard_normal(a_np.shape).astype(dtype)
    for name, forward, da, db in [
        ("add", a_np + b_np, g_np, g_np),
        ("sub", a_np - b_np, g_np, -g_np),
        ("mul", a_np * b_np, g_np * b_np, g_np * a_np),
        ("div", a_np / b_np, g_np / b_np, -g_np * a_np / (b_np * b_np)),
    ]:
        a = ta.tensor(a_np, requires_grad=True)
        b = ta.tensor(b_np, requires_grad=True)
        out = getattr(ta, name)(a, b)
        out.backward(ta.tensor(g_np))
        np.testing.assert_array_equal(out.numpy(), forward)
        np.testing.assert_array_equal(a.grad.numpy(), da)
        np.testing.assert_array_equal(b.grad.numpy(), db)
    if elementwise.available_threads() >= 2:  # each forward, and the products of the rules
        assert {"add", "sub", "mul", "div"} <= set(ops)
