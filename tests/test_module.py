"""Module infrastructure: registries of parameters, buffers and submodules, traversal, hooks,
modes, dtype conversion, state dicts that share memory, checkpoints, and bad names."""

import copy
import os
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.nn.module import InvalidNameError


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 4)
        self.norm = nn.LayerNorm(4)
        self.scale = nn.Parameter(np.ones(4, np.float32))

    def forward(self, x):
        return self.norm(self.proj(x)) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(5, 3)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Sequential(nn.Linear(4, 2))})
        self.drop = nn.Dropout(0.5)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)[..., :3]
        return x


# A module's own parameters come before its children's, as in PyTorch (checked against it in
# test_parity_module.py).
EXPECTED_NAMES = [
    "embed.weight",
    "blocks.0.scale", "blocks.0.proj.weight", "blocks.0.proj.bias", "blocks.0.norm.weight",
    "blocks.0.norm.bias",
    "blocks.1.scale", "blocks.1.proj.weight", "blocks.1.proj.bias", "blocks.1.norm.weight",
    "blocks.1.norm.bias",
    "heads.a.weight", "heads.a.bias", "heads.b.0.weight", "heads.b.0.bias",
]


class Masked(nn.Module):
    """A layer with a persistent float mask, a non-persistent cache and an integer counter."""

    def __init__(self, n=4):
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.register_buffer("mask", ta.triu(ta.ones(n, n), diagonal=1))
        self.register_buffer("cache", ta.zeros(n), persistent=False)
        self.register_buffer("count", ta.tensor([0]))


# ---- parameters and traversal ------------------------------------------------------------------
def test_named_parameters_use_dotted_names_through_containers():
    names = [name for name, _ in Net().named_parameters()]
    assert names == EXPECTED_NAMES
    assert list(Net().state_dict()) == names


def test_a_shared_parameter_is_listed_once_but_saved_under_each_name():
    net = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    net[1].weight = net[0].weight
    assert len(list(net.parameters())) == 3
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias", "1.bias"]
    assert [n for n, _ in net.named_parameters(remove_duplicate=False)] == [
        "0.weight", "0.bias", "1.weight", "1.bias"]
    state = net.state_dict()
    assert list(state) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert state["1.weight"].numpy() is net[0].weight.numpy()


def test_tied_weights_stay_one_tensor_through_init_loading_and_training():
    class TiedLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(7, 4)
            self.lm_head = nn.Linear(4, 7, bias=False)
            self.wte.weight = self.lm_head.weight  # as in GPT-2 / nanoGPT

        def forward(self, idx):
            return self.lm_head(self.wte(idx))

    model = TiedLM().double()
    assert model.wte.weight is model.lm_head.weight
    assert [n for n, _ in model.named_parameters()] == ["wte.weight"]
    assert list(model.state_dict()) == ["wte.weight", "lm_head.weight"]
    model.apply(lambda m: nn.init.normal_(m.weight, std=0.02) if hasattr(m, "weight") else None)
    state = {"wte.weight": np.full((7, 4), 0.5), "lm_head.weight": np.full((7, 4), 0.5)}
    model.load_state_dict(state)
    assert model.wte.weight is model.lm_head.weight and (model.wte.weight.numpy() == 0.5).all()
    opt = ta.optim.AdamW(model.parameters(), lr=0.1)
    loss = model(ta.tensor([[1, 2]])).sum()
    loss.backward()
    opt.step()
    assert model.wte.weight is model.lm_head.weight
    assert (model.wte.weight.numpy() != 0.5).any()


