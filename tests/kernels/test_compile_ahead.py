"""Claims on numba's cache across processes, and the helper that compiles a family ahead.

Every scenario runs in fresh processes with a cache directory of its own: what is tested is what
two processes sharing one numba cache do. The suite itself runs without the helper
(``tests/conftest.py``); these tests turn it on where they need it.
"""

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest
from fresh_process import COUNT_COMPILES, ROOT, environment, run_python

from tinyattn.kernels import cache_claims
from tinyattn.kernels.compile_ahead import VARIABLE
from tinyattn.kernels.families import HELPER_MODULES


def _ahead(on: bool) -> dict[str, str]:
    return {VARIABLE: "1" if on else "0"}


def _run(script: str, cache_dir, ahead: bool = False, *args: str) -> str:
    """``script`` in a fresh interpreter sharing ``cache_dir``; its stdout (it must succeed)."""
    return run_python(["-c", script, *args], cache_dir, **_ahead(ahead)).stdout


def _last_line(output: str) -> str:
    return output.strip().splitlines()[-1]


_HOLD = """
import sys
from tinyattn.kernels import cache_claims
assert cache_claims.claim(sys.argv[1])
print("held", flush=True)
sys.stdin.read()  # until the test closes it
"""


@contextlib.contextmanager
def _held_elsewhere(tmp_path):
    """The path of a claim that another process holds until the block ends."""
    path = str(tmp_path / "function.nbi.lock")
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env=environment(tmp_path, **_ahead(False)), cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield path
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


def test_a_claim_is_held_by_one_process_at_a_time(tmp_path):
    with _held_elsewhere(tmp_path) as path:
        start = time.monotonic()
        assert not cache_claims.claim(path, wait=0.3)  # gives up after its wait
        assert time.monotonic() - start >= 0.3
        assert cache_claims.held() == []
    assert cache_claims.claim(path, wait=30)  # released when its holder exited
    assert cache_claims.claim(path, wait=0)  # this process holds it already
    assert cache_claims.held() == [path]
    cache_claims.release(path)
    cache_claims.release(path)  # not held: nothing
    assert cache_claims.held() == []


_COMPILE_SLOWLY = """
import time
import numpy as np
from numba.core import event
from tinyattn.kernels import special

class Pause(event.Listener):
    def on_start(self, ev):
        if ev.data["dispatcher"] is special._erf_kernel:
            print("compiling", flush=True)  # claimed since its cache miss
            time.sleep(3)

    def on_end(self, ev):
        pass

event.register("numba:compile", Pause())
special.erf(np.array([0.5], np.float32))
"""

_ERF_COUNTING_COMPILES = COUNT_COMPILES + """
import json, math, time
import numpy as np
from tinyattn.kernels import special

start = time.monotonic()
value = float(special.erf(np.array([0.5], np.float32))[0])
print(json.dumps({"compiled": compiled, "seconds": time.monotonic() - start,
                  "error": abs(value - math.erf(0.5))}))
"""


def test_a_process_that_misses_while_another_compiles_loads_the_others_code(tmp_path):
    """The second process finds no code for ``_erf_kernel`` while the first compiles it: it
    waits for the first's claim and loads what the first saved, compiling nothing."""
    first = subprocess.Popen([sys.executable, "-c", _COMPILE_SLOWLY], stdout=subprocess.PIPE,
                             text=True, env=environment(tmp_path, **_ahead(False)), cwd=ROOT)
    try:
        assert first.stdout.readline().strip() == "compiling"
        second = json.loads(_last_line(_run(_ERF_COUNTING_COMPILES, tmp_path)))
    finally:
        assert first.wait(timeout=600) == 0
    assert second["compiled"] == []
    assert second["seconds"] > 1.0  # it waited for the first
    assert second["error"] < 1e-6


_ATTENTION_FORWARD = """
import os
import numpy as np
from tinyattn.kernels import compile_ahead
from tinyattn.kernels.attention import attention_forward

q = np.ones((1, 2, 5, 4), np.float32)
attention_forward(q, q, q, is_causal=True)
helper = compile_ahead._helper[0]
print(os.getpriority(os.PRIO_PROCESS, helper.pid) - os.getpriority(os.PRIO_PROCESS, 0))
helper.stdin.close()  # no more requests: it ends when done with those it has
print(helper.wait(timeout=500))
"""

