"""Compiling ahead (``tinyattn warmup``) and the line printed when a kernel family compiles."""

import importlib
import io
import math
import pkgutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from fresh_process import COUNT_COMPILES, run_python
from numba.core.registry import CPUDispatcher
from printed import printed_number

import tinyattn.kernels
from tinyattn import warmup as warmup_module
from tinyattn.cli import build_parser, main
from tinyattn.kernels.compile_notice import QUIET_VARIABLE, notice
from tinyattn.kernels.families import FAMILIES, HELPER_MODULES
from tinyattn.warmup import warmup


def _modules_with_kernels() -> set[str]:
    """The modules of tinyattn.kernels that define a jitted function."""
    found = set()
    for info in pkgutil.iter_modules(tinyattn.kernels.__path__):
        module = importlib.import_module(f"tinyattn.kernels.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, CPUDispatcher)
                    and getattr(value, "__module__", module.__name__) == module.__name__):
                found.add(info.name)
    return found


def test_every_module_with_kernels_is_a_family_or_a_helper():
    families, helpers = set(FAMILIES), set(HELPER_MODULES)
    assert not families & helpers
    assert families | helpers == _modules_with_kernels()


def test_warmup_reports_each_step():
    stream = io.StringIO()
    report = warmup(["float32"], families=["dropout"], stream=stream)
    assert [(family, dtype) for family, dtype, _ in report.steps] == [("dropout", "float32")]
    assert report.seconds >= report.steps[0][2] >= 0
    assert "[########################] 1/1 float32 dropout" in stream.getvalue()
    assert "kernel families for float32" in str(report)
    assert printed_number(str(report), "tinyattn warmup:") == 1  # "1 kernel families", not 11


def test_warmup_rejects_unknown_families_and_dtypes():
    with pytest.raises(ValueError, match="unknown kernel families \\['conv'\\]"):
        warmup(["float32"], families=["conv"])
    with pytest.raises(ValueError, match="float32 or float64"):
        warmup(["int32"], families=["dropout"])


def test_warmup_subcommand_passes_the_dtypes(monkeypatch, capsys):
    assert build_parser().parse_args(["warmup"]).dtype == "all"
    calls = []

    def fake_warmup(dtypes):
        calls.append(tuple(dtypes))
        return "tinyattn warmup: done"

    monkeypatch.setattr(warmup_module, "warmup", fake_warmup)
    assert main(["warmup", "--dtype", "float64"]) == 0
    assert main(["warmup"]) == 0
    assert calls == [("float64",), ("float32", "float64")]
    assert capsys.readouterr().out.count("tinyattn warmup: done") == 2


_ERF_TWICE = """
import math
import numpy as np
from tinyattn.kernels.special import erf
x = np.array([0.5, -1.0], np.float32)
erf(x)
print(erf(x).tolist())
"""


_ERF_UNDER_A_BAR = """
import sys
import numpy as np
from tqdm import tqdm
from tinyattn.kernels.special import erf
for step in tqdm(range(3), file=sys.stderr, mininterval=0, ascii=True, desc="bar"):
    erf(np.array([0.5, -1.0], np.float32))  # compiles at step 0, while the bar is drawn
"""