def test_a_submodule_used_twice_is_visited_once_unless_duplicates_are_asked_for():
    shared = nn.Linear(2, 2)
    net = nn.Sequential(shared, shared)
    assert len(list(net.modules())) == 2
    assert len(list(net.parameters())) == 2
    assert [n for n, _ in net.named_modules(remove_duplicate=False)] == ["", "0", "1"]
    assert [n for n, _ in net.named_modules(prefix="net")] == ["net", "net.0"]
    assert list(net.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_named_modules_is_depth_first_parent_before_children():
    names = [name for name, _ in Net().named_modules()]
    assert names == ["", "embed", "blocks", "blocks.0", "blocks.0.proj", "blocks.0.norm",
                     "blocks.1", "blocks.1.proj", "blocks.1.norm", "heads", "heads.a",
                     "heads.b", "heads.b.0", "drop"]
    net = Net()
    assert [n for n, _ in net.named_children()] == ["embed", "blocks", "heads", "drop"]
    assert list(net.children()) == [net.embed, net.blocks, net.heads, net.drop]


def test_apply_visits_children_first_then_the_module_itself():
    net = Net()
    seen = []
    assert net.apply(lambda m: seen.append(m)) is net
    names = {id(module): name for name, module in net.named_modules()}
    assert [names[id(m)] for m in seen] == [
        "embed", "blocks.0.proj", "blocks.0.norm", "blocks.0", "blocks.1.proj", "blocks.1.norm",
        "blocks.1", "blocks", "heads.a", "heads.b.0", "heads.b", "heads", "drop", ""]


def test_train_and_eval_reach_every_submodule():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="training mode is expected to be boolean, got 0"):
        net.train(0)


def test_zero_grad_clears_or_zeroes_every_gradient_in_place():
    net = Block()
    net(ta.ones(2, 3)).backward(ta.ones(2, 4))
    assert all(p.grad is not None for p in net.parameters())
    array = net.scale.grad.numpy()
    net.zero_grad(set_to_none=False)
    assert net.scale.grad.numpy() is array
    assert all(p.grad is not None and not p.grad.numpy().any() for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_requires_grad_freezes_and_unfreezes_every_parameter():
    net = Block()
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())
    out = net(ta.ones(2, 3))
    assert not out.requires_grad
    net.requires_grad_()
    assert all(p.requires_grad for p in net.parameters())


def test_deepcopy_gives_an_independent_module_with_its_ties_kept():
    net = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5, bias=False))
    net[0].weight = net[1].weight
    net.register_buffer("mask", ta.ones(2))
    twin = copy.deepcopy(net)
    assert twin[0].weight is twin[1].weight and twin[0].weight is not net[0].weight
    np.testing.assert_array_equal(twin[1].weight.numpy(), net[1].weight.numpy())
    assert list(twin.state_dict()) == list(net.state_dict())
    twin[1].weight.numpy()[...] = 0.0
    assert net[1].weight.numpy().any()


def test_parameter_shares_memory_with_its_tensor():
    base = ta.zeros(3)
    param = nn.Parameter(base)
    assert param.numpy() is base.numpy() and param.requires_grad and param.is_leaf
    assert nn.Parameter().shape == (0,)


# ---- attributes and registration -------------------------------------------------------------
def test_register_parameter_none_and_assignments_follow_torch():
    layer = nn.Linear(3, 2)
    layer.bias = None
    assert layer.bias is None and list(layer.state_dict()) == ["weight"]
    assert "bias" in layer._parameters
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'weight' "
                                        r"\(Parameter or None expected"):
        layer.weight = ta.zeros(2, 3)
    layer.bias = nn.Parameter(ta.ones(2))
    assert [n for n, _ in layer.named_parameters()] == ["weight", "bias"]
    nn.Linear(3, 2, bias=False).register_parameter("bias", nn.Parameter(ta.zeros(2)))


def test_replacing_an_entry_with_another_kind_forgets_the_old_one():
    net = nn.Module()
    net.part = nn.Linear(2, 2)
    net.part = nn.Parameter(ta.zeros(2))
    assert list(net._modules) == [] and [n for n, _ in net.named_parameters()] == ["part"]
    with pytest.raises(TypeError, match="cannot assign 'ReLU' as parameter 'part'"):
        net.part = nn.ReLU()  # as in PyTorch: delete the parameter first
    del net.part
    net.part = nn.ReLU()
    assert list(net._parameters) == [] and isinstance(net.part, nn.ReLU)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'part'"):
        net.part = 3
    net.part = None
    assert net.part is None and list(net.children()) == []


