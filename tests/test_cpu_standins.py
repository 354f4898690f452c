"""What training scripts touch on a CPU behaves as PyTorch does on a CPU-only machine: the
distributed and parallel wrappers, the backends' flags, float16 and the bfloat16 name, the
default dtype, finfo/iinfo, assert_close, autocast, GradScaler, compile, the cuda module,
AdamW's signature, Flatten; and a missing name says which line asked for it.

PyTorch (CPU build) is the oracle wherever it answers the same on this machine.
"""

import inspect
import sys
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import notices
from tinyattn.errors import DTypeError

nn, F = ta.nn, ta.nn.functional


# ---- distributed and parallel ---------------------------------------------------------------
def test_distributed_is_one_process():
    assert ta.distributed.is_available() is False and ta.distributed.is_initialized() is False
    with pytest.raises(RuntimeError, match="tinyattn runs one process"):
        ta.distributed.init_process_group(backend="nccl")
    for call in (ta.distributed.get_rank, ta.distributed.get_world_size,
                 ta.distributed.destroy_process_group):
        with pytest.raises(RuntimeError, match="never initialized"):
            call()
    with pytest.raises(RuntimeError, match="DistributedDataParallel: tinyattn runs one process"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2), device_ids=[0])


def test_data_parallel_without_gpus_runs_the_module_as_pytorch_does():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.DataParallel(torch.nn.Linear(3, 2))
    ours = nn.DataParallel(nn.Linear(3, 2))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["module.weight",
                                                                     "module.bias"]
    ours.load_state_dict(theirs.state_dict())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(ours(ta.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-6,
                               atol=1e-6)
    with pytest.raises(RuntimeError, match="device_ids=\\[0\\] names GPUs"):
        nn.DataParallel(nn.Linear(3, 2), device_ids=[0])


# ---- backends and matmul precision ----------------------------------------------------------
def test_backends_flags_have_pytorchs_cpu_defaults_and_can_be_set():
    torch = pytest.importorskip("torch")
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(ta.backends.cudnn, name) == getattr(torch.backends.cudnn, name), name
    assert ta.backends.mps.is_available() is torch.backends.mps.is_available() is False
    assert ta.backends.cudnn.is_available() is torch.backends.cudnn.is_available() is False
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction"):
        assert getattr(ta.backends.cuda.matmul, name) == getattr(torch.backends.cuda.matmul,
                                                                 name)
    matmul = ta.backends.cuda.matmul
    saved = matmul.allow_tf32, ta.backends.cudnn.benchmark
    try:
        matmul.allow_tf32 = True
        ta.backends.cudnn.benchmark = True
        assert matmul.allow_tf32 and ta.backends.cudnn.benchmark
        x = ta.ones(3, 3)
        assert (x @ x).dtype == ta.float32  # nothing changed
    finally:
        matmul.allow_tf32, ta.backends.cudnn.benchmark = saved
    with pytest.raises(AttributeError, match=r"torch.backends.cuda.matmul.allow_tf23 "
                                             r"\(test_cpu_standins.py:\d+\)"):
        matmul.allow_tf23 = True


def test_float32_matmul_precision_is_recorded():
    torch = pytest.importorskip("torch")
    assert ta.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == \
        "highest"
    try:
        for precision in ("high", "medium", "highest"):
            ta.set_float32_matmul_precision(precision)
            assert ta.get_float32_matmul_precision() == precision
        with pytest.raises(ValueError, match="'fast' is not one of 'highest', 'high', 'medium'"):
            ta.set_float32_matmul_precision("fast")
    finally:
        ta.set_float32_matmul_precision("highest")


# ---- float16 and the bfloat16 name ----------------------------------------------------------
PROMOTIONS = [
    ("f16 + f32", lambda t: t.ones(2, dtype=t.float16) + t.ones(2)),
    ("f16 + 0.5", lambda t: t.ones(2, dtype=t.float16) + 0.5),
    ("f16 + 2", lambda t: t.ones(2, dtype=t.float16) + 2),
    ("f16 + f64 0-d", lambda t: t.ones(2, dtype=t.float16) + t.tensor(1.0, dtype=t.float64)),
    ("i64 + f16 0-d", lambda t: t.ones(2, dtype=t.int64) + t.tensor(1.0, dtype=t.float16)),
    ("f16 * i64", lambda t: t.ones(2, dtype=t.float16) * t.ones(2, dtype=t.int64)),
    ("f16 + f64", lambda t: t.ones(2, dtype=t.float16) + t.ones(2, dtype=t.float64)),
    ("half()", lambda t: t.ones(2).half()),
    ("to(half)", lambda t: t.arange(3).to(t.half)),
    ("f16 / i64", lambda t: t.ones(2, dtype=t.float16) / t.ones(2, dtype=t.int64)),
]


@pytest.mark.parametrize("label, expression", PROMOTIONS, ids=[p[0] for p in PROMOTIONS])
def test_float16_promotes_as_in_pytorch(label, expression):
    torch = pytest.importorskip("torch")
    assert expression(ta).dtype.name == str(expression(torch).dtype).removeprefix("torch.")


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "relu", "abs", "neg", "sqrt"])
def test_elementwise_ops_compute_in_float16(name):
    torch = pytest.importorskip("torch")
    values = np.linspace(-2.0, 2.0, 9).astype(np.float16)
    if name == "sqrt":
        values = np.abs(values)
    ours = getattr(ta.tensor(values), name)()
    theirs = getattr(torch.tensor(values), name)()
    assert ours.dtype == ta.float16
    np.testing.assert_allclose(ours.numpy().astype(np.float32),
                               theirs.numpy().astype(np.float32), rtol=1e-3, atol=1e-3)