def _child(code: str, cache_dir: str, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with numba's cache in ``cache_dir``."""
    return run_python(["-c", code], cache_dir, **env)


_DROPOUT_BOTH_PATHS = COUNT_COMPILES + """
import numpy as np
from tinyattn.kernels.dropout import dropout_apply

for size in (3, 1 << 20):  # the serial path, then the parallel one
    dropout_apply(np.ones(size, np.float32), seed=1, p=0.5)
print(len(compiled), sorted(set(compiled)))
"""


def test_after_warmup_a_family_compiles_nothing_on_its_serial_or_parallel_path(tmp_path):
    """warmup runs dropout on 3 elements only (the serial path); the parallel path of a large
    input must then compile nothing either. Without warmup, both paths compile."""
    cold = _child(_DROPOUT_BOTH_PATHS, str(tmp_path / "cold"))
    assert "_parallel_driver" in cold.stdout and "_dropout_chunk" in cold.stdout, cold.stdout
    warmed = str(tmp_path / "warmed")
    _child("from tinyattn.warmup import warmup; warmup(['float32'], families=['dropout'])",
           warmed)
    assert _child(_DROPOUT_BOTH_PATHS, warmed).stdout.strip() == "0 []"


def test_compile_line_once_when_compiling_none_when_cached_or_quiet(tmp_path):
    line = notice("tinyattn.kernels.special", "float32")
    assert line == "tinyattn: compiling special kernels for float32 (first run only)..."

    imported = _child("import tinyattn", str(tmp_path / "cache"))
    assert imported.stderr == ""  # importing compiles nothing

    compiled = _child(_ERF_TWICE, str(tmp_path / "cache"))
    assert compiled.stderr.splitlines() == [line]
    values = [float(v) for v in compiled.stdout.strip().strip("[]").split(",")]
    np.testing.assert_allclose(values, [math.erf(0.5), math.erf(-1.0)], rtol=1e-6)

    cached = _child(_ERF_TWICE, str(tmp_path / "cache"))
    assert cached.stderr == "" and cached.stdout == compiled.stdout

    quiet = _child(_ERF_TWICE, str(tmp_path / "empty"), **{QUIET_VARIABLE: "1"})
    assert quiet.stderr == "" and quiet.stdout == compiled.stdout


def test_the_compile_line_has_a_line_of_its_own_under_a_progress_bar(tmp_path):
    """What a terminal shows of each line: after its last carriage return. The notice must be
    the whole of the line it is on, and the bar must still be drawn to its end."""
    line = notice("tinyattn.kernels.special", "float32")
    stderr = _child(_ERF_UNDER_A_BAR, str(tmp_path / "cache")).stderr
    shown = [text.rsplit("\r", 1)[-1] for text in stderr.split("\n")]
    assert any("bar:" in text for text in stderr.split("\r"))  # the bar was drawn first
    with_notice = [text for text in shown if "compiling" in text]
    assert with_notice == [line], stderr
    assert "3/3" in stderr.rsplit(line, 1)[1]  # and drawn again after it, to the end


_SMALL_TORCH_SCRIPT = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
C, H = 32, 4
emb, ln, qkv, proj, head = (nn.Embedding(20, C), nn.LayerNorm(C), nn.Linear(C, 3 * C),
                            nn.Linear(C, C), nn.Linear(C, 20))
params = [p for m in (emb, ln, qkv, proj, head) for p in m.parameters()]
opt = torch.optim.AdamW(params, lr=1e-3)
for _ in range(2):
    idx, y = torch.randint(0, 20, (4, 16)), torch.randint(0, 20, (4, 16))
    x = emb(idx)
    q, k, v = (t.view(4, 16, H, C // H).transpose(1, 2) for t in qkv(ln(x)).split(C, dim=2))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(4, 16, C)
    loss = F.cross_entropy(head(F.gelu(x + proj(a))).view(-1, 20), y.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
"""


def _command(args: list[str], cache_dir: Path, cwd: Path) -> str:
    """``python -m tinyattn ARGS`` in a fresh process with numba's cache in ``cache_dir``;
    its stderr."""
    return run_python(["-m", "tinyattn", *args], cache_dir, cwd).stderr


def test_a_second_command_loads_what_the_first_compiled(tmp_path):
    """``tinyattn run`` of a small training script, then ``tinyattn train``, on one empty numba
    cache: the second command compiles only what the first did not (new functions or variants:
    no machine code the first wrote is written again), and announces no family whose kernels it
    only loads."""
    (tmp_path / "script.py").write_text(_SMALL_TORCH_SCRIPT)
    cache = tmp_path / "cache"
    first = _command(["run", "script.py"], cache, tmp_path)
    written = {path: path.stat().st_mtime_ns for path in cache.rglob("*.nbc")}
    assert written and notice("tinyattn.kernels.embedding", "float32") in first
    second = _command(["train", "--task", "copy", "--steps", "2", "--eval-every", "2",
                       "--no-progress", "--out", str(tmp_path / "out")], cache, tmp_path)
    assert {path: path.stat().st_mtime_ns for path in written} == written
    for family_module in ("embedding", "layer_norm", "cross_entropy"):  # loaded, not compiled
        assert notice(f"tinyattn.kernels.{family_module}", "float32") not in second, second


def test_after_warmup_a_training_script_compiles_nothing(tmp_path):
    """warmup's tiny inputs, backward before forward where it has them, give each kernel the
    signatures a training step calls it with: the small script's steps then compile nothing."""
    cache = tmp_path / "cache"
    _child("from tinyattn.warmup import warmup; warmup(['float32'])", cache)
    (tmp_path / "script.py").write_text(COUNT_COMPILES + _SMALL_TORCH_SCRIPT +
                                        "print(compiled)\n")
    out = run_python(["-m", "tinyattn", "run", "script.py"], cache, tmp_path).stdout
    assert out.strip().splitlines()[-1] == "[]"