def test_getattr_and_delattr_errors_and_deletion():
    layer = nn.Linear(2, 2)
    with pytest.raises(AttributeError, match="^'Linear' object has no attribute 'wieght'$"):
        layer.wieght  # noqa: B018
    del layer.bias
    assert [n for n, _ in layer.named_parameters()] == ["weight"]
    with pytest.raises(AttributeError, match="bias"):
        layer.bias  # noqa: B018
    with pytest.raises(AttributeError, match="nothing"):
        del layer.nothing
    assert "weight" in dir(layer)


def test_buffers_are_state_but_not_parameters():
    layer = Masked()
    assert [n for n, _ in layer.named_parameters()] == ["proj.weight", "proj.bias"]
    assert [n for n, _ in layer.named_buffers()] == ["mask", "cache", "count"]
    assert len(list(layer.buffers())) == 3
    assert list(layer.state_dict()) == ["mask", "count", "proj.weight", "proj.bias"]
    assert layer.mask.numpy().tolist()[0] == [0.0, 1.0, 1.0, 1.0]
    net = nn.Sequential(layer)
    assert [n for n, _ in net.named_buffers()] == ["0.mask", "0.cache", "0.count"]
    assert [n for n, _ in net.named_buffers(recurse=False)] == []


def test_assigning_a_tensor_to_a_buffer_replaces_it_and_keeps_its_persistence():
    layer = Masked()
    layer.cache = ta.ones(4)
    layer.mask = ta.zeros(4, 4)
    assert layer._buffers["cache"].numpy().tolist() == [1.0] * 4
    assert not layer.mask.numpy().any()
    assert list(layer.state_dict()) == ["mask", "count", "proj.weight", "proj.bias"]
    layer.mask = None
    assert layer.mask is None and list(layer.state_dict()) == ["count", "proj.weight",
                                                               "proj.bias"]
    with pytest.raises(TypeError, match="cannot assign 'ndarray' as buffer 'cache'"):
        layer.cache = np.zeros(4)
    layer.register_buffer("cache", ta.zeros(4))  # re-registering changes persistence
    assert "cache" in layer.state_dict()


def test_to_dtype_converts_float_parameters_grads_and_buffers_only():
    layer = Masked()
    layer.proj(ta.ones(1, 4)).backward(ta.ones(1, 4))
    weight = layer.proj.weight
    assert layer.to(ta.float64) is layer
    assert layer.proj.weight is weight  # converted in place: the same Parameter object
    assert weight.dtype == np.float64 and weight.grad.dtype == np.float64
    assert layer.mask.dtype == np.float64 and layer.cache.dtype == np.float64
    assert layer.count.dtype == np.int64
    layer.float()
    assert layer.mask.dtype == np.float32 and layer.proj.bias.dtype == np.float32
    for call in (lambda: layer.to("cpu", ta.float64), lambda: layer.to(device="cpu",
                                                                       dtype="float64"),
                 lambda: layer.to(ta.zeros(1, dtype=ta.float64)), lambda: layer.double()):
        layer.float()
        call()
        assert layer.proj.weight.dtype == np.float64
    assert layer.to("cpu") is layer and layer.cpu() is layer


@pytest.mark.parametrize("call, error, pattern", [
    (lambda m: m.to("cuda"), ValueError, r"Module.to: tinyattn runs on the CPU only; device "
                                         r"'cuda' is not available"),
    (lambda m: m.to("mps:0", ta.float64), ValueError, r"CPU only; device 'mps:0'"),
    (lambda m: m.to(device="cuda:1"), ValueError, r"CPU only"),
    (lambda m: m.cuda(), ValueError, r"Module.cuda: tinyattn runs on the CPU only"),
    (lambda m: m.to(np.int64), TypeError, r"Module.to: expected a float dtype, got int64"),
    (lambda m: m.to(np.float16), TypeError, r"float32 and float64 only, got float16"),
    (lambda m: m.half(), TypeError, r"Module.half: tinyattn computes in float32 and float64"),
    (lambda m: m.to(ta.float64, memory_format=None), TypeError, r"unexpected keyword"),
])
def test_unsupported_devices_and_dtypes_are_clear_errors(call, error, pattern):
    layer = Masked()
    with pytest.raises(error, match=pattern):
        call(layer)
    assert layer.proj.weight.dtype == np.float32