def test_float16_gradients_flow_through_elementwise_ops():
    x = ta.tensor([0.5, -1.0, 2.0], dtype=ta.float16, requires_grad=True)
    (x * x + x.tanh()).sum().backward()
    assert x.grad.dtype == ta.float16
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy() + 1 - np.tanh(x.numpy()) ** 2,
                               rtol=2e-3)
    assert ta.tensor([1.0]).half().type() == "tinyattn.HalfTensor"


KERNEL_OPS = [
    ("matmul", lambda x: x @ x.transpose(-1, -2)),
    ("linear", lambda x: F.linear(x, ta.ones(3, 4).half())),
    ("softmax", lambda x: F.softmax(x, dim=-1)),
    ("log_softmax", lambda x: x.log_softmax(-1)),
    ("layer_norm", lambda x: F.layer_norm(x, (4,))),
    ("gelu", lambda x: F.gelu(x)),
    ("cross_entropy", lambda x: F.cross_entropy(x.view(-1, 4), ta.tensor([0, 1, 2, 3, 0, 1]))),
    ("scaled_dot_product_attention", lambda x: F.scaled_dot_product_attention(x, x, x)),
    ("embedding", lambda x: F.embedding(ta.tensor([0, 1]), x[0])),
    ("dropout", lambda x: F.dropout(x, 0.5)),
]


@pytest.mark.parametrize("op, call", KERNEL_OPS, ids=[k[0] for k in KERNEL_OPS])
def test_kernel_ops_refuse_float16_naming_the_op(op, call):
    x = ta.ones(2, 3, 4).half()
    with pytest.raises(DTypeError, match=f"^{op}: float16 is not supported"):
        call(x)


def test_adamw_refuses_float16_parameters_and_sgd_takes_them():
    w = nn.Parameter(ta.ones(3).half())
    w.grad = ta.ones(3).half()
    with pytest.raises(DTypeError, match="AdamW: float16 is not supported"):
        ta.optim.AdamW([w]).step()
    ta.optim.SGD([w], lr=0.5).step()
    assert w.dtype == ta.float16 and w.tolist() == [0.5, 0.5, 0.5]


