"""Numba safety: every kernel under ``NUMBA_BOUNDSCHECK=1`` and ``NUMBA_DISABLE_JIT=1``, the
serial and parallel drivers of :func:`~tinyattn.kernels.parallel.run_tasks` compiled and
cached apart, task functions called by address (right types or a compile error, errors
propagated), cached kernels loaded without numba's compiler, and tinyattn called from two
Python threads at once.

Each check runs in a fresh interpreter: the numba environment variables are read when numba
is imported, and a crash (an out-of-bounds abort, a threading-layer abort) must fail the test
instead of killing pytest. The kernel smoke run (:func:`run_kernel_smoke`) is ordinary code in
this module that the child interpreter imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numba
import numpy as np
import pytest
from numba import njit

from tinyattn.kernels.parallel import (
    ELEMENTS_PER_CHUNK,
    chunk_bounds,
    element_chunks,
    run_tasks,
)

TESTS_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = TESTS_DIR.parent


def _run_child(code: str, env_overrides: dict[str, str],
               timeout: float = 400) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that can import tinyattn and this test module."""
    env = dict(os.environ)
    env.update(env_overrides)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(PROJECT_ROOT), str(TESTS_DIR), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _close(actual: np.ndarray, expected: np.ndarray, label: str) -> None:
    rtol = 1e-4 if np.asarray(actual).dtype == np.float32 else 1e-10
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol, err_msg=label)


def _smoke_matmul(draw):
    from tinyattn.kernels import matmul

    for a, b in ((draw(2, 5, 3), draw(2, 3, 4)), (draw(33, 34), draw(34, 35)),  # small, packed
                 (draw(1, 200), draw(200, 190)), (draw(3, 150), draw(170, 150).T),  # few rows
                 (draw(6, 60), draw(130, 60).T)):  # Bᵀ's panels copied by the tasks
        _close(matmul.matmul(a, b), matmul.matmul_numpy(a, b), f"matmul {a.shape}")


def _smoke_softmax(draw):
    from tinyattn.kernels import softmax as sm

    x, g = draw(3, 7), draw(3, 7)
    for fwd, bwd, fwd_np, bwd_np in (
        (sm.softmax_forward, sm.softmax_backward, sm.softmax_forward_numpy,
         sm.softmax_backward_numpy),
        (sm.log_softmax_forward, sm.log_softmax_backward, sm.log_softmax_forward_numpy,
         sm.log_softmax_backward_numpy),
    ):
        y = fwd(x)
        _close(y, fwd_np(x), fwd.__name__)
        _close(bwd(y, g), bwd_np(y, g), bwd.__name__)


def _smoke_gelu(draw):
    from tinyattn.kernels import gelu

    x, g = draw(3, 7), draw(3, 7)
    for approximate in ("none", "tanh"):
        _close(gelu.gelu_forward(x, approximate), gelu.gelu_forward_numpy(x, approximate),
               "gelu_forward")
        _close(gelu.gelu_backward(x, g, approximate),
               gelu.gelu_backward_numpy(x, g, approximate), "gelu_backward")


def _smoke_layer_norm(draw):
    from tinyattn.kernels import layer_norm as ln

    x, g, weight, bias = draw(3, 7), draw(3, 7), draw(7), draw(7)
    y, mean, rstd = ln.layer_norm_forward(x, weight, bias, 1e-5)
    _close(y, ln.layer_norm_forward_numpy(x, weight, bias, 1e-5)[0], "layer_norm_forward")
    for got, want in zip(ln.layer_norm_backward(g, x, weight, mean, rstd),
                         ln.layer_norm_backward_numpy(g, x, weight, mean, rstd)):
        _close(got, want, "layer_norm_backward")


def _smoke_cross_entropy(draw):
    from tinyattn.kernels import cross_entropy as ce

    x, target, grad_rows = draw(3, 7), np.array([0, 6, -100]), draw(3)
    loss, lse = ce.cross_entropy_forward(x, target, -100, 0.1)
    _close(loss, ce.cross_entropy_forward_numpy(x, target, -100, 0.1)[0], "cross_entropy")
    _close(ce.cross_entropy_backward(x, target, lse, grad_rows, -100, 0.1),
           ce.cross_entropy_backward_numpy(x, target, lse, grad_rows, -100, 0.1),
           "cross_entropy_backward")