def test_linear_and_embedding_take_device_and_dtype():
    assert nn.Linear(2, 3, dtype=ta.float64, device="cpu").weight.dtype == np.float64
    assert nn.Embedding(4, 2, dtype="float64").weight.dtype == np.float64
    with pytest.raises(ValueError, match="Linear: tinyattn runs on the CPU only"):
        nn.Linear(2, 3, device="cuda")


@pytest.mark.parametrize("call, error, pattern", [
    (lambda m: m.register_buffer("a.b", ta.zeros(1)), InvalidNameError,
     r"register_buffer: buffer name can't contain '.', got 'a.b'"),
    (lambda m: m.register_buffer("", ta.zeros(1)), InvalidNameError, r"can't be empty"),
    (lambda m: m.register_buffer(3, ta.zeros(1)), TypeError, r"buffer name should be a string"),
    (lambda m: m.register_buffer("mask", np.zeros(2)), TypeError,
     r"Masked.register_buffer: cannot assign 'ndarray' object to buffer 'mask' \(Tensor or "
     r"None required\) \(wrap it with ta.tensor\)"),
    (lambda m: m.register_buffer("mask", [0.0]), TypeError, r"cannot assign 'list' object"),
    (lambda m: m.register_buffer("proj", ta.zeros(1)), InvalidNameError,
     r"register_buffer: 'proj' is already a submodule of Masked"),
    (lambda m: m.proj.register_buffer("weight", ta.zeros(1)), InvalidNameError,
     r"Linear.register_buffer: 'weight' is already a parameter of Linear"),
    (lambda m: m.register_buffer("forward", ta.zeros(1)), InvalidNameError,
     r"attribute 'forward' already exists"),
    (lambda m: m.register_parameter("mask", nn.Parameter(ta.zeros(1))), InvalidNameError,
     r"register_parameter: 'mask' is already a buffer of Masked"),
    (lambda m: m.register_parameter("w", ta.zeros(1)), TypeError,
     r"cannot assign 'Tensor' object to parameter 'w' \(Parameter or None required\)"),
    (lambda m: m.register_parameter("x.y", None), InvalidNameError, r"can't contain '.'"),
    (lambda m: m.add_module("x.y", nn.ReLU()), InvalidNameError, r"can't contain '.'"),
    (lambda m: m.add_module("relu", "ReLU"), TypeError, r"str is not a Module subclass"),
])
def test_bad_registrations_are_clear_errors(call, error, pattern):
    layer = Masked()
    with pytest.raises(error, match=pattern):
        call(layer)


def test_bad_names_are_key_errors_as_in_torch_and_value_errors_as_in_tinyattn():
    with pytest.raises(KeyError):
        Masked().register_buffer("a.b", ta.zeros(1))
    with pytest.raises(ValueError):
        Masked().register_buffer("a.b", ta.zeros(1))