def test_bfloat16_is_a_name_without_storage():
    torch = pytest.importorskip("torch")
    table = {"float32": ta.float32, "bfloat16": ta.bfloat16, "float16": ta.float16}
    assert table["bfloat16"] is ta.bfloat16 and repr(ta.bfloat16) == "tinyattn.bfloat16"
    x = ta.ones(2)
    assert (x.dtype == ta.bfloat16) is False and (x.dtype != ta.bfloat16) is True
    assert (torch.ones(2).dtype == torch.bfloat16) is False  # the same answer in PyTorch
    for call in (lambda: ta.zeros(2, dtype=ta.bfloat16), lambda: x.to(ta.bfloat16),
                 lambda: x.to(dtype=ta.bfloat16), lambda: x.bfloat16(),
                 lambda: ta.tensor([1.0], dtype=ta.bfloat16),
                 lambda: nn.Linear(2, 2, dtype=ta.bfloat16)):
        with pytest.raises(DTypeError, match="tinyattn has no bfloat16 storage"):
            call()
    with pytest.raises(TypeError, match="Module.bfloat16: tinyattn has no bfloat16 storage"):
        nn.Linear(2, 2).bfloat16()


# ---- the default dtype ------------------------------------------------------------------------
DEFAULT_DTYPE_CASES = [
    ("tensor of floats", lambda t: t.tensor([1.5, 2.0])),
    ("zeros", lambda t: t.zeros(2)),
    ("randn", lambda t: t.randn(2)),
    ("arange of a float", lambda t: t.arange(0.5, 3)),
    ("int / int", lambda t: t.tensor([1, 2]) / 2),
    ("int + 0.5", lambda t: t.tensor([1, 2]) + 0.5),
    ("exp of int", lambda t: t.tensor([1, 2]).exp()),
    ("Linear weight", lambda t: t.nn.Linear(2, 3).weight),
    ("LayerNorm weight", lambda t: t.nn.LayerNorm(3).weight),
    ("Embedding weight", lambda t: t.nn.Embedding(4, 3).weight),
    ("float32 + 0.5", lambda t: t.ones(2, dtype=t.float32) + 0.5),
]


@pytest.fixture
def float64_default():
    torch = pytest.importorskip("torch")
    ta.set_default_dtype(ta.float64)
    torch.set_default_dtype(torch.float64)
    yield torch
    ta.set_default_dtype(ta.float32)
    torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("label, expression", DEFAULT_DTYPE_CASES,
                         ids=[c[0] for c in DEFAULT_DTYPE_CASES])
def test_set_default_dtype_float64_changes_what_pytorch_changes(float64_default, label,
                                                                 expression):
    torch = float64_default
    assert ta.get_default_dtype() == ta.float64
    assert expression(ta).dtype.name == str(expression(torch).dtype).removeprefix("torch.")


def test_set_default_dtype_refuses_what_is_not_a_float():
    with pytest.raises(TypeError, match="only floating point types"):
        ta.set_default_dtype(ta.int64)
    with pytest.raises(DTypeError, match="no bfloat16 storage"):
        ta.set_default_dtype(ta.bfloat16)
    assert ta.get_default_dtype() == ta.float32


