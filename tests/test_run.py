"""``tinyattn run SCRIPT [ARGS...]``: scripts written for PyTorch run unchanged, started as
``python SCRIPT ARGS`` starts them, with tinyattn as ``torch``; missing names say where; the
exit status is the script's; nothing of the hook is left afterwards.

Where PyTorch is installed, the same scripts also run under ``python`` with the real PyTorch:
that is the oracle for what the script sees and does (the scripts are valid PyTorch, not
written for tinyattn).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tinyattn
from tinyattn.run import TorchAliasFinder, run_script

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TINYATTN_QUIET_COMPILE"] = "1"
    return env


def tinyattn_run(script, *args, cwd):
    """``python -m tinyattn run script args`` in ``cwd``."""
    return subprocess.run([sys.executable, "-m", "tinyattn", "run", str(script), *args],
                          cwd=cwd, env=_env(), capture_output=True, text=True, timeout=900)


def python_run(script, *args, cwd):
    """``python script args`` in ``cwd`` (the real PyTorch, where the script imports torch)."""
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=900)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


# ---- what the script sees ---------------------------------------------------------------------
PROBE = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "name": __name__, "file": __file__,
                  "path0": sys.path[0], "main_file": sys.modules["__main__"].__file__,
                  "spec": repr(__spec__), "package": repr(__package__)}))
"""


def test_the_script_sees_what_python_gives_it(tmp_path):
    script = write(tmp_path / "scripts" / "probe.py", PROBE)
    args = ["a", "--device=cpu", "--compile=False", "-v", "config/x.py"]
    ours = tinyattn_run("scripts/probe.py", *args, cwd=tmp_path)
    python = python_run("scripts/probe.py", *args, cwd=tmp_path)
    assert ours.returncode == python.returncode == 0, ours.stderr
    seen = json.loads(ours.stdout)
    assert seen == json.loads(python.stdout)
    assert seen["argv"] == ["scripts/probe.py", *args] and seen["name"] == "__main__"
    assert seen["file"] == str(script) and seen["path0"] == str(script.parent)


def test_the_folder_of_a_linked_script_is_the_target_folder_as_in_python(tmp_path):
    target = write(tmp_path / "real" / "probe.py", PROBE)
    (tmp_path / "link.py").symlink_to(target)
    ours, python = (run("link.py", cwd=tmp_path) for run in (tinyattn_run, python_run))
    assert json.loads(ours.stdout) == json.loads(python.stdout)
    assert json.loads(ours.stdout)["path0"] == str(target.parent)