def _smoke_embedding(draw):
    from tinyattn.kernels import embedding as emb

    table, indices, grad = draw(6, 4), np.array([[0, 5, 5], [2, 0, 1]]), draw(2, 3, 4)
    _close(emb.embedding_forward(table, indices), emb.embedding_forward_numpy(table, indices),
           "embedding_forward")
    _close(emb.embedding_backward(grad, indices, 6, 0),
           emb.embedding_backward_numpy(grad, indices, 6, 0), "embedding_backward")


def _smoke_adamw(draw):
    from tinyattn.kernels import adamw

    for size in (5, 9000):  # the serial and the parallel Adam kernels
        start, grad, start_sq = draw(size), draw(size), draw(size) ** 2
        runs = []
        for update in (adamw.adamw_step, adamw.adamw_step_numpy):
            param, exp_avg, exp_avg_sq = start.copy(), grad / 2, start_sq.copy()
            update([param], [grad], [exp_avg], [exp_avg_sq], 3, 1e-2, 0.9, 0.999, 1e-8, 0.01,
                   True)
            runs.append((param, exp_avg, exp_avg_sq))
        for got, want in zip(*runs):
            _close(got, want, f"adamw_step size {size}")


def _smoke_attention(draw):
    from tinyattn.kernels import attention as at

    # four query heads on two key/value heads; then several query and key blocks, one kv head
    small = draw(1, 4, 5, 3), draw(1, 2, 7, 3), draw(1, 2, 7, 2), draw(1, 4, 5, 2)
    blocks = draw(1, 2, 130, 3), draw(1, 1, 70, 3), draw(1, 1, 70, 2), draw(1, 2, 130, 2)
    blocked = draw(1, 1, 5, 7) < -0.8
    mask_bias = np.where(blocked, -np.inf, 0.0).astype(small[0].dtype)  # (1, 1, T, S)
    for (q, k, v, dout), bias, causal, p_drop, window in (
        (small, None, True, 0.0, None), (small, mask_bias, False, 0.3, 2),
        (blocks, None, True, 0.3, 40), (blocks, None, False, 0.0, None),
    ):
        args = (bias, causal, None, p_drop, 7, window)
        out, lse = at.attention_forward(q, k, v, *args)
        _close(out, at.attention_forward_numpy(q, k, v, *args)[0], "attention_forward")
        for got, want in zip(at.attention_backward(q, k, v, out, lse, dout, *args),
                             at.attention_backward_numpy(q, k, v, out, lse, dout, *args)):
            _close(got, want, "attention_backward")


def _smoke_counter_rng(draw):
    from tinyattn.kernels import counter_rng

    np.testing.assert_array_equal(counter_rng.dropout_keep_mask(11, 1, 2, 3, 4, 0.5),
                                  counter_rng.dropout_keep_mask_numpy(11, 1, 2, 3, 4, 0.5))


def _smoke_dropout(draw):
    from tinyattn.kernels import dropout

    x = draw(3, 4097)  # large enough for several chunks
    np.testing.assert_array_equal(dropout.dropout_apply(x, 5, 0.25),
                                  dropout.dropout_apply_numpy(x, 5, 0.25))


def _smoke_special(draw):
    from tinyattn.kernels import special

    x = draw(3, 11) * 30  # both branches, and results flushed to zero in float32
    np.testing.assert_allclose(special.sigmoid(x), special.sigmoid_numpy(x), rtol=1e-6,
                               atol=1e-37)


def _smoke_row_sums(draw):
    from tinyattn.kernels import row_sums

    x = draw(3, 11)
    for terms in row_sums.TERMS:
        np.testing.assert_allclose(row_sums.row_sums(x, 10.0, terms),
                                   row_sums.row_sums_numpy(x, 10.0, terms), rtol=1e-6)


def _smoke_cumsum(draw):
    from tinyattn.kernels import cumsum

    x = draw(6, 11)  # four rows side by side, then two alone
    np.testing.assert_array_equal(cumsum.cumsum_rows(x), cumsum.cumsum_rows_numpy(x))


def _smoke_top_k(draw):
    from tinyattn.kernels import top_k

    x = draw(3, 9)
    x[0, 2], x[1, 3] = np.nan, x[1, 5]  # a NaN and a tie
    for largest in (True, False):
        for got, want in zip(top_k.top_k(x, 4, largest), top_k.top_k_numpy(x, 4, largest)):
            np.testing.assert_array_equal(got, want)


