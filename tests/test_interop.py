"""Whole models to and from PyTorch, GPT-2-layout state dicts, and a Hessian-vector product:
tinyattn against torch in float64."""

import io
import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import gpt2, interop
from tinyattn.models import TransformerLMConfig
from tinyattn.train import TrainConfig, load_run, train_task

torch = pytest.importorskip("torch")

BASE = dict(vocab_size=13, context_length=8, embed_dim=16, num_heads=4, num_layers=2)
VARIANTS = {
    "default": {},
    "gpt2": {"tie_weights": True, "gelu_approximate": "tanh"},
    "no-bias": {"bias": False},
    "rope-gqa": {"positional": "rope", "num_kv_heads": 2},
    "alibi-3-heads": {"positional": "alibi", "embed_dim": 12, "num_heads": 3},
    "none-window": {"positional": "none", "window_size": 3},
    "learned-window-mqa": {"window_size": 4, "num_kv_heads": 1},
    "rmsnorm-swiglu": {"norm": "rmsnorm", "mlp": "swiglu"},
    "llama": {"positional": "rope", "norm": "rmsnorm", "mlp": "swiglu", "bias": False,
              "num_kv_heads": 2, "window_size": 5},
}


def _model(impl="composed", **fields):
    ta.manual_seed(0)
    model = ta.TransformerLM(TransformerLMConfig(**{**BASE, "impl": impl, **fields})).double()
    rng = np.random.default_rng(1)
    for param in model.parameters():  # random norms and biases too, not just ones and zeros
        param.data = param.numpy() + 0.1 * rng.normal(size=param.shape)
    return model.eval()


def _batch(seed=0, T=8):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 13, (3, T)), rng.integers(0, 13, (3, T))


def _assert_same_model(ours, theirs, idx, targets, atol=1e-12):
    logits, loss = ours(ta.tensor(idx), targets=ta.tensor(targets))
    t_logits, t_loss = theirs(torch.tensor(idx), torch.tensor(targets))
    np.testing.assert_allclose(logits.numpy(), t_logits.detach().numpy(), rtol=1e-10, atol=atol)
    assert loss.item() == pytest.approx(t_loss.item(), rel=1e-12)
    ours.zero_grad()
    theirs.zero_grad()
    loss.backward()
    t_loss.backward()
    torch_params = dict(theirs.named_parameters())
    for name, param in ours.named_parameters():
        np.testing.assert_allclose(param.grad.numpy(), torch_params[name].grad.numpy(),
                                   rtol=1e-9, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("impl", ["composed", "fused"])
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_to_torch_gives_identical_logits_loss_and_gradients(name, impl):
    model = _model(impl, **VARIANTS[name])
    module = ta.interop.to_torch(model)
    assert isinstance(module, torch.nn.Module)
    assert next(module.parameters()).dtype == torch.float64
    _assert_same_model(model, module, *_batch())


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_from_torch_round_trip_keeps_config_and_weights(name):
    model = _model(**VARIANTS[name])
    module = ta.interop.to_torch(model)
    with torch.no_grad():  # the torch side trains on: the way back must carry its weights
        for param in module.parameters():
            param.mul_(1.5)
    back = ta.interop.from_torch(module)
    assert back.config == model.config
    for name_, tensor in module.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[name_].numpy(), tensor.numpy())
    _assert_same_model(back, module, *_batch(1))


def test_relative_position_models_agree_past_the_context_length():
    for fields in (VARIANTS["alibi-3-heads"], VARIANTS["none-window"]):
        model = _model(**fields)
        idx, targets = _batch(2, T=14)
        _assert_same_model(model, ta.interop.to_torch(model), idx, targets)