# ---- finfo and iinfo --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_is_pytorchs(name):
    torch = pytest.importorskip("torch")
    ours, theirs = ta.finfo(getattr(ta, name)), torch.finfo(getattr(torch, name))
    for attribute in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution",
                      "dtype"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
        assert type(getattr(ours, attribute)) is type(getattr(theirs, attribute)), attribute
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_is_pytorchs(name):
    torch = pytest.importorskip("torch")
    ours, theirs = ta.iinfo(getattr(ta, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.max, ours.min, ours.dtype) == (theirs.bits, theirs.max, theirs.min,
                                                           theirs.dtype)


def test_finfo_and_iinfo_refuse_the_other_kind():
    assert ta.finfo().dtype == "float32"
    with pytest.raises(TypeError, match="use iinfo"):
        ta.finfo(ta.int32)
    with pytest.raises(TypeError, match="use finfo"):
        ta.iinfo(ta.float32)
    with pytest.raises(TypeError, match="bool, not an integer"):
        ta.iinfo(ta.bool)


# ---- assert_close -----------------------------------------------------------------------------
def _pair(torch, values, dtype):
    return ta.tensor(np.asarray(values), dtype=getattr(ta, dtype)), \
        torch.tensor(np.asarray(values), dtype=getattr(torch, dtype))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int64"])
@pytest.mark.parametrize("factor", [0.5, 0.999, 1.001, 2.0, 100.0])
def test_assert_close_default_tolerances_decide_as_pytorchs(dtype, factor):
    torch = pytest.importorskip("torch")
    from torch.testing import assert_close as theirs

    rtol, atol = {"float16": (1e-3, 1e-5), "float32": (1.3e-6, 1e-5),
                  "float64": (1e-7, 1e-7), "int64": (0, 0)}[dtype]
    expected = np.array([1.0, 100.0, 0.0] if dtype != "int64" else [1, 100, 0])
    delta = factor * (atol + rtol * np.abs(expected)) if dtype != "int64" else factor > 1.0
    actual = expected + delta
    ours_a, theirs_a = _pair(torch, actual, dtype)
    ours_e, theirs_e = _pair(torch, expected, dtype)
    try:
        theirs(theirs_a, theirs_e)
        torch_passes = True
    except AssertionError:
        torch_passes = False
    try:
        ta.testing.assert_close(ours_a, ours_e)
        ours_passes = True
    except AssertionError:
        ours_passes = False
    assert ours_passes == torch_passes


ASSERT_CASES = [
    ("one of three", lambda t: (t.tensor([1.0, 2.0, 3.0]), t.tensor([1.0, 2.1, 3.0])), {}),
    ("two of four", lambda t: (t.tensor([[1.0, 2.0], [3.0, 4.0]]),
                               t.tensor([[1.0, 2.5], [3.0, 5.0]])), {}),
    ("dtype", lambda t: (t.tensor([1.0]), t.tensor([1.0], dtype=t.float64)), {}),
    ("nan", lambda t: (t.tensor([float("nan")]), t.tensor([float("nan")])), {}),
    ("inf sign", lambda t: (t.tensor([1.0, float("inf")]), t.tensor([1.0, float("-inf")])), {}),
    ("scalars", lambda t: (1.0, 1.1), {}),
    ("ints", lambda t: (1, 2), {}),
    ("types", lambda t: (1.0, 1), {}),
    ("0-d", lambda t: (t.tensor(1.0), t.tensor(2.0)), {}),
    ("float64 exact", lambda t: (t.tensor([1.0, 2.0], dtype=t.float64),
                                 t.tensor([1.0, 2.5], dtype=t.float64)),
     {"rtol": 0.0, "atol": 0.0}),
    ("item", lambda t: ([t.tensor(1.0), t.tensor(2.0)], [t.tensor(1.0), t.tensor(2.5)]), {}),
    ("nested", lambda t: ({"a": [t.tensor(1.0), t.tensor(3.0)]},
                          {"a": [t.tensor(1.0), t.tensor(3.5)]}), {}),
    ("keys", lambda t: ({"a": 1.0}, {"b": 1.0}), {}),
    ("length", lambda t: ([1.0, 2.0], [1.0, 2.0, 3.0]), {}),
    ("msg", lambda t: (t.tensor([1.0]), t.tensor([2.0])), {"msg": "custom"}),
    ("msg callable", lambda t: (t.tensor([1.0, 2.0]), t.tensor([1.0, 2.5])),
     {"msg": lambda text: "X " + text}),
]


@pytest.mark.parametrize("label, make, options", ASSERT_CASES, ids=[c[0] for c in ASSERT_CASES])
def test_assert_close_says_what_pytorch_says(label, make, options):
    torch = pytest.importorskip("torch")
    from torch.testing import assert_close as theirs

    with pytest.raises(AssertionError) as raised_theirs:
        theirs(*make(torch), **options)
    with pytest.raises(AssertionError) as raised_ours:
        ta.testing.assert_close(*make(ta), **options)
    assert str(raised_ours.value) == str(raised_theirs.value).replace("torch.", "tinyattn.")


def test_assert_close_passes_and_checks_its_arguments():
    torch = pytest.importorskip("torch")
    ta.testing.assert_close(ta.tensor([1.0, float("nan")]), ta.tensor([1.0, float("nan")]),
                            equal_nan=True)
    ta.testing.assert_close(ta.tensor([1.0], dtype=ta.float64), ta.tensor([1.0]),
                            check_dtype=False)
    ta.testing.assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]))
    with pytest.raises(ValueError) as raised:
        ta.testing.assert_close(ta.ones(1), ta.ones(1), rtol=0.1)
    with pytest.raises(ValueError) as raised_theirs:
        torch.testing.assert_close(torch.ones(1), torch.ones(1), rtol=0.1)
    assert str(raised.value) == str(raised_theirs.value)
    with pytest.raises(TypeError, match="no comparison for inputs"):
        ta.testing.assert_close(ta.ones(1), [1.0])


