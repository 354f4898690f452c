"""The threaded arithmetic and selection of large arrays: numpy's bits on every path and thread
count."""

import numba
import numpy as np
import pytest
from kernel_helpers import DTYPES, numba_threads, reference_counts

import tinyattn as ta
from tinyattn.kernels import elementwise, special
from tinyattn.kernels.elementwise import (
    OPS,
    PARALLEL_MIN_ELEMENTS,
    SELECT_MIN_ELEMENTS,
    binary,
    binary_numpy,
    clamp,
    clamp_numpy,
    run_binary,
    run_select,
    select,
    select_numpy,
)
from tinyattn.kernels.parallel import run_tasks

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
@pytest.mark.parametrize("layout", ["arrays", "scalar second", "scalar first", "repeat second",
                                    "repeat first", "rows second", "rows first",
                                    "rows and repeat"])
@pytest.mark.parametrize("parallel", [False, True])
def test_each_op_gives_numpys_bits(dtype, op, layout, parallel):
    """Every op and layout: one shape, a number, a repeat of the trailing dims (a bias), one
    value per row (a keepdim reduction), on rows not a multiple of the vector width."""
    a, b = _operands(dtype, 7 * 1003)
    a, b = a.reshape(7, 1003), b.reshape(7, 1003)
    if layout == "scalar second":
        b = np.array(-0.7, dtype)
    elif layout == "scalar first":
        a = np.array(2.5, dtype)
    elif layout == "repeat second":
        b = b[3]  # (1003,): every row of a meets the same values
    elif layout == "repeat first":
        a = a[2:3]  # (1, 1003)
    elif layout == "rows second":
        b = b[:, 5:6].copy()  # (7, 1): one value per row
    elif layout == "rows first":
        a = a[:, :1].copy()
    elif layout == "rows and repeat":
        a, b = a[:, :1].copy(), b[4]
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
    for threads in (1, 2):
        with numba_threads(threads), np.errstate(all="ignore"):
            results.append([binary(op, a, b) for op in OPS])
    with np.errstate(all="ignore"):
        for op, one, many in zip(OPS, *results, strict=True):
            np.testing.assert_array_equal(one, binary_numpy(op, a, b))
            np.testing.assert_array_equal(many, one)
    if elementwise.available_threads() >= 2:
        assert calls == list(OPS) * 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["repeat", "repeat with leading ones", "rows"])
def test_repeats_and_rows_across_chunks_and_threads(dtype, layout):
    """Chunks that start and end inside a repeat or a row, on one thread and on all."""
    rows = PARALLEL_MIN_ELEMENTS // 480 + 1
    a = np.random.default_rng(5).standard_normal((5, rows, 96)).astype(dtype)
    shape_b = {"repeat": (96,), "repeat with leading ones": (1, 1, 96),
               "rows": (5, rows, 1)}[layout]
    b = (np.random.default_rng(6).standard_normal(shape_b) + 3).astype(dtype)
    assert elementwise._threaded(a, b) or elementwise.available_threads() < 2
    for threads in (1, 2):
        with numba_threads(threads):
            for op in OPS:
                np.testing.assert_array_equal(run_binary(op, a, b, parallel=True),
                                              binary_numpy(op, a, b), err_msg=op)
                np.testing.assert_array_equal(run_binary(op, b, a, parallel=True),
                                              binary_numpy(op, b, a), err_msg=op)