def test_checkpoint_converts_both_ways(tmp_path):
    train_task("reverse", tmp_path / "run", TrainConfig(steps=2), length=3, eval_size=8,
               progress=False, stream=io.StringIO())
    model, _ = load_run(tmp_path / "run" / "model.npz")
    torch.save(interop.torch_checkpoint(model), tmp_path / "model.pt")
    checkpoint = torch.load(tmp_path / "model.pt", weights_only=True)
    assert set(checkpoint["state_dict"]) == set(model.state_dict())
    back = interop.from_torch_checkpoint(checkpoint)
    back.save(tmp_path / "run" / "model.npz")
    again, _ = load_run(tmp_path / "run" / "model.npz")
    for name, tensor in model.state_dict().items():
        np.testing.assert_array_equal(again.state_dict()[name].numpy(), tensor.numpy())


def test_from_torch_refuses_a_module_without_a_config():
    with pytest.raises(TypeError, match="a config attribute holding a TransformerLMConfig"):
        ta.interop.from_torch(torch.nn.Linear(2, 2))


def test_from_torch_state_dict_refuses_an_untied_head_for_a_tied_config():
    model = _model(**VARIANTS["gpt2"])
    state = ta.interop.to_torch(model).state_dict()
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    with pytest.raises(ValueError, match="lm_head.weight is missing or differs"):
        interop.from_torch_state_dict(state, model.config)


# ---- GPT-2 layout -------------------------------------------------------------------------
def random_gpt2_state_dict(V=17, P=10, C=12, L=2, seed=0):
    rng = np.random.default_rng(seed)
    sd = {"wte.weight": rng.normal(0, 0.3, (V, C)), "wpe.weight": rng.normal(0, 0.1, (P, C)),
          "ln_f.weight": 1 + 0.1 * rng.normal(size=C), "ln_f.bias": 0.1 * rng.normal(size=C)}
    for n in range(L):
        for norm in ("ln_1", "ln_2"):
            sd[f"h.{n}.{norm}.weight"] = 1 + 0.1 * rng.normal(size=C)
            sd[f"h.{n}.{norm}.bias"] = 0.1 * rng.normal(size=C)
        for name, shape in (("attn.c_attn", (C, 3 * C)), ("attn.c_proj", (C, C)),
                            ("mlp.c_fc", (C, 4 * C)), ("mlp.c_proj", (4 * C, C))):
            sd[f"h.{n}.{name}.weight"] = rng.normal(0, 0.2, shape)  # Conv1D: (in, out)
            sd[f"h.{n}.{name}.bias"] = 0.1 * rng.normal(size=shape[1])
    return sd


def numpy_gpt2_logits(sd, idx, num_heads):
    """GPT-2's forward as its layout states it: x W + b, packed q/k/v, tanh GELU, tied head."""
    def layer_norm(x, w, b):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w + b

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    B, T = idx.shape
    C = sd["wte.weight"].shape[1]
    D = C // num_heads
    x = sd["wte.weight"][idx] + sd["wpe.weight"][:T]
    layers = len({k.split(".")[1] for k in sd if k.startswith("h.")})
    for n in range(layers):
        p = {name.removeprefix(f"h.{n}."): value for name, value in sd.items()
             if name.startswith(f"h.{n}.")}.__getitem__
        h = layer_norm(x, p("ln_1.weight"), p("ln_1.bias"))
        qkv = h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, num_heads, D).transpose(0, 2, 1, 3)
                   for i in range(3))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D)
        scores = np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        y = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = layer_norm(x, p("ln_2.weight"), p("ln_2.bias"))
        h = gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"))
        x = x + h @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = layer_norm(x, sd["ln_f.weight"], sd["ln_f.bias"])
    return x @ sd["wte.weight"].T


def test_gpt2_state_dict_of_numpy_arrays_loads_and_matches_a_numpy_gpt2():
    sd = random_gpt2_state_dict()
    model = gpt2.from_gpt2(sd, num_heads=3)
    config = model.config
    assert (config.vocab_size, config.context_length, config.embed_dim, config.num_layers,
            config.mlp_ratio, config.tie_weights, config.gelu_approximate) == (
        17, 10, 12, 2, 4, True, "tanh")
    idx = np.random.default_rng(3).integers(0, 17, (2, 10))
    np.testing.assert_allclose(model(ta.tensor(idx)).numpy(), numpy_gpt2_logits(sd, idx, 3),
                               rtol=1e-10, atol=1e-12)