# ---- autocast -------------------------------------------------------------------------------
def test_autocast_on_the_cpu_computes_in_float32_and_says_so_once(capsys):
    notices.forget()
    x = ta.ones(2, 2)
    for _ in range(2):
        with ta.autocast(device_type="cpu", dtype=ta.bfloat16):
            assert (x @ x).dtype == ta.float32
    with ta.amp.autocast("cpu"):
        pass
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tinyattn: torch.autocast(device_type='cpu', dtype=bfloat16) computes in "
                   "the tensors' own dtypes (float32): tinyattn has no mixed precision"]

    @ta.autocast("cpu", enabled=False)
    def double(t):
        return t * 2

    assert double(x).tolist() == [[2.0, 2.0], [2.0, 2.0]] and capsys.readouterr().err == ""


@pytest.mark.parametrize("args", [dict(device_type="cuda"), dict(device_type="mps"),
                                  dict(device_type="cpu", dtype="float32"),
                                  dict(device_type="cpu", dtype="float64")],
                         ids=["cuda", "mps", "cpu-float32", "cpu-float64"])
def test_autocast_is_disabled_with_a_warning_where_pytorch_disables_it(args, capsys):
    torch = pytest.importorskip("torch")
    dtype = args.get("dtype")
    with pytest.warns(UserWarning, match="Disabling autocast"):
        ours = ta.autocast(args["device_type"], dtype=dtype and getattr(ta, dtype))
    if args["device_type"] != "mps":  # PyTorch enables an MPS autocast it cannot use
        with pytest.warns(UserWarning, match="Disabling autocast"):
            torch.autocast(args["device_type"], dtype=dtype and getattr(torch, dtype))
    with ours:
        pass
    assert ours.enabled is False and capsys.readouterr().err == ""
    with pytest.raises(RuntimeError, match="unknown device type 'gpu'"):
        ta.autocast("gpu")