@pytest.mark.parametrize("a, b", [
    (np.ones((2, 1, PARALLEL_MIN_ELEMENTS // 4), np.float32),
     np.ones((2, 3, PARALLEL_MIN_ELEMENTS // 4), np.float32)),  # broadcast along a middle dim
    (np.ones((PARALLEL_MIN_ELEMENTS // 32, 32), np.float32),
     np.ones(32, np.float32)),  # a repeat shorter than the kernel takes
    (np.ones((PARALLEL_MIN_ELEMENTS // 32, 32), np.float32),
     np.ones((PARALLEL_MIN_ELEMENTS // 32, 1), np.float32)),  # rows shorter than it takes
    (np.ones((2, PARALLEL_MIN_ELEMENTS), np.float32), np.ones((3, 1, 1), np.float32)),  # grows
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


def _bits(x):
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["arrays", "scalar first", "scalar second"])
@pytest.mark.parametrize("cond_shape", [(7, 1003), (1, 1003), (1003,)])
@pytest.mark.parametrize("parallel", [False, True])
def test_select_gives_numpys_bits(dtype, layout, cond_shape, parallel):
    """Every element is the chosen operand's, bit for bit (NaN payloads, −0.0, infinities),
    with a condition of the result's shape or repeated along its last dim."""
    a, b = _operands(dtype, 7 * 1003)  # rows not a multiple of the vector width
    a, b = a.reshape(7, 1003), b.reshape(7, 1003)
    a[0, 20] = np.frombuffer(np.array(0x7FC00123 if dtype == np.float32 else 0x7FF8000000000123,
                                      np.uint32 if dtype == np.float32 else np.uint64).tobytes(),
                             dtype)[0]  # a NaN with a payload
    cond = np.random.default_rng(2).random(cond_shape) < 0.5
    if layout == "scalar first":
        a = np.array(-0.0, dtype)
    elif layout == "scalar second":
        b = np.array(np.inf, dtype)
    expected = select_numpy(cond, a, b)
    got = run_select(cond, a, b, parallel=parallel)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(_bits(got), _bits(expected))


def test_select_takes_every_chunk_and_run_boundary():
    """Chunks that start and end inside a repeat of the condition, on any thread count."""
    period = 96
    cond = np.random.default_rng(3).random((1, period)) < 0.5
    a = np.arange(PARALLEL_MIN_ELEMENTS // period * period + period, dtype=np.float64)
    a = a.reshape(-1, period)
    b = -a
    expected = np.where(cond, a, b)
    for threads in (1, 2):
        with numba_threads(threads):
            for chunks_parallel in (False, True):
                np.testing.assert_array_equal(run_select(cond, a, b, chunks_parallel),
                                              expected)


@pytest.mark.parametrize("cond, a, b", [
    (np.ones(SELECT_MIN_ELEMENTS - 1, bool), np.ones(SELECT_MIN_ELEMENTS - 1, np.float32),
     np.zeros((), np.float32)),  # too small
    (np.ones((4, 1, SELECT_MIN_ELEMENTS), bool), np.ones((4, 3, SELECT_MIN_ELEMENTS),
                                                         np.float32),
     np.zeros((), np.float32)),  # the condition broadcast along a middle dim
    (np.ones((SELECT_MIN_ELEMENTS, 1), bool), np.ones((SELECT_MIN_ELEMENTS, 2), np.float32),
     np.zeros((), np.float32)),  # ... along the last
    (np.ones((SELECT_MIN_ELEMENTS, 32), bool)[:, :16], np.ones((SELECT_MIN_ELEMENTS, 16),
                                                              np.float32),
     np.zeros((), np.float32)),  # a condition that is not C-contiguous
    (np.ones((SELECT_MIN_ELEMENTS, 16), np.uint8), np.ones((SELECT_MIN_ELEMENTS, 16),
                                                           np.float32),
     np.zeros((), np.float32)),  # not bool
    (np.ones(SELECT_MIN_ELEMENTS, bool), np.ones(SELECT_MIN_ELEMENTS, np.float32),
     np.zeros((), np.float64)),  # two dtypes (numpy promotes)
    (np.ones(SELECT_MIN_ELEMENTS, bool), np.ones(SELECT_MIN_ELEMENTS, np.int64),
     np.zeros((), np.int64)),  # not float
    (np.ones(SELECT_MIN_ELEMENTS, bool), np.ones(SELECT_MIN_ELEMENTS, np.float32),
     np.zeros(1, np.float32)),  # a one-element array that broadcasts
    (np.ones((SELECT_MIN_ELEMENTS // 32, 32), bool), np.ones((SELECT_MIN_ELEMENTS // 32, 32),
                                                             np.float32)[:, ::-1],
     np.zeros((), np.float32)),  # an operand that is not C-contiguous
    (np.ones((2, 32), bool)[:1], np.ones((SELECT_MIN_ELEMENTS // 32, 32), np.float32),
     np.zeros((), np.float32)),  # a repeat shorter than the kernel takes
])
def test_what_select_does_not_take_goes_to_numpy(cond, a, b, monkeypatch):
    monkeypatch.setattr(elementwise, "run_select", lambda *args, **kwargs: pytest.fail(
        "the kernel took operands it does not handle"))
    got = select(cond, a, b)
    expected = select_numpy(cond, a, b)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_where_masked_fill_and_clamp_on_large_tensors(dtype, monkeypatch):
    """The ops that select, with their rules, at a size the kernel takes, against numpy."""
    calls = []
    monkeypatch.setattr(elementwise, "run_select",
                        lambda *args, **kwargs: calls.append(1) or run_select(*args, **kwargs))
    x_np, other_np = _operands(np.dtype(dtype), SELECT_MIN_ELEMENTS * 2)
    x_np, other_np = x_np.reshape(-1, 128), other_np.reshape(-1, 128)
    g_np = np.random.default_rng(1).standard_normal(x_np.shape).astype(dtype)
    causal = np.tril(np.ones((128, 128), bool))  # repeated along the rows of x
    cases = {
        "relu": (lambda x, o: ta.relu(x), np.where(x_np < 0, 0, x_np),
                 np.where(x_np > 0, g_np, 0) + np.where(np.isnan(x_np), g_np, 0), None),
        "where": (lambda x, o: ta.where(ta.tensor(x_np > 1), x, o),
                  np.where(x_np > 1, x_np, other_np), np.where(x_np > 1, g_np, 0),
                  np.where(x_np > 1, 0, g_np)),
        "masked_fill": (lambda x, o: x.masked_fill(ta.tensor(~causal[:1]), -1e9),
                        np.where(~causal[:1], np.asarray(-1e9, dtype), x_np),
                        np.where(~causal[:1], 0, g_np), None),
        "clamp": (lambda x, o: x.clamp(-0.5, 2.0), np.clip(x_np, -0.5, 2.0),
                  np.where((x_np >= -0.5) & (x_np <= 2.0), g_np, 0), None),
    }
    for name, (op, forward, dx, dother) in cases.items():
        calls.clear()
        x = ta.tensor(x_np, requires_grad=True)
        other = ta.tensor(other_np, requires_grad=True)
        out = op(x, other)
        out.backward(ta.tensor(g_np))
        np.testing.assert_array_equal(_bits(out.numpy()), _bits(forward.astype(dtype)),
                                      err_msg=name)
        np.testing.assert_array_equal(x.grad.numpy(), dx.astype(dtype), err_msg=name)
        if dother is not None:
            np.testing.assert_array_equal(other.grad.numpy(), dother.astype(dtype),
                                          err_msg=name)
        assert calls, f"{name} did not select through the kernel"


BOUNDS = [(-0.5, 2.0), (0.0, None), (-0.0, None), (None, 0.0), (None, -1e30), (2.0, -0.5),
          (np.inf, None), (-np.inf, np.inf), (0.0, 0.0)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("low, high", BOUNDS)
@pytest.mark.parametrize("size", [0, 1, 7 * 1003, PARALLEL_MIN_ELEMENTS + 13])
def test_clamp_gives_its_twins_bits_on_one_thread_and_on_all(dtype, low, high, size):
    """Signed zeros, infinities and NaN against every bound, a bound above the other, sizes
    around the vector width and past the threaded size, on one thread and on all."""
    x = np.resize(_operands(dtype, max(size, 64))[0], size)
    expected = clamp_numpy(x, low, high)
    for threads in (1, 2):
        with numba_threads(threads):
            got = clamp(x, low, high)
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_array_equal(_bits(got), _bits(expected))
    assert np.isnan(expected[np.isnan(x)]).all()  # the twin itself: NaN stays NaN ...
    if low is not None and high is not None and low > high:
        assert (expected[~np.isnan(x)] == high).all()  # ... and high wins over a higher low


def test_clamp_takes_strided_and_shaped_input():
    x = _operands(np.float32, 4 * 300)[0].reshape(4, 300)[:, ::-3]
    got = clamp(x, -1.0, 1.0)
    assert got.shape == x.shape
    np.testing.assert_array_equal(_bits(got), _bits(clamp_numpy(x, -1.0, 1.0)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_clamp_and_relu_equal_pytorch_on_signed_zeros_and_nan(dtype):
    torch = pytest.importorskip("torch")
    values = SPECIALS if dtype != "int64" else [0, -3, 5, 2**40, -(2**40)]
    x = np.array(values * 3, dtype)
    for low, high in [(0, None), (None, 0), (-1, 2), (2, -1)] + (
            [(-0.0, None), (None, -0.0), (0.0, -0.0)] if dtype != "int64" else []):
        got = ta.clamp(ta.tensor(x), low, high).numpy()
        theirs = torch.clamp(torch.from_numpy(x), low, high).numpy()
        assert got.dtype == theirs.dtype, (low, high)
        np.testing.assert_array_equal(got.view(np.uint8), theirs.view(np.uint8), err_msg=str(
            (low, high)))
    if dtype != "int64":
        np.testing.assert_array_equal(ta.relu(ta.tensor(x)).numpy(),
                                      torch.relu(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_and_tanh_on_large_tensors(dtype, monkeypatch):
    """sigmoid's forward runs on the threads of its own kernel (:mod:`tinyattn.kernels.special`);
    the products of both rules on the elementwise kernel's."""
    launches, ops = [], []
    monkeypatch.setattr(special, "run_tasks", lambda *args, **kwargs: launches.append(
        kwargs["parallel"]) or run_tasks(*args, **kwargs))
    monkeypatch.setattr(elementwise, "run_binary",
                        lambda *args, **kwargs: ops.append(args[0]) or run_binary(*args,
                                                                                  **kwargs))
    rng = np.random.default_rng(4)
    x_np = (rng.standard_normal((PARALLEL_MIN_ELEMENTS // 64, 64)) * 4).astype(dtype)
    g_np = rng.standard_normal(x_np.shape).astype(dtype)
    exact = 1 / (1 + np.exp(-x_np.astype(np.float64)))
    for name, truth, slope in [("sigmoid", exact, exact * (1 - exact)),
                               ("tanh", np.tanh(x_np.astype(np.float64)),
                                1 - np.tanh(x_np.astype(np.float64)) ** 2)]:
        x = ta.tensor(x_np, requires_grad=True)
        y = getattr(ta, name)(x)
        y.backward(ta.tensor(g_np))
        tolerance = 1e-6 if dtype == "float32" else 1e-14
        np.testing.assert_allclose(y.numpy(), truth, rtol=tolerance, atol=tolerance)
        np.testing.assert_allclose(x.grad.numpy(), g_np * slope, rtol=4 * tolerance,
                                   atol=4 * tolerance)
    assert launches == [True]
    if elementwise.available_threads() >= 2:
        assert {"mul", "sub"} <= set(ops)


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="reference counts exist in compiled code")
def test_the_tasks_count_no_references_as_they_run(tmp_path):
    """No reference counting is left in a task's compiled code: a chunk of a row-wise op runs
    one short run per row, and an increment and decrement of the arrays' counts per run are
    atomic operations on memory both threads share (a row-wise subtraction of (80, 10, 512)
    took 0.28 ms on 2 threads that way, 0.05 ms without). Compiled afresh in a process of its
    own (numba keeps no IR for code it loads from its cache)."""
    counts = reference_counts(tmp_path, "elementwise", "\n".join([
        "x = np.linspace(-3.0, 3.0, 4 * 70, dtype=np.float32).reshape(4, 70)",
        "kernel.run_binary('sub', x, x[:, :1].copy(), parallel=False)",
        "kernel.run_select(x < 0, np.zeros((), np.float32), x, parallel=False)",
    ]), ["_binary_chunk", "_select_chunk"])
    assert counts == {"_binary_chunk": 0, "_select_chunk": 0}