SMOKE_GROUPS = {
    "matmul": _smoke_matmul, "softmax": _smoke_softmax, "gelu": _smoke_gelu,
    "layer_norm": _smoke_layer_norm, "cross_entropy": _smoke_cross_entropy,
    "embedding": _smoke_embedding, "adamw": _smoke_adamw, "attention": _smoke_attention,
    "counter_rng": _smoke_counter_rng, "dropout": _smoke_dropout, "top_k": _smoke_top_k,
    "special": _smoke_special, "row_sums": _smoke_row_sums, "cumsum": _smoke_cumsum,
}


def run_kernel_smoke(dtypes: tuple[str, ...] = ("float32", "float64")) -> None:
    """Every kernel module on small shapes against its numpy twin, float32 and float64.

    Shapes reach each kernel's compiled loops (the packed matmul path, the parallel Adam
    kernel, ragged attention blocks) while staying cheap in pure Python. Prints one JSON
    object: kernel module -> the error it raised (empty when every module passed).
    """
    failures = {}
    for name, smoke in SMOKE_GROUPS.items():
        rng = np.random.default_rng(0)
        try:
            for dtype in map(np.dtype, dtypes):
                smoke(lambda *shape, dtype=dtype, rng=rng: rng.standard_normal(shape).astype(dtype))
        except Exception as err:  # every failure is reported to the parent
            failures[name] = f"{type(err).__name__}: {err}"[:500]
    print(json.dumps(failures))


SMOKE = "import test_numba_safety as t; t.run_kernel_smoke({dtypes})"
BOUNDSCHECK_CACHE = Path(tempfile.gettempdir()) / f"tinyattn-numba-boundscheck-{os.getuid()}"


@pytest.mark.parametrize("variable", ["NUMBA_BOUNDSCHECK", "NUMBA_DISABLE_JIT"])
def test_every_kernel_matches_its_numpy_twin_under(variable):
    """Bounds-checked code is cached in its own directory (numba's cache index does not record
    the flag), so it is compiled once per change of the kernel sources, not on every run."""
    env = {variable: "1"}
    dtypes = ("float32", "float64")
    if variable == "NUMBA_BOUNDSCHECK":
        env["NUMBA_CACHE_DIR"] = str(BOUNDSCHECK_CACHE)
        dtypes = ("float64",)  # indexing does not depend on the dtype; compile one variant
    result = _run_child(SMOKE.format(dtypes=dtypes), env)
    assert result.returncode == 0, result.stderr[-4000:]
    failures = json.loads(result.stdout.strip().splitlines()[-1])
    assert not failures, failures


THREADS = """
import threading
import numpy as np
import tinyattn as ta

config = ta.models.TransformerLMConfig(vocab_size=13, context_length=8, embed_dim=16,
                                       num_heads=2, num_layers=1)
ta.manual_seed(0)
weights = ta.TransformerLM(config).state_dict()
idx = ta.tensor(np.arange(32).reshape(4, 8) % 13)

def run(results, slot):
    model = ta.TransformerLM(config)
    model.load_state_dict(weights)
    out = []
    for _ in range(20):
        model.zero_grad()
        _, loss = model(idx, targets=idx)
        loss.backward()
        out.append([loss.numpy()] + [p.grad.numpy().copy() for p in model.parameters()])
    results[slot] = out

single = {}
run(single, 0)
pair = {}
threads = [threading.Thread(target=run, args=(pair, i)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for slot in range(2):
    for got, want in zip(pair[slot], single[0]):
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), slot
from tinyattn.kernels import parallel
import numba
print("layer", numba.threading_layer(), "locked", parallel.kernels_are_serialised())
"""


@pytest.mark.parametrize("layer", ["default", "workqueue"])
def test_two_python_threads_running_a_model_do_not_abort_and_match_one_thread(layer):
    """``workqueue`` aborts the process on concurrent launches unless tinyattn serialises them;
    ``default`` must select a thread-safe layer (tbb or omp) where one is installed."""
    env = {"NUMBA_NUM_THREADS": "2"}
    if layer != "default":
        env["NUMBA_THREADING_LAYER"] = layer
    result = _run_child(THREADS, env)
    assert result.returncode == 0, result.stderr[-4000:]
    line = result.stdout.strip().splitlines()[-1]
    if layer == "workqueue":
        assert line == "layer workqueue locked True"
    else:
        assert line in ("layer tbb locked False", "layer omp locked False",
                        "layer workqueue locked True")