def test_cuda_amp_autocast_is_deprecated_and_disabled():
    with pytest.warns(FutureWarning, match="torch.amp.autocast\\('cuda'"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            context = ta.cuda.amp.autocast()
    assert context.enabled is False


# ---- GradScaler -------------------------------------------------------------------------------
def test_an_enabled_cuda_scaler_disables_itself_as_pytorchs_and_passes_through():
    torch = pytest.importorskip("torch")
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available"):
        ours = ta.amp.GradScaler("cuda", enabled=True)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        theirs = torch.amp.GradScaler("cuda", enabled=True)
    with pytest.warns(FutureWarning):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            deprecated = ta.cuda.amp.GradScaler(enabled=True)
    for scaler, lib in ((ours, ta), (theirs, torch), (deprecated, ta)):
        assert scaler.is_enabled() is False and scaler.get_scale() == 1.0
        assert scaler.state_dict() == {}
        scaler.load_state_dict({"scale": 8.0})  # ignored when disabled
        w = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
        optimizer = lib.optim.SGD([w], lr=0.5)
        loss = (w * w).sum()
        assert scaler.scale(loss) is loss
        loss.backward()
        scaler.unscale_(optimizer)
        assert scaler.step(optimizer) is None
        scaler.update()
        assert w.tolist() == [0.0, 0.0]  # one plain SGD step: w - 0.5 * 2w


def test_a_cpu_scaler_scales_skips_and_adapts_as_pytorchs():
    torch = pytest.importorskip("torch")
    histories = []
    for lib in (ta, torch):
        scaler = lib.amp.GradScaler("cpu", growth_interval=2)
        w = lib.nn.Parameter(lib.tensor([1.0, 2.0]))
        optimizer = lib.optim.SGD([w], lr=0.1)
        history = []
        for step in range(5):
            loss = (w * w).sum()
            if step == 1:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            if step % 2:
                scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            history.append((scaler.get_scale(), [round(v, 6) for v in w.tolist()],
                            scaler.state_dict()))
        histories.append(history)
    assert histories[0] == histories[1]


def test_a_cpu_scaler_refuses_misuse_as_pytorchs():
    scaler = ta.amp.GradScaler("cpu")
    w = nn.Parameter(ta.tensor([1.0]))
    optimizer = ta.optim.SGD([w], lr=0.1)
    scaler.scale((w * w).sum()).backward()
    scaler.unscale_(optimizer)
    with pytest.raises(RuntimeError, match="already called"):
        scaler.unscale_(optimizer)
    with pytest.raises(RuntimeError, match="closure"):
        scaler.step(optimizer, closure=lambda: 0)
    with pytest.raises(RuntimeError, match="state dict is empty"):
        scaler.load_state_dict({})
    with pytest.raises(ValueError, match="growth_factor must be > 1.0"):
        ta.amp.GradScaler("cpu", growth_factor=0.5)


# ---- compile, cuda, optimizers, modules -----------------------------------------------------
def test_compile_returns_the_model_and_says_so_once(capsys):
    notices.forget()
    model = nn.Linear(2, 2)
    assert ta.compile(model) is model and ta.compile(model, mode="max-autotune") is model
    decorated = ta.compile(fullgraph=True)(lambda x: x + 1)
    assert decorated(1) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tinyattn: torch.compile(Linear) runs it eagerly: tinyattn has no graph "
                   "compiler (its ops already run on numba kernels)"]
    with pytest.raises(RuntimeError, match="unknown mode 'fastest'"):
        ta.compile(model, mode="fastest")
    with pytest.raises(TypeError, match="fullgraph must be a bool"):
        ta.compile(model, fullgraph="yes")
    assert ta.compiler.is_compiling() is False


def test_cuda_answers_as_pytorch_without_cuda():
    torch = pytest.importorskip("torch")
    for name in ("is_available", "device_count", "is_bf16_supported", "is_initialized",
                 "memory_allocated", "max_memory_allocated"):
        assert getattr(ta.cuda, name)() == getattr(torch.cuda, name)(), name
    assert ta.cuda.manual_seed(1) is None and ta.cuda.manual_seed_all(1) is None
    assert ta.cuda.empty_cache() is None
    for name in ("synchronize", "current_device", "get_device_name"):
        with pytest.raises(RuntimeError, match=f"torch.cuda.{name}\\(\\) needs a CUDA device"):
            getattr(ta.cuda, name)()


def test_adamw_has_pytorchs_signature():
    torch = pytest.importorskip("torch")
    for name in ("AdamW", "Adam"):
        ours = inspect.signature(getattr(ta.optim, name)).parameters
        theirs = inspect.signature(getattr(torch.optim, name)).parameters
        assert [(n, p.kind, p.default) for n, p in ours.items()] == \
            [(n, p.kind, p.default) for n, p in theirs.items()], name


def test_adamw_options_run_or_are_refused_as_on_pytorchs_cpu():
    def trained(**options):
        ta.manual_seed(0)
        w = nn.Parameter(ta.randn(4))
        optimizer = ta.optim.AdamW([w], lr=0.1, **options)
        for _ in range(3):
            optimizer.zero_grad()
            (w * w).sum().backward()
            optimizer.step()
        return w.tolist()

    assert trained(fused=True) == trained() == trained(foreach=True)
    with pytest.raises(RuntimeError, match="fused and foreach cannot both be True"):
        trained(fused=True, foreach=True)
    with pytest.raises(ValueError, match="capturable=True is for CUDA graphs"):
        trained(capturable=True)
    with pytest.raises(ValueError, match="differentiable=True is not supported"):
        trained(differentiable=True)