_ATTENTION_STEP = COUNT_COMPILES + """
import json
import numpy as np
from tinyattn.kernels.attention import attention_backward, attention_forward

q = np.ones((2, 4, 7, 4), np.float32)
out, lse = attention_forward(q, q, q, is_causal=True)
attention_backward(q, q, q, out, lse, out, is_causal=True)
print(json.dumps(compiled))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the helper needs two cores")
def test_the_helper_compiles_the_rest_of_the_family_and_nothing_else(tmp_path):
    """A process that runs attention's forward only: its helper, 10 steps nicer, compiles the
    backward, which a later process then loads, and no other family."""
    niceness, exit_code = _run(_ATTENTION_FORWARD, tmp_path, ahead=True).split()[-2:]
    assert (niceness, exit_code) == ("10", "0")
    assert _last_line(_run(_ATTENTION_STEP, tmp_path)) == "[]"
    compiled_modules = {path.name.split(".")[0] for path in tmp_path.rglob("*.nbi")}
    assert "attention" in compiled_modules
    assert compiled_modules <= {"attention", "parallel", "simd", "exp", "reductions",
                                "counter_rng"}, compiled_modules


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the helper needs two cores")
def test_the_helper_runs_the_tinyattn_of_the_process_that_started_it(tmp_path):
    """Started from a directory that holds another ``tinyattn`` (a checkout of other code), the
    process imports this one (its script's directory and ``PYTHONPATH`` come first) and so does
    its helper: it compiles this checkout's backward, which a later process loads."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "tinyattn").mkdir(parents=True)
    (elsewhere / "tinyattn" / "__init__.py").write_text(
        'raise ImportError("the tinyattn of the working directory")\n')
    script = tmp_path / "forward.py"
    script.write_text(_ATTENTION_FORWARD)
    cache = tmp_path / "cache"
    result = subprocess.run([sys.executable, str(script)], cwd=elsewhere, capture_output=True,
                            text=True, timeout=600, check=False,
                            env=environment(cache, **_ahead(True)))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1] == "0"  # the helper's exit code
    assert _last_line(_run(_ATTENTION_STEP, cache)) == "[]"


_STARTS_A_HELPER = """
import numpy as np
from tinyattn.kernels import compile_ahead
from tinyattn.kernels.attention import attention_forward

q = np.ones((1, 2, 5, 4), np.float32)
attention_forward(q, q, q, is_causal=True)  # the helper is asked for attention's kernels
print(compile_ahead._helper[0].pid)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the helper needs two cores")
def test_the_helper_ends_with_the_process_that_started_it(tmp_path):
    helper_pid = int(_last_line(_run(_STARTS_A_HELPER, tmp_path, ahead=True)))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(helper_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail("the helper outlived the process that started it")


_HELPER_STATE = """
import os, sys
import numpy as np
if sys.argv[1] == "one core":
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from tinyattn.kernels import compile_ahead, special
special.erf(np.array([0.5], np.float32))  # compiles: would start the helper
print(compile_ahead._helper)
"""


@pytest.mark.parametrize("case", ["turned off", "one core"])
def test_no_helper_when_turned_off_or_on_one_core(tmp_path, case):
    assert _last_line(_run(_HELPER_STATE, tmp_path, case != "turned off", case)) == "[None]"


_FAILING_KERNEL = """
from tinyattn.kernels.jit import jit


@jit
def attribute_of(x):
    return x.no_such_attribute
"""

_COMPILE_FAILS = """
import sys
import numpy as np
from numba.core.errors import TypingError
from tinyattn.kernels import cache_claims
sys.path.insert(0, sys.argv[1])
import failing
try:
    failing.attribute_of(np.ones(2))
except TypingError:
    print(cache_claims.held())