def test_registering_before_super_init_is_an_attribute_error():
    class Early(nn.Module):
        def __init__(self):
            self.weight = nn.Parameter(ta.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


# ---- calling and hooks --------------------------------------------------------------------------
def test_forward_pre_hook_can_replace_the_inputs_and_a_handle_removes_it():
    layer = nn.Identity()
    calls = []
    handle = layer.register_forward_pre_hook(lambda m, args: calls.append(args) or (args[0] + 1,))
    assert layer(ta.zeros(2)).tolist() == [1.0, 1.0]
    assert len(calls) == 1 and calls[0][0].tolist() == [0.0, 0.0]
    handle.remove()
    handle.remove()  # a second remove does nothing
    assert layer(ta.zeros(2)).tolist() == [0.0, 0.0] and len(calls) == 1


def test_forward_hook_sees_inputs_and_output_and_can_replace_the_output():
    layer = nn.Linear(3, 2)
    seen = []
    layer.register_forward_hook(lambda m, args, out: seen.append((m, args[0].shape, out.shape)))
    layer.register_forward_hook(lambda m, args, out: out * 0)
    out = layer(ta.ones(4, 3))
    assert seen == [(layer, (4, 3), (4, 2))]
    assert not out.numpy().any()


def test_hooks_with_kwargs_prepend_and_context_manager():
    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    layer = Scale()
    order = []
    layer.register_forward_hook(lambda m, a, o: order.append("second"))
    layer.register_forward_hook(lambda m, a, o: order.append("first"), prepend=True)

    def double_factor(module, args, kwargs):
        return args, {**kwargs, "factor": kwargs["factor"] * 2}

    with layer.register_forward_pre_hook(double_factor, with_kwargs=True):
        assert layer(ta.ones(1), factor=3.0).tolist() == [6.0]
    assert layer(ta.ones(1), factor=3.0).tolist() == [3.0]
    assert order == ["first", "second"] * 2
    layer.register_forward_hook(lambda m, a, kw, o: o + kw["factor"], with_kwargs=True)
    assert layer(ta.ones(1), factor=2.0).tolist() == [4.0]
    bad = Scale()
    bad.register_forward_pre_hook(lambda m, a, kw: a, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"must return None or a tuple \(new_args, "
                                           r"new_kwargs\)"):
        bad(ta.ones(1), factor=2.0)
    with pytest.raises(TypeError, match="a hook must be callable"):
        bad.register_forward_hook("not a function")


def test_a_module_without_forward_says_so():
    with pytest.raises(NotImplementedError, match=r'Module \[Module\] is missing the required '
                                                  r'"forward" function'):
        nn.Module()(ta.ones(1))


# ---- state dicts --------------------------------------------------------------------------------
def test_state_dict_values_are_detached_views_of_the_parameters():
    net = Net()
    state = net.state_dict()
    assert isinstance(state, OrderedDict)
    for name, param in net.named_parameters():
        assert state[name].numpy() is param.numpy()
        assert not state[name].requires_grad and state[name].is_leaf
    state["embed.weight"].numpy()[0, 0] = 123.0  # writes through, as in PyTorch
    assert net.embed.weight.numpy()[0, 0] == 123.0
    assert net.state_dict(keep_vars=True)["embed.weight"] is net.embed.weight
    assert list(net.state_dict(prefix="model."))[0] == "model.embed.weight"
    destination = {"other": 1}
    assert net.state_dict(destination=destination) is destination and len(destination) == 16


def test_load_state_dict_copies_in_place_so_views_see_the_new_values():
    source, target = Net(), Net()
    view = target.state_dict()["blocks.1.scale"]
    array = target.blocks[1].scale.numpy()
    result = target.load_state_dict(source.state_dict())
    assert repr(result) == "<All keys matched successfully>"
    assert target.blocks[1].scale.numpy() is array
    np.testing.assert_array_equal(view.numpy(), source.blocks[1].scale.numpy())
    idx = ta.tensor([[0, 4, 2]])
    np.testing.assert_array_equal(source(idx).numpy(), target(idx).numpy())


def test_load_state_dict_accepts_tensors_arrays_and_lists_and_casts_to_the_model_dtype():
    layer = Masked()
    state = {"proj.weight": np.ones((4, 4)), "proj.bias": [1, 2, 3, 4],
             "mask": ta.zeros(4, 4, dtype=ta.float64), "count": np.array([7.0])}
    layer.load_state_dict(state)
    assert layer.proj.weight.dtype == np.float32 and (layer.proj.weight.numpy() == 1).all()
    assert layer.proj.bias.numpy().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert layer.count.numpy().tolist() == [7] and layer.count.dtype == np.int64
    assert not layer.mask.numpy().any() and layer.mask.dtype == np.float32


def test_load_state_dict_names_missing_unexpected_and_misshaped_keys_and_changes_nothing():
    net = Block()
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    state = dict(Block().state_dict())
    del state["scale"]
    state["extra.weight"] = np.zeros(2)
    state["proj.weight"] = np.zeros((5, 5))
    state["norm.bias"] = np.array(["a", "b", "c", "d"])
    with pytest.raises(ValueError) as info:
        net.load_state_dict(state)
    message = str(info.value)
    assert "missing keys: scale" in message
    assert "unexpected keys: extra.weight" in message
    assert "proj.weight: shape (5, 5) in the state dict, (4, 3) in the model" in message
    assert "norm.bias: expected numbers, got dtype <U1" in message
    assert "nothing was changed" in message
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[name])  # good keys not loaded