def test_the_pythonpath_stays_when_the_runner_is_started_with_python_p(tmp_path):
    """``python -P -m tinyattn run`` (no working directory first on sys.path) keeps every
    PYTHONPATH entry before the script's folder, as ``python script.py`` does."""
    write(tmp_path / "lib" / "helper_package" / "__init__.py", "NAME = 'found'\n")
    write(tmp_path / "scripts" / "main.py", """
        import sys
        import helper_package
        print(helper_package.NAME, sys.path[0])
    """)
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path / "lib"),
                                                      env.get("PYTHONPATH")]))
    results = [subprocess.run([sys.executable, *runner, "scripts/main.py"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=900)
               for runner in (["-P", "-m", "tinyattn", "run"], [])]
    assert [r.returncode for r in results] == [0, 0], results[0].stderr
    assert results[0].stdout == results[1].stdout == f"found {tmp_path / 'scripts'}\n"


def test_torch_and_its_submodules_are_tinyattns_in_the_script_and_its_modules(tmp_path):
    write(tmp_path / "helper.py", """
        import torch.nn.functional as F
        from torch import nn
        NAMES = (F.__name__, nn.__name__)
    """)
    write(tmp_path / "main.py", """
        import torch
        import torch.nn as nn
        import torch.nn.functional
        import torch.backends.cudnn
        import torch.cuda.amp
        from torch.nn.parallel import DistributedDataParallel
        from torch.distributed import init_process_group, destroy_process_group
        from torch.utils.data import Dataset
        import helper
        print(torch.__name__, nn.__name__, torch.nn.functional.__name__,
              torch.backends.cudnn.__name__, *helper.NAMES, torch.cuda.amp.__name__)
        print(torch.nn.functional is helper.F, torch.ones(2, 3).sum().item())
    """)
    result = tinyattn_run("main.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    names, facts = result.stdout.splitlines()
    assert names.split() == ["tinyattn", "tinyattn.nn", "tinyattn.functional",
                             "tinyattn.backends.cudnn", "tinyattn.functional", "tinyattn.nn",
                             "tinyattn.cuda.amp"]
    assert facts == "True 6.0"


# ---- a nanoGPT-style training script, trained and resumed ---------------------------------
CONFIGURATOR = """
# Apply a config file (a path) and --key=value overrides to the caller's globals.
import sys
from ast import literal_eval

for argument in sys.argv[1:]:
    if not argument.startswith("--"):
        exec(open(argument).read())
        continue
    key, value = argument[2:].split("=", 1)
    if key not in globals():
        raise ValueError(f"unknown setting {key}")
    try:
        parsed = literal_eval(value)
    except (SyntaxError, ValueError):
        parsed = value
    if type(parsed) is not type(globals()[key]):
        raise TypeError(f"{key} must be a {type(globals()[key]).__name__}")
    globals()[key] = parsed
"""

MODEL = """
import inspect
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(self.norm1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, context, width, heads, layers):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.head = nn.Linear(width, vocab, bias=False)
        self.apply(self._init)

    def _init(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.pos.num_embeddings else \
                idx[:, -self.pos.num_embeddings:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx

    def optimizer(self, lr, device_type):
        decay = [p for p in self.parameters() if p.dim() >= 2]
        rest = [p for p in self.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
        fused = "fused" in inspect.signature(torch.optim.AdamW).parameters
        extra = dict(fused=True) if fused and device_type == "cuda" else dict()
        print(f"fused available: {fused}")
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), **extra)
"""

TRAIN = """
import math
import os
from contextlib import nullcontext

import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group

from model import TinyGPT

out_dir = "out"
init_from = "scratch"
max_iters = 6
eval_interval = 3
batch_size = 4
block_size = 8
width = 16
device = "cuda"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
compile = True
learning_rate = 3e-3
exec(open(os.path.join(os.path.dirname(__file__), "configurator.py")).read())

ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend="gloo")
torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if dtype == "float32" else torch.amp.autocast(device_type=device_type,
                                                                  dtype=torch.bfloat16)
print(f"dtype {dtype} device {device}")

text = "abcdefghij" * 40
data = torch.tensor([ord(c) - ord("a") for c in text], dtype=torch.long)


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    return x.to(device), y.to(device)


iter_num = 0
model = TinyGPT(10, block_size, width, 2, 2)
checkpoint = None
if init_from == "resume":
    checkpoint = torch.load(os.path.join(out_dir, "ckpt.pt"), map_location=device)
    model.load_state_dict(checkpoint["model"])
    iter_num = checkpoint["iter_num"]
    print(f"resumed at {iter_num} with weight sum {checkpoint['weight_sum']:.6f} "
          f"now {model.head.weight.sum().item():.6f}")
model.to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
optimizer = model.optimizer(learning_rate, device_type)
if checkpoint is not None:
    optimizer.load_state_dict(checkpoint["optimizer"])
if compile:
    model = torch.compile(model)
if ddp:
    model = DDP(model, device_ids=[0])

while iter_num < max_iters:
    X, Y = get_batch()
    with ctx:
        logits, loss = model(X, Y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    iter_num += 1
    print(f"iter {iter_num}: loss {loss.item():.4f} scale {scaler.get_scale()}")
    assert math.isfinite(loss.item())
    if iter_num % eval_interval == 0:
        os.makedirs(out_dir, exist_ok=True)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "iter_num": iter_num, "weight_sum": model.head.weight.sum().item(),
                    "config": {"width": width, "dtype": dtype}},
                   os.path.join(out_dir, "ckpt.pt"))
        print(f"saved at {iter_num}")
if ddp:
    destroy_process_group()
"""


SAMPLE = """
import os
from contextlib import nullcontext

import torch

from model import TinyGPT

out_dir = "out"
num_samples = 2
max_new_tokens = 12
temperature = 0.8
top_k = 5
seed = 1337
device = "cuda"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
compile = False
exec(open(os.path.join(os.path.dirname(__file__), "configurator.py")).read())

torch.manual_seed(seed)
torch.cuda.manual_seed(seed)
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type,
                                                                    dtype=ptdtype)

checkpoint = torch.load(os.path.join(out_dir, "ckpt.pt"), map_location=device)
model = TinyGPT(10, 8, checkpoint["config"]["width"], 2, 2)
state_dict = checkpoint["model"]
unwanted_prefix = "_orig_mod."
for k, v in list(state_dict.items()):
    if k.startswith(unwanted_prefix):
        state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
model.load_state_dict(state_dict)
model.eval()
model.to(device)
if compile:
    model = torch.compile(model)
print(f"weights {model.head.weight.sum().item():.6f} saved {checkpoint['weight_sum']:.6f}")

start_ids = [ord(c) - ord("a") for c in "abc"]
x = torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...]
with torch.no_grad():
    with ctx:
        for k in range(num_samples):
            y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k)
            print("sample", "".join(chr(ord("a") + int(i)) for i in y[0].tolist()))
            print("---------------")
"""


@pytest.fixture
def project(tmp_path):
    write(tmp_path / "configurator.py", CONFIGURATOR)
    write(tmp_path / "model.py", MODEL)
    write(tmp_path / "train.py", TRAIN)
    write(tmp_path / "sample.py", SAMPLE)
    write(tmp_path / "config" / "tiny.py", """
        # a config file, as nanoGPT's config/*.py
        max_iters = 6
        eval_interval = 3
        width = 16
    """)
    return tmp_path


def _losses(stdout):
    return [float(line.split()[3]) for line in stdout.splitlines() if line.startswith("iter ")]


def test_a_nanogpt_style_script_trains_saves_and_resumes(project):
    first = tinyattn_run("train.py", "config/tiny.py", "--device=cpu", "--max_iters=6",
                         cwd=project)
    assert first.returncode == 0, first.stderr
    out = first.stdout
    assert "dtype float16 device cpu" in out  # torch.cuda.is_available() is False
    assert "fused available: True" in out
    losses = _losses(out)
    assert len(losses) == 6 and all(0 < loss < 5 for loss in losses)
    assert "scale 1.0" in out  # the float16 GradScaler was disabled: no CUDA
    assert out.count("saved at") == 2 and (project / "out" / "ckpt.pt").is_file()
    err = first.stderr
    assert "GradScaler is enabled, but CUDA is not available" in err
    assert err.count("torch.compile(TinyGPT) runs it eagerly") == 1
    assert err.count("torch.autocast(device_type='cpu', dtype=bfloat16)") == 1

    second = tinyattn_run("train.py", "config/tiny.py", "--device=cpu", "--max_iters=9",
                          "--init_from=resume", cwd=project)
    assert second.returncode == 0, second.stderr
    resumed = [line for line in second.stdout.splitlines() if line.startswith("resumed")][0]
    _, _, at, _, _, _, saved, _, now = resumed.split()
    assert at == "6" and saved == now  # the weights are the checkpoint's
    assert [line.split(":")[0] for line in second.stdout.splitlines()
            if line.startswith("iter ")] == ["iter 7", "iter 8", "iter 9"]


def test_a_sample_script_loads_the_checkpoint_and_samples(project):
    trained = tinyattn_run("train.py", "config/tiny.py", "--device=cpu", "--max_iters=6",
                           cwd=project)
    assert trained.returncode == 0, trained.stderr
    runs = [tinyattn_run("sample.py", "--device=cpu", f"--seed={seed}", cwd=project)
            for seed in (1337, 1337, 7)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    lines = runs[0].stdout.splitlines()
    _, now, _, saved = lines[0].split()
    assert now == saved  # the model sampled is the checkpoint's
    samples = [line.split()[1] for line in lines if line.startswith("sample ")]
    assert len(samples) == 2 and all(len(s) == 3 + 12 and s.startswith("abc") for s in samples)
    assert all(set(s) <= set("abcdefghij") for s in samples)
    assert runs[0].stdout == runs[1].stdout  # torch.manual_seed makes sampling repeat
    assert runs[2].stdout != runs[0].stdout


def test_the_sample_script_is_valid_pytorch(project):
    """The oracle: PyTorch samples from the checkpoint that tinyattn trained and saved."""
    pytest.importorskip("torch")
    trained = tinyattn_run("train.py", "config/tiny.py", "--device=cpu", "--max_iters=3",
                           cwd=project)
    assert trained.returncode == 0, trained.stderr
    result = python_run("sample.py", "--device=cpu", cwd=project)
    assert result.returncode == 0, result.stderr
    _, now, _, saved = result.stdout.splitlines()[0].split()
    assert now == saved
    assert sum(line.startswith("sample abc") for line in result.stdout.splitlines()) == 2


def test_a_ddp_launch_is_refused_with_a_clear_error(project):
    env = _env() | {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    result = subprocess.run([sys.executable, "-m", "tinyattn", "run", "train.py", "--device=cpu"],
                            cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 1
    assert "tinyattn runs one process" in result.stderr.splitlines()[-1]
    assert 'File "' + str(project / "train.py") + '", line 26' in result.stderr


def test_the_training_script_is_valid_pytorch(project):
    """The oracle: the real PyTorch runs the same script to the same end (its own numbers)."""
    pytest.importorskip("torch")
    result = python_run("train.py", "config/tiny.py", "--device=cpu", "--max_iters=3",
                        "--compile=False", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "dtype float16 device cpu" in result.stdout and len(_losses(result.stdout)) == 3
    assert "GradScaler is enabled, but CUDA is not available" in result.stderr


# ---- missing names, errors and exit codes ---------------------------------------------------
@pytest.mark.parametrize("body, last_line", [
    ("import torch\n\nx = torch.einsum('ij->ji', torch.ones(2, 2))\n",
     "AttributeError: tinyattn has no torch.einsum (bad.py:3): "),
    ("import os\nfrom torch.nn import Conv1d\n",
     "ImportError: tinyattn has no torch.nn.Conv1d (bad.py:2): "),
    ("import torch\nimport torch.distributed.fsdp\n",
     "ModuleNotFoundError: tinyattn has no torch.distributed.fsdp (bad.py:2): "),
    ("import torch\nimport torch.nn as nn\nlayer = nn.TransformerEncoderLayer(8, 2)\n",
     "AttributeError: tinyattn has no torch.nn.TransformerEncoderLayer (bad.py:3): "),
    ("import torch\nimport torch.nn.functional as F\nF.binary_cross_entropy_with_logits2\n",
     "AttributeError: tinyattn has no torch.nn.functional.binary_cross_entropy_with_logits2 "
     "(bad.py:3): "),
    ("import torch\ntorch.cuda.set_device(0)\n",
     "AttributeError: tinyattn has no torch.cuda.set_device (bad.py:2): "),
    ("import torch\nopt = torch.optim.LBFGS\n",
     "AttributeError: tinyattn has no torch.optim.LBFGS (bad.py:2): "),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf23 = True\n",
     "AttributeError: tinyattn has no torch.backends.cuda.matmul.allow_tf23 (bad.py:2): "),
    ("import helper\n", "AttributeError: tinyattn has no torch.einsum (helper.py:2): "),
    ("import torch\nx = torch.ones(2)\nx.frobnicate()\n",
     "AttributeError: tinyattn has no torch.Tensor.frobnicate (bad.py:3): "),
])
def test_a_missing_name_fails_at_the_line_that_uses_it(tmp_path, body, last_line):
    write(tmp_path / "helper.py", "import torch\ny = torch.einsum\n")
    write(tmp_path / "bad.py", body)
    result = tinyattn_run("bad.py", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1].startswith(last_line), lines[-1]
    file = "helper.py" if "helper" in last_line else "bad.py"
    assert lines[-3 if "^" in lines[-2] else -2].strip() != ""  # the offending code is shown
    assert f'File "{tmp_path / file}"' in result.stderr
    assert "importlib" not in result.stderr and "tinyattn/run.py" not in result.stderr
    assert "tinyattn/__init__.py" not in result.stderr


def test_a_script_can_catch_a_missing_module_as_an_import_error(tmp_path):
    write(tmp_path / "fallback.py", """
        try:
            import torch._dynamo
        except ImportError as error:
            print("no dynamo:", type(error).__name__)
    """)
    result = tinyattn_run("fallback.py", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "no dynamo: ModuleNotFoundError\n"


@pytest.mark.parametrize("body, status", [
    ("print('done')\n", 0),
    ("import sys\nsys.exit(3)\n", 3),
    ("import sys\nsys.exit(0)\n", 0),
    ("import sys\nsys.exit('stopped: no data')\n", 1),
    ("raise ValueError('bad value')\n", 1),
    ("def f(:\n", 1),
])
def test_the_exit_status_and_the_error_are_pythons(tmp_path, body, status):
    write(tmp_path / "s.py", body)
    ours, python = tinyattn_run("s.py", cwd=tmp_path), python_run("s.py", cwd=tmp_path)
    assert ours.returncode == python.returncode == status
    assert ours.stdout == python.stdout
    assert ours.stderr.strip().splitlines()[-1:] == python.stderr.strip().splitlines()[-1:]
    assert "tinyattn/run.py" not in ours.stderr


def test_the_script_runs_on_every_core_unless_told_otherwise(tmp_path):
    # as under torch, a script is not held to one thread; --threads before SCRIPT still rules
    import numba

    script = write(tmp_path / "threads.py", "import torch\nprint(torch.get_num_threads())\n")
    assert tinyattn_run(script, cwd=tmp_path).stdout == f"{numba.config.NUMBA_NUM_THREADS}\n"
    one = subprocess.run([sys.executable, "-m", "tinyattn", "run", "--threads", "1", str(script)],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert one.stdout == "1\n"


def test_a_run_loads_no_progress_bar_machinery(tmp_path):
    # tqdm (and the asyncio, ssl and multiprocessing it imports) is for `tinyattn train`'s own
    # bar; a script that does not import it does not pay for it in memory
    script = write(tmp_path / "modules.py", "import sys, torch\nprint('tqdm' in sys.modules)\n")
    assert tinyattn_run(script, cwd=tmp_path).stdout == "False\n"


def test_bad_usage_of_run_exits_with_status_2(tmp_path):
    result = tinyattn_run("no_such_script.py", cwd=tmp_path)
    assert result.returncode == 2 and "can't open file 'no_such_script.py'" in result.stderr
    helped = subprocess.run([sys.executable, "-m", "tinyattn", "run", "--help"], cwd=tmp_path,
                            env=_env(), capture_output=True, text=True, timeout=300)
    assert helped.returncode == 0 and "usage: tinyattn run" in helped.stdout


# ---- in the same process: the hook and the state are put back ------------------------------
@pytest.fixture
def quiet_allocator(monkeypatch):
    monkeypatch.setenv("TINYATTN_KEEP_FREED_MEMORY", "0")


def test_after_a_run_the_hook_and_torch_are_gone(tmp_path, quiet_allocator, capsys):
    write(tmp_path / "helper.py", "import torch\nNAME = torch.__name__\n")
    write(tmp_path / "s.py", """
        import sys
        import torch
        try:
            import torch.distributed.fsdp
        except ImportError:
            pass
        import helper
        print(helper.NAME, torch.distributed.__name__, type(torch.distributed.__path__).__name__)
        sys.argv.append("changed")
        sys.path.append("/nowhere")
    """)
    argv, path = sys.argv[:], sys.path[:]
    before = {name: module for name, module in sys.modules.items()
              if name == "torch" or name.startswith("torch.")}
    assert run_script(tmp_path / "s.py", ["x"]) == 0
    assert capsys.readouterr().out == "tinyattn tinyattn.distributed list\n"
    assert not any(isinstance(finder, TorchAliasFinder) for finder in sys.meta_path)
    after = {name: module for name, module in sys.modules.items()
             if name == "torch" or name.startswith("torch.")}
    assert after == before  # no torch of tinyattn's is left (a real one stays as it was)
    assert "helper" not in sys.modules and sys.argv == argv and sys.path == path
    assert not hasattr(tinyattn.distributed, "__path__")  # a plain module again
    assert sys.modules["__main__"].__name__ == "__main__"


def test_a_real_pytorch_imported_before_the_run_is_back_after_it(tmp_path, quiet_allocator,
                                                                   capsys):
    torch = pytest.importorskip("torch")
    write(tmp_path / "s.py", "import torch\nimport torch.nn\nprint(torch.__name__)\n")
    assert run_script(tmp_path / "s.py") == 0
    assert capsys.readouterr().out == "tinyattn\n"
    assert sys.modules["torch"] is torch and sys.modules["torch.nn"] is torch.nn
    assert torch.ones(1).sum().item() == 1.0


def test_each_notice_is_said_once_per_run(tmp_path, quiet_allocator, capsys):
    write(tmp_path / "s.py", """
        import torch
        a = torch.compile(torch.nn.Linear(2, 2))
        b = torch.compile(torch.nn.Linear(2, 2), mode="max-autotune")
        for _ in range(3):
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                y = a(torch.ones(1, 2))
        print(y.dtype)
    """)
    for _ in range(2):
        assert run_script(tmp_path / "s.py") == 0
        captured = capsys.readouterr()
        assert captured.out == "float32\n"
        notices = captured.err.strip().splitlines()
        assert len(notices) == 2, notices
        assert notices[0].startswith("tinyattn: torch.compile(Linear) runs it eagerly")
        assert notices[1].startswith("tinyattn: torch.autocast(device_type='cpu', "
                                     "dtype=bfloat16) computes in the tensors' own dtypes")


def test_run_script_refuses_a_missing_file_and_non_string_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match="can't open file"):
        run_script(tmp_path / "missing.py")
    write(tmp_path / "s.py", "pass\n")
    with pytest.raises(TypeError, match="arguments must be strings"):
        run_script(tmp_path / "s.py", [1])
