"""Module infrastructure: parameter discovery and dotted names, containers, train/eval,
zero_grad, state dicts, and checkpoints that are saved atomically and loaded without pickle."""

import os

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn


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


EXPECTED_NAMES = [
    "embed.weight",
    "blocks.0.proj.weight", "blocks.0.proj.bias", "blocks.0.norm.weight", "blocks.0.norm.bias",
    "blocks.0.scale",
    "blocks.1.proj.weight", "blocks.1.proj.bias", "blocks.1.norm.weight", "blocks.1.norm.bias",
    "blocks.1.scale",
    "heads.a.weight", "heads.a.bias", "heads.b.0.weight", "heads.b.0.bias",
]


def test_named_parameters_use_dotted_names_through_containers():
    names = [name for name, _ in Net().named_parameters()]
    assert sorted(names) == sorted(EXPECTED_NAMES)
    assert list(Net().state_dict()) == names


def test_a_shared_parameter_is_listed_once():
    net = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    net[1].weight = net[0].weight
    params = list(net.parameters())
    assert len(params) == 3
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias", "1.bias"]


def test_a_submodule_used_twice_is_visited_once():
    shared = nn.Linear(2, 2)
    net = nn.Sequential(shared, shared)
    assert len(list(net.modules())) == 2
    assert len(list(net.parameters())) == 2


def test_train_and_eval_reach_every_submodule():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_zero_grad_clears_or_zeroes_every_gradient():
    net = Block()
    net(ta.ones(2, 3)).backward(ta.ones(2, 4))
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_state_dict_holds_copies_and_round_trips():
    source, target = Net(), Net()
    state = source.state_dict()
    state["embed.weight"][0, 0] = 123.0
    assert source.embed.weight.numpy()[0, 0] != 123.0
    target.load_state_dict(source.state_dict())
    for name, value in source.state_dict().items():
        np.testing.assert_array_equal(target.state_dict()[name], value)
    idx = ta.tensor([[0, 4, 2]])
    np.testing.assert_array_equal(source(idx).numpy(), target(idx).numpy())


def test_load_state_dict_names_missing_unexpected_and_misshaped_keys_and_changes_nothing():
    net = Block()
    before = net.state_dict()
    state = Block().state_dict()
    del state["scale"]
    state["extra.weight"] = np.zeros(2)
    state["proj.weight"] = np.zeros((5, 5))
    with pytest.raises(ValueError) as info:
        net.load_state_dict(state)
    message = str(info.value)
    assert "missing keys: scale" in message
    assert "unexpected keys: extra.weight" in message
    assert "proj.weight: shape (5, 5) in the state dict, (4, 3) in the model" in message
    assert "nothing was changed" in message
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(value, before[name])  # the good keys were not loaded


def test_load_state_dict_non_strict_reports_keys_and_loads_the_rest():
    net = Block()
    state = {"proj.bias": np.arange(4.0), "unknown": np.zeros(1)}
    result = net.load_state_dict(state, strict=False)
    assert result.unexpected_keys == ["unknown"]
    assert sorted(result.missing_keys) == ["norm.bias", "norm.weight", "proj.weight", "scale"]
    assert net.proj.bias.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert net.proj.bias.dtype == np.float32
    with pytest.raises(ValueError, match="proj.bias: shape"):
        net.load_state_dict({"proj.bias": np.zeros(3)}, strict=False)


def test_save_and_load_round_trip_through_npz(tmp_path):
    net = Net()
    path = tmp_path / "ckpt" / "net.npz"
    net.save(path)
    assert os.listdir(tmp_path / "ckpt") == ["net.npz"]  # no temporary file left behind
    loaded = nn.load(path)
    assert list(loaded) == list(net.state_dict())
    fresh = Net()
    fresh.load_state_dict(loaded)
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[name], value)


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