def test_load_state_dict_non_strict_reports_keys_and_loads_the_rest():
    net = Block()
    state = {"proj.bias": np.arange(4.0), "unknown": np.zeros(1)}
    result = net.load_state_dict(state, strict=False)
    assert result.unexpected_keys == ["unknown"]
    assert sorted(result.missing_keys) == ["norm.bias", "norm.weight", "proj.weight", "scale"]
    assert "IncompatibleKeys(missing_keys=" in repr(result)
    assert net.proj.bias.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert net.proj.bias.dtype == np.float32
    with pytest.raises(ValueError, match="proj.bias: shape"):
        net.load_state_dict({"proj.bias": np.zeros(3)}, strict=False)


def test_load_state_dict_of_buffers_and_a_missing_buffer():
    layer = Masked()
    state = dict(Masked().state_dict())
    del state["mask"]
    with pytest.raises(ValueError, match="missing keys: mask"):
        layer.load_state_dict(state)
    assert "cache" not in layer.state_dict()


def test_save_and_load_round_trip_through_npz_with_buffers(tmp_path):
    net = nn.Sequential(Net().embed, Masked(3))
    net[1].count = ta.tensor([5])
    path = tmp_path / "ckpt" / "net.npz"
    net.save(path)
    assert os.listdir(tmp_path / "ckpt") == ["net.npz"]  # no temporary file left behind
    loaded = nn.load(path)
    assert list(loaded) == ["0.weight", "1.mask", "1.count", "1.proj.weight", "1.proj.bias"]
    fresh = nn.Sequential(Net().embed, Masked(3))
    fresh.load_state_dict(loaded)
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[name].numpy(), value.numpy())
    assert fresh[1].count.numpy().tolist() == [5]


def test_load_of_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint file"):
        nn.load(tmp_path / "absent.npz")


def test_load_of_a_corrupt_or_truncated_file_is_a_clear_value_error(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"this is not a zip archive at all" * 10)
    with pytest.raises(ValueError, match="not a readable tinyattn checkpoint"):
        nn.load(garbage)
    good = tmp_path / "good.npz"
    Net().save(good)
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ValueError, match="not a readable tinyattn checkpoint"):
        nn.load(truncated)


UNPICKLED = []


def _record_unpickling():
    UNPICKLED.append(True)
    return 0


class Payload:
    def __reduce__(self):
        return (_record_unpickling, ())


def test_load_refuses_object_arrays_and_never_unpickles(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, weight=np.ones(3), payload=np.array([Payload()], dtype=object))
    with pytest.raises(ValueError, match="not a readable tinyattn checkpoint"):
        nn.load(path)
    assert UNPICKLED == []


# ---- containers ---------------------------------------------------------------------------------
def test_sequential_indexing_slicing_and_named_children():
    relu, first, last = nn.ReLU(), nn.Linear(4, 8), nn.Linear(8, 2)
    net = nn.Sequential(OrderedDict(fc=first, act=relu, out=last))
    assert [n for n, _ in net.named_children()] == ["fc", "act", "out"]
    assert net[0] is first and net[-1] is last and len(net) == 3 and list(net) == [first, relu,
                                                                                    last]
    head = net[1:]
    assert isinstance(head, nn.Sequential) and list(head._modules) == ["act", "out"]
    assert head(ta.ones(2, 8)).shape == (2, 2)
    assert net(ta.ones(3, 4)).shape == (3, 2)
    with pytest.raises(IndexError, match="Sequential.__getitem__: index 3 is out of range for 3"):
        net[3]  # noqa: B018
    with pytest.raises(TypeError, match="indices must be integers or slices, got str"):
        net["fc"]  # noqa: B018