@njit(cache=True)
def _thread_of_row(threads, row):
    """Record which numba thread ran the task ``row``."""
    threads[row] = numba.get_thread_id()


@njit(cache=True)
def _square_row(x, out, row):
    for j in range(x.shape[1]):
        out[row, j] = x[row, j] * x[row, j]


@njit(cache=True)
def _negate_row(x, out, row):
    for j in range(x.shape[1]):
        out[row, j] = -x[row, j]


@njit(cache=True, boundscheck=True)
def _write_past_the_last_row(x, out, row):
    out[row + x.shape[0], 0] = 1.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("parallel", [False, True])
def test_run_tasks_runs_each_task_once_with_any_task_function(dtype, parallel):
    x = np.random.default_rng(3).standard_normal((37, 5)).astype(dtype)
    out = np.full_like(x, np.nan)
    run_tasks(_square_row, x.shape[0], x, out, parallel=parallel)
    np.testing.assert_array_equal(out, x * x)
    out = np.full_like(x, np.nan)
    run_tasks(_negate_row, x.shape[0], x, out, parallel=parallel)
    np.testing.assert_array_equal(out, -x)
    out = np.full_like(x, np.nan)
    run_tasks(_square_row, 3, x, out, parallel=parallel)  # the first three tasks, no more
    np.testing.assert_array_equal(out[:3], x[:3] ** 2)
    assert np.isnan(out[3:]).all()


def test_arguments_that_do_not_fit_the_task_function_fail_to_compile_instead_of_crashing():
    x = np.ones((3, 2))
    with pytest.raises(TypeError, match="2 argument types given, but function takes 3"):
        run_tasks(_square_row, 3, x, parallel=False)  # out is missing
    with pytest.raises(numba.core.errors.TypingError):
        run_tasks(_square_row, 3, x, 1.5, parallel=True)  # out is not an array


def test_an_error_raised_in_a_task_function_reaches_the_caller():
    """From the first launch, which numba's dispatcher compiles, and from the later ones,
    which call the compiled launcher's entry point (after a launch of no tasks)."""
    x = np.ones((3, 2))
    for _ in range(2):
        with pytest.raises(IndexError):
            run_tasks(_write_past_the_last_row, 3, x, np.empty_like(x), parallel=False)
        # numba reports an error raised inside a parallel loop as a SystemError
        with pytest.raises((IndexError, SystemError)):
            run_tasks(_write_past_the_last_row, 3, x, np.empty_like(x), parallel=True)
        for parallel in (False, True):
            run_tasks(_write_past_the_last_row, 0, x, np.empty_like(x), parallel=parallel)