"""


def test_a_failed_compilation_releases_its_claim(tmp_path):
    (tmp_path / "failing.py").write_text(_FAILING_KERNEL)
    assert _last_line(_run(_COMPILE_FAILS, tmp_path / "cache", False, str(tmp_path))) == "[]"


def test_a_claim_held_elsewhere_is_put_off_instead_of_waited_for(tmp_path):
    with _held_elsewhere(tmp_path) as path:
        with cache_claims.putting_off() as put_off:
            assert not cache_claims.claim(path, wait=0.1)  # only a miss may put off
            assert not put_off.busy
            start = time.monotonic()
            with pytest.raises(cache_claims.Busy):
                cache_claims.claim(path, wait=30, may_put_off=True)
            assert time.monotonic() - start < 5  # at once, not after the wait
            assert put_off.busy
        with cache_claims.putting_off(False) as put_off:  # turned off: waits as usual
            assert not cache_claims.claim(path, wait=0.1, may_put_off=True)
            assert not put_off.busy
        assert cache_claims.held() == []


_HOLD_A_WHILE = """
import sys, time
from tinyattn.kernels import cache_claims
assert cache_claims.claim(sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""

_PUT_OFF_OR_WAIT = """
import json, math, subprocess, sys, time
import numpy as np
from tinyattn.kernels import cache_claims, layer_norm, reductions, special

x = np.array([[0.5, -1.0]], np.float32)
if sys.argv[2] == "outermost":  # the kernel itself: a compilation put off
    held, run = special._erf_kernel, lambda: special.erf(x)
else:  # a helper of the kernel, compiled inside the kernel's compilation: waited for
    weight = np.ones(2, np.float32)
    held = reductions.row_sum
    run = lambda: layer_norm.layer_norm_forward(x, weight, weight, 1e-5)
holder = subprocess.Popen([sys.executable, "-c", sys.argv[1], held._cache.claim_path(), "3"],
                          stdout=subprocess.PIPE, text=True)
assert holder.stdout.readline().strip() == "held"
start = time.monotonic()
with cache_claims.putting_off() as put_off:
    try:
        run()
        outcome = "ran"
    except Exception as error:  # numba may pass Busy on inside an error of its own
        outcome = "raised"
seconds = time.monotonic() - start
held_after = cache_claims.held()
holder.wait(timeout=60)
error = abs(float(special.erf(x)[0, 0]) - math.erf(0.5))  # compiles now: no failure was kept
print(json.dumps({"outcome": outcome, "busy": put_off.busy, "held": held_after,
                  "waited": seconds > 2.0, "error": error}))
"""


@pytest.mark.parametrize("where", ["outermost", "nested"])
def test_only_an_outermost_compilation_is_put_off_and_it_compiles_later(tmp_path, where):
    """Within ``putting_off``: a kernel another process holds fails at once (its claims
    released) and compiles later; a function it calls that another process holds is waited
    for, or the kernel's work so far would be lost."""
    result = json.loads(_last_line(_run(_PUT_OFF_OR_WAIT, tmp_path, False, _HOLD_A_WHILE,
                                        where)))
    assert result["error"] < 1e-6
    del result["error"]
    if where == "outermost":
        assert result == {"outcome": "raised", "busy": True, "held": [], "waited": False}
    else:
        assert result == {"outcome": "ran", "busy": False, "held": [], "waited": True}


def test_the_helper_runs_what_is_expected_then_what_was_started_then_what_it_put_off():
    from tinyattn.kernels.compile_ahead import Work

    work = Work()
    work.read(["matmul float32 started", "embedding float32 expected",
               "layer_norm float32 expected", "attention float64 started",
               "adamw float32 expected", "embedding float32 started"])  # ran already
    order = [work.next(), work.next()]
    assert work.fresh_waiting()
    work.put_off(order[1])  # layer_norm: the other process was compiling a kernel of it
    while (job := work.next()) is not None:
        order.append(job)
        if job == ("attention", "float64"):
            assert not work.fresh_waiting()  # only layer_norm is left, put off
    assert order == [("embedding", "float32"), ("layer_norm", "float32"),
                     ("adamw", "float32"), ("matmul", "float32"), ("attention", "float64"),
                     ("layer_norm", "float32")]


_RUN_FAMILIES = COUNT_COMPILES + """
import json
import numpy as np
from tinyattn.kernels.families import FAMILIES

runs = {}
for family in ("layer_norm", "gelu", "gelu_tanh", "matmul"):
    compiled.clear()
    compiled_modules.clear()
    FAMILIES[family](np.dtype(np.float32))
    runs[family] = [(module.rsplit(".", 1)[-1], name)
                    for module, name in zip(compiled_modules, compiled, strict=True)
                    if module.startswith("tinyattn.kernels.")]
print(json.dumps(runs))
"""


def test_a_family_runs_its_backward_first_and_only_its_own_kernels(tmp_path):
    """What the helper compiles first is what the process needs next: layer norm's backward
    before its forward (the forward is what the process is compiling then). A family compiles
    its own kernels and their helpers, no other family's: GELU's two forms are two families,
    and matmul's tiny products take its serial loop, not the few-rows kernel of matvec."""
    runs = json.loads(_last_line(_run(_RUN_FAMILIES, tmp_path)))
    tasks = {family: [name for _, name in compiled if name.endswith("_chunk")]
             for family, compiled in runs.items()}
    assert tasks == {
        "layer_norm": ["_layer_norm_backward_chunk", "_layer_norm_forward_chunk"],
        "gelu": ["_erf_backward_chunk", "_erf_forward_chunk"],
        "gelu_tanh": ["tanh_backward_chunk", "tanh_forward_chunk"], "matmul": []}
    for family, compiled in runs.items():
        assert {module for module, _ in compiled} <= {family, *HELPER_MODULES}, family
    assert ("matmul", "_gemm_small") in map(tuple, runs["matmul"])


_EXPECTS_LAYER_NORM = """
import numpy as np
import tinyattn as ta
from tinyattn.kernels import compile_ahead, special

ta.nn.LayerNorm(4)  # expects the layer norm family: starts nothing
print(compile_ahead._helper)
special.erf(np.array([0.5], np.float32))  # compiles: the helper starts
helper = compile_ahead._helper[0]
helper.stdin.close()  # no more requests: it ends when done with those it has
print(helper.wait(timeout=500))
"""

_LAYER_NORM_STEP = COUNT_COMPILES + """
import json
import numpy as np
from tinyattn.kernels.layer_norm import layer_norm_backward, layer_norm_forward

x, weight = np.ones((3, 4), np.float32), np.ones(4, np.float32)
y, mean, rstd = layer_norm_forward(x, weight, weight, 1e-5)
layer_norm_backward(y, x, weight, mean, rstd)
print(json.dumps(compiled))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the helper needs two cores")
def test_the_helper_compiles_the_families_a_built_layer_expects(tmp_path):
    """A process that builds a LayerNorm and compiles only erf: its helper compiles the layer
    norm's kernels too, which a later process then loads."""
    before, exit_code = _run(_EXPECTS_LAYER_NORM, tmp_path, ahead=True).split()[-2:]
    assert (before, exit_code) == ("[]", "0")
    assert _last_line(_run(_LAYER_NORM_STEP, tmp_path)) == "[]"


def test_layers_and_adam_expect_the_families_they_run(monkeypatch):
    import tinyattn as ta
    from tinyattn.kernels import compile_ahead

    monkeypatch.setattr(compile_ahead, "_expected", [])
    monkeypatch.setattr(compile_ahead, "_noted", set())
    monkeypatch.setattr(compile_ahead, "_helper", [])
    model = ta.nn.Sequential(ta.nn.Embedding(5, 4), ta.nn.LayerNorm(4), ta.nn.ReLU(),
                             ta.nn.Linear(4, 4), ta.nn.GELU(), ta.nn.GELU(approximate="tanh"))
    ta.optim.AdamW(model.parameters())
    assert compile_ahead._expected == [(family, "float32") for family in (
        "embedding", "layer_norm", "matmul", "gelu", "gelu_tanh", "adamw")]
    assert compile_ahead._helper == []  # expecting starts no helper
    ta.optim.Adam([ta.zeros(2, dtype=ta.float64, requires_grad=True)])
    assert compile_ahead._expected[-1] == ("adamw", "float64")
    assert ta.nn.MultiheadAttention.kernel_families == ("attention",)
    assert ta.nn.CrossEntropyLoss.kernel_families == ("cross_entropy",)