def test_sequential_and_module_list_share_append_insert_delete_and_renumber():
    for cls in (nn.Sequential, lambda *m: nn.ModuleList(m)):
        a, b, c, d = (nn.Identity() for _ in range(4))
        seq = cls(a, b)
        assert seq.append(c) is seq
        seq.insert(0, d)
        assert list(seq) == [d, a, b, c] and list(seq._modules) == ["0", "1", "2", "3"]
        seq.insert(-1, nn.ReLU())
        assert isinstance(seq[3], nn.ReLU) and seq[4] is c
        del seq[3]
        assert list(seq) == [d, a, b, c] and list(seq._modules) == ["0", "1", "2", "3"]
        assert seq.pop(0) is d and list(seq._modules) == ["0", "1", "2"]
        del seq[:2]
        assert list(seq) == [c]
        seq[0] = a
        seq.extend([b, c])
        assert list(seq) == [a, b, c]
        seq += [d]
        assert list(seq) == [a, b, c, d] and len(seq + [a]) == 5 and len(seq) == 4
        with pytest.raises(TypeError, match="append: expected a Module, got int"):
            seq.append(3)
        with pytest.raises(IndexError, match="insert: index 9 is out of range"):
            seq.insert(9, a)


def test_module_list_slices_are_renumbered_module_lists():
    layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(4))
    tail = layers[2:]
    assert isinstance(tail, nn.ModuleList) and list(tail._modules) == ["0", "1"]
    assert tail[0] is layers[2]
    assert [n for n, _ in layers.named_parameters()][-1] == "3.bias"
    with pytest.raises(NotImplementedError, match="ModuleList"):
        layers(ta.ones(2))


def test_module_dict_behaves_like_an_ordered_dict_of_registered_modules():
    heads = nn.ModuleDict([("lm", nn.Linear(4, 9)), ("value", nn.Linear(4, 1))])
    assert list(heads) == ["lm", "value"] and list(heads.keys()) == ["lm", "value"]
    assert "lm" in heads and len(heads) == 2
    heads.update({"aux": nn.ReLU()})
    assert [n for n, _ in heads.named_parameters()] == ["lm.weight", "lm.bias", "value.weight",
                                                        "value.bias"]
    assert isinstance(heads.pop("aux"), nn.ReLU) and "aux" not in heads
    del heads["value"]
    assert list(heads) == ["lm"]
    heads.clear()
    assert len(heads) == 0
    with pytest.raises(TypeError, match="ModuleDict: expected a Module for 'x', got int"):
        heads["x"] = 1
    with pytest.raises(TypeError, match=r"element 0 should be a \(key, module\) pair"):
        heads.update([nn.ReLU()])
    with pytest.raises(InvalidNameError, match="can't contain '.'"):
        heads["a.b"] = nn.ReLU()


# ---- activation modules -------------------------------------------------------------------------
def test_activation_modules_match_numpy():
    x = np.linspace(-3, 3, 12).reshape(3, 4)
    t = ta.tensor(x)
    sigmoid = 1 / (1 + np.exp(-x))
    softmax = np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)
    np.testing.assert_allclose(nn.Tanh()(t).numpy(), np.tanh(x), rtol=1e-12)
    np.testing.assert_allclose(nn.Sigmoid()(t).numpy(), sigmoid, rtol=1e-12)
    np.testing.assert_allclose(nn.SiLU()(t).numpy(), x * sigmoid, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(nn.ReLU(inplace=True)(t).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(nn.Softmax(dim=0)(t).numpy(), softmax, rtol=1e-12)
    np.testing.assert_allclose(nn.LogSoftmax(dim=0)(t).numpy(), np.log(softmax), rtol=1e-12)
    assert nn.Identity(3, bias=True)(t) is t
    assert repr(nn.Softmax(dim=-1)) == "Softmax(dim=-1)"


def test_softmax_without_dim_warns_and_picks_torchs_implicit_dim():
    x = ta.tensor(np.arange(6.0).reshape(2, 3))
    with pytest.warns(UserWarning, match="Implicit dimension choice for Softmax"):
        implicit = nn.Softmax()(x)
    np.testing.assert_array_equal(implicit.numpy(), nn.Softmax(dim=1)(x).numpy())
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(nn.LogSoftmax()(ta.ones(3)).numpy(),
                                      nn.LogSoftmax(dim=0)(ta.ones(3)).numpy())