@pytest.mark.parametrize("size", [1, 5, 16384, 16385, 32769, 100_000])
@pytest.mark.parametrize("parallel", [False, True])
def test_element_chunks_tile_the_range_exactly(size, parallel):
    n_chunks = element_chunks(size, parallel)
    bounds = [chunk_bounds(chunk, n_chunks, size) for chunk in range(n_chunks)]
    assert bounds[0][0] == 0 and bounds[-1][1] == size
    assert all(stop == next_start for (_, stop), (next_start, _) in zip(bounds, bounds[1:]))
    lengths = [stop - start for start, stop in bounds]
    assert max(lengths) - min(lengths) <= 1
    if parallel:  # as few chunks as fit, the same number for every thread
        threads = numba.config.NUMBA_NUM_THREADS
        assert max(lengths) <= ELEMENTS_PER_CHUNK and min(lengths) >= 1
        assert n_chunks % threads == 0 or n_chunks == size < threads
        assert n_chunks == size or n_chunks - threads < -(-size // ELEMENTS_PER_CHUNK)
    else:
        assert n_chunks == 1


def run_both_drivers() -> None:
    """Run a probe task and softmax's row task serially and in parallel, and print one JSON
    object: per path, the numba threads that ran the probe's tasks and whether the results
    match; and the cache hits and misses of the drivers, the probe task and the softmax task (a
    hit: loaded from numba's on-disk cache instead of compiled)."""
    from tinyattn.kernels import parallel, softmax

    numba.set_num_threads(2)  # starts the pool, which get_thread_id needs even serially
    x = np.random.default_rng(0).standard_normal((64, 33))
    report = {}
    for path in ("serial", "parallel"):
        threads = np.full(64, -1, dtype=np.int64)
        run_tasks(_thread_of_row, 64, threads, parallel=path == "parallel")
        y = np.empty_like(x)
        run_tasks(softmax._softmax_forward_chunk, 2, x, y, 2, parallel=path == "parallel")
        report[path] = {
            "threads": sorted(set(threads.tolist())),
            "softmax_matches": bool(np.allclose(y, softmax.softmax_forward_numpy(x),
                                                rtol=1e-12, atol=1e-14)),
        }
    dispatchers = (parallel._serial_driver, parallel._parallel_driver, _thread_of_row,
                   softmax._softmax_forward_chunk)
    report["hits"] = sum(sum(d.stats.cache_hits.values()) for d in dispatchers)
    report["misses"] = sum(sum(d.stats.cache_misses.values()) for d in dispatchers)
    print(json.dumps(report))


def test_the_parallel_driver_runs_on_every_thread_when_compiled_and_when_cached(tmp_path):
    """The serial and the parallel driver are two functions, cached apart: a warm run loads
    both (and the tasks) from numba's cache, and the parallel one still spreads the tasks over
    two threads while the serial one runs them all on the calling thread."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_NUM_THREADS": "2",
           "NUMBA_THREADING_LAYER": "workqueue"}  # static scheduling: each thread gets tasks
    code = "import test_numba_safety as t; t.run_both_drivers()"
    for run, counter in (("cold", "misses"), ("warm", "hits")):
        result = _run_child(code, env)
        assert result.returncode == 0, result.stderr[-4000:]
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["serial"]["threads"] == [0], (run, report)
        assert report["parallel"]["threads"] == [0, 1], (run, report)
        for path in ("serial", "parallel"):
            assert report[path]["softmax_matches"], (run, path)
        assert report[counter] == 4, (run, report)  # every dispatcher, once
        assert report["hits" if run == "cold" else "misses"] == 0, (run, report)


_COMPILER_MODULES = ("numba.np.linalg", "numba.np.arraymath", "numba.cpython.unicode")
"""Modules numba imports when it readies its compiler (its "refresh"), and not before."""

_NOTE_CODE_GENERATION = """
import llvmlite.binding as ll
from numba.core.codegen import CPUCodeLibrary
generated = []
def _noting(owner, name):
    original = getattr(owner, name)
    def noted(*args, **kwargs):
        generated.append(name)
        return original(*args, **kwargs)
    setattr(owner, name, noted)
_noting(ll.TargetMachine, "emit_assembly")  # the vector-width probe of kernels.cpu
_noting(CPUCodeLibrary, "finalize")  # any library compiled from LLVM IR (numba's runtime's too)
"""
"""Child code run before tinyattn is imported: it notes, in ``generated``, every run of LLVM's
code generator through the two ways in (a library compiled from IR, or assembly emitted)."""


def load_softmax_then_compile_user_code(generated: list[str]) -> None:
    """Run softmax (compiled, or loaded from numba's cache), note whether numba's compiler was
    readied and LLVM's code generator run by then, then compile and run a numba function of the
    user's own that makes and returns an array; print one JSON object."""
    from tinyattn.kernels import softmax
    from tinyattn.kernels.cpu import vector_unit

    x = np.random.default_rng(0).standard_normal((4, 8))
    y = softmax.softmax_forward(x)
    compiler_readied = [name for name in _COMPILER_MODULES if name in sys.modules]
    code_generated = list(generated)

    @njit
    def sorted_values(a):
        return np.sort(a.ravel())

    print(json.dumps({
        "softmax_matches": bool(np.allclose(y, softmax.softmax_forward_numpy(x), rtol=1e-12,
                                            atol=1e-14)),
        "compiler_readied": compiler_readied,
        "code_generated": code_generated,
        "vector_bytes": vector_unit().vector_bytes,
        "user": sorted_values(x).tolist(),
        "expected": np.sort(x.ravel()).tolist(),
    }))


def test_a_cached_kernel_loads_without_numba_compiler_and_user_code_still_compiles(tmp_path):
    """A cold run compiles softmax, so numba readies its compiler, and LLVM's code generator
    runs (softmax, numba's runtime library, the vector-width probe); a warm run loads softmax from
    the cache without the compiler (:mod:`tinyattn.kernels.jit`) and generates no code at all:
    the runtime's library and the probe's answer come from :mod:`~tinyattn.kernels.machine_cache`.
    A numba function of the user's compiled after that still works: numba's compile path readies
    the compiler itself, and links against the loaded runtime."""
    code = (_NOTE_CODE_GENERATION
            + "import test_numba_safety as t; t.load_softmax_then_compile_user_code(generated)")
    reports = {}
    for run, readied in (("cold", list(_COMPILER_MODULES)), ("warm", [])):
        result = _run_child(code, {"NUMBA_CACHE_DIR": str(tmp_path)})
        assert result.returncode == 0, result.stderr[-4000:]
        reports[run] = report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["compiler_readied"] == readied, run
        assert report["softmax_matches"], run
        assert report["user"] == report["expected"], run
    assert {"emit_assembly", "finalize"} <= set(reports["cold"]["code_generated"])
    assert reports["warm"]["code_generated"] == []
    assert reports["warm"]["vector_bytes"] == reports["cold"]["vector_bytes"]


def _parallel_wrapper_calls() -> list:
    """One call of every kernel wrapper (but matmul and attention) on an input large enough
    for its parallel path, each a function of no arguments returning arrays."""
    from tinyattn.kernels import (
        adamw,
        counter_rng,
        cross_entropy,
        dropout,
        embedding,
        gelu,
        layer_norm,
        softmax,
    )

    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 1024)).astype(np.float32)  # 2**17 elements
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = (rng.standard_normal(1024).astype(np.float32) for _ in range(2))
    target = rng.integers(0, 1024, 128)
    indices = rng.integers(0, 128, (64, 64))
    big = rng.standard_normal(1 << 20).astype(np.float32)

    def adam():
        param, exp_avg, exp_avg_sq = x.copy(), np.zeros_like(x), np.zeros_like(x)
        adamw.adamw_step([param], [g], [exp_avg], [exp_avg_sq], 1, 1e-3, 0.9, 0.999, 1e-8,
                         0.01, True)
        return param, exp_avg, exp_avg_sq

    def norm():
        y, mean, rstd = layer_norm.layer_norm_forward(x, w, b, 1e-5)
        return (y, *layer_norm.layer_norm_backward(g, x, w, mean, rstd))

    def loss():
        losses, lse = cross_entropy.cross_entropy_forward(x, target)
        return losses, cross_entropy.cross_entropy_backward(x, target, lse, g[:, 0].copy())

    return [
        lambda: softmax.softmax_backward(softmax.softmax_forward(x), g),
        lambda: softmax.log_softmax_backward(softmax.log_softmax_forward(x), g),
        lambda: (gelu.gelu_forward(x), gelu.gelu_backward(x, g, "tanh")),
        norm, loss, adam,
        lambda: embedding.embedding_backward(embedding.embedding_forward(x, indices), indices,
                                             128, 0),
        lambda: dropout.dropout_apply(big, 3, 0.25),
        lambda: counter_rng.dropout_keep_mask(5, 2, 4, 128, 128, 0.1),
    ]