def test_modules_move_to_the_cpu_and_convert():
    model = nn.Sequential(nn.Linear(2, 3), nn.LayerNorm(3))
    assert model.to("cpu") is model and model.to(ta.device("cpu")) is model
    model.to(device="cpu", dtype=ta.float64)
    assert {p.dtype for p in model.parameters()} == {np.dtype(np.float64)}
    assert ta.device("cpu") == "cpu" and str(ta.device("cpu")) == "cpu"


@pytest.mark.parametrize("start, end", [(1, -1), (0, -1), (0, 1), (1, 2), (-2, -1), (2, 2)])
def test_flatten_has_pytorchs_shapes(start, end):
    torch = pytest.importorskip("torch")
    ours = nn.Flatten(start, end)
    theirs = torch.nn.Flatten(start, end)
    assert repr(ours) == repr(theirs)
    assert ours(ta.ones(2, 3, 4)).shape == tuple(theirs(torch.ones(2, 3, 4)).shape)


def test_unflatten_has_pytorchs_shapes_and_gradient():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Unflatten(1, (3, -1)), torch.nn.Unflatten(1, (3, -1))
    assert repr(nn.Unflatten(1, (3, 4))) == repr(torch.nn.Unflatten(1, (3, 4)))
    x = ta.ones(2, 12, requires_grad=True)
    y = ours(x)
    assert y.shape == tuple(theirs(torch.ones(2, 12)).shape) == (2, 3, 4)
    (y * 2).sum().backward()
    assert x.grad.tolist() == [[2.0] * 12] * 2
    default = nn.Flatten()(ta.ones(5, 2, 2))
    assert default.shape == (5, 4)


# ---- missing names say where --------------------------------------------------------------
def test_a_missing_name_names_the_line_of_the_file_that_asked():
    line = sys._getframe().f_lineno + 2
    with pytest.raises(AttributeError) as raised:
        ta.einsum  # noqa: B018
    assert str(raised.value).startswith(f"tinyattn has no torch.einsum "
                                        f"(test_cpu_standins.py:{line}): ")
    with pytest.raises(ImportError, match=r"tinyattn has no torch.nn.Conv1d "
                                          r"\(test_cpu_standins.py:\d+\)"):
        from tinyattn.nn import Conv1d  # noqa: F401
    for module, name in ((ta.nn, "Conv1d"), (F, "unfold"), (ta.optim, "LBFGS"),
                         (ta.cuda, "set_device"), (ta.distributed, "all_reduce"),
                         (ta.backends, "mkldnn")):
        with pytest.raises(AttributeError, match=r"\(test_cpu_standins.py:\d+\)"):
            getattr(module, name)
    with pytest.raises(AttributeError) as raised:
        eval("torch.einsum", {"torch": ta})  # code that is not in a file: no location
    assert str(raised.value).startswith("tinyattn has no torch.einsum: ")
    assert hasattr(ta.nn.functional, "scaled_dot_product_attention") and \
        not hasattr(ta, "einsum")


def test_the_warnings_of_the_stand_ins_point_at_the_callers_line():
    with pytest.warns(UserWarning) as records:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            line = sys._getframe().f_lineno + 1
            ta.cuda.amp.GradScaler(enabled=True)
    assert records[0].filename == __file__ and records[0].lineno == line


def test_randperm_draws_from_a_given_generator():
    first = ta.randperm(6, generator=ta.Generator().manual_seed(3407))
    again = ta.randperm(6, generator=ta.Generator().manual_seed(3407))
    assert first.tolist() == again.tolist() and sorted(first.tolist()) == list(range(6))
    with pytest.raises(TypeError, match="generator"):
        ta.randperm(6, generator=np.random.default_rng(0))