def test_gpt2_state_dict_of_torch_tensors_with_prefix_and_mask_buffers_loads():
    sd = random_gpt2_state_dict(seed=4)
    layout = {f"transformer.{k}": torch.tensor(v) for k, v in sd.items()}
    for n in range(2):
        layout[f"transformer.h.{n}.attn.bias"] = torch.tril(torch.ones(1, 1, 10, 10))
        layout[f"transformer.h.{n}.attn.masked_bias"] = torch.tensor(-1e4)
    layout["lm_head.weight"] = torch.tensor(sd["wte.weight"])
    model = ta.TransformerLM(gpt2.gpt2_config(layout, num_heads=4)).double()
    gpt2.load_gpt2_state_dict(model, layout)
    idx = np.random.default_rng(5).integers(0, 17, (3, 7))
    np.testing.assert_allclose(model(ta.tensor(idx)).numpy(), numpy_gpt2_logits(sd, idx, 4),
                               rtol=1e-10, atol=1e-12)
    _assert_same_model(model, ta.interop.to_torch(model), idx, idx)


@pytest.mark.parametrize("change, error, message", [
    (lambda sd: sd.pop("wpe.weight"), KeyError, "no 'wpe.weight'"),
    (lambda sd: sd.update({"lm_head.weight": sd["wte.weight"] + 1}), ValueError,
     "lm_head.weight differs from wte.weight"),
    (lambda sd: sd.update({"h.0.attn.extra": np.zeros(3)}), KeyError,
     r"unexpected keys \['h.0.attn.extra'\]"),
])
def test_bad_gpt2_state_dicts_raise_clear_errors(change, error, message):
    sd = random_gpt2_state_dict()
    change(sd)
    with pytest.raises(error, match=message):
        gpt2.from_gpt2(sd, num_heads=3)


def test_gpt2_loader_refuses_a_model_that_is_not_gpt2_shaped():
    model = ta.TransformerLM(TransformerLMConfig(17, 10, 12, 3, 2, positional="rope"))
    with pytest.raises(ValueError, match="the model must be GPT-2-shaped"):
        gpt2.load_gpt2_state_dict(model, random_gpt2_state_dict())


# ---- second order -------------------------------------------------------------------------
@pytest.mark.parametrize("impl", ["composed", "fused"])
@pytest.mark.parametrize("name", ["default", "llama"])
def test_one_block_hessian_vector_product_matches_torch(name, impl):
    """H v by double backward: grad of <∇L, v> with respect to the parameters."""
    model = _model(impl, **{**VARIANTS[name], "num_layers": 1})
    module = ta.interop.to_torch(model)
    idx, targets = _batch(6)
    rng = np.random.default_rng(7)
    params = [p for _, p in model.named_parameters()]
    t_params = [dict(module.named_parameters())[n] for n, _ in model.named_parameters()]
    direction = [rng.normal(size=p.shape) for p in params]

    _, loss = model(ta.tensor(idx), targets=ta.tensor(targets))
    grads = ta.autograd.grad(loss, params, create_graph=True)
    inner = sum((g * ta.tensor(v)).sum() for g, v in zip(grads, direction))
    hvp = ta.autograd.grad(inner, params)

    math_backend = torch.nn.attention.SDPBackend.MATH  # the one torch differentiates twice
    with torch.nn.attention.sdpa_kernel(math_backend):
        _, t_loss = module(torch.tensor(idx), torch.tensor(targets))
    t_grads = torch.autograd.grad(t_loss, t_params, create_graph=True)
    t_inner = sum((g * torch.tensor(v)).sum() for g, v in zip(t_grads, direction))
    t_hvp = torch.autograd.grad(t_inner, t_params)

    ours = np.concatenate([h.numpy().ravel() for h in hvp])
    theirs = np.concatenate([h.numpy().ravel() for h in t_hvp])
    assert np.linalg.norm(theirs) > 1e-3
    assert np.linalg.norm(ours - theirs) <= 1e-8 * np.linalg.norm(theirs)