def run_wrappers_from_two_threads(rounds: int = 8) -> None:
    """Call every parallel kernel wrapper from two Python threads at once, ``rounds`` times
    each, and check every result bitwise against a call from one thread."""
    import threading

    from tinyattn.kernels import parallel

    def arrays(result):
        return result if isinstance(result, tuple) else (result,)

    calls = _parallel_wrapper_calls()
    expected = [arrays(call()) for call in calls]
    failures = []

    def work():
        for _ in range(rounds):
            for k, call in enumerate(calls):
                got = arrays(call())
                if not all(np.array_equal(a, b) for a, b in zip(got, expected[k], strict=True)):
                    failures.append(k)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"layer": numba.threading_layer(), "failures": failures,
                      "serialised": parallel.kernels_are_serialised()}))


def test_kernel_wrappers_called_from_two_threads_on_workqueue_finish_and_match():
    """``workqueue`` aborts the process when two threads launch parallel kernels at once;
    every kernel wrapper holds ``kernel_section`` around its parallel launch, so the callers
    need no lock of their own."""
    env = {"NUMBA_NUM_THREADS": "2", "NUMBA_THREADING_LAYER": "workqueue"}
    result = _run_child("import test_numba_safety as t; t.run_wrappers_from_two_threads()", env)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"layer": "workqueue", "failures": [], "serialised": True}
