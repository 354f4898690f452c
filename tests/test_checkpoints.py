"""Checkpoints are safe: an interrupted save keeps the previous file, loading never unpickles,
failed ``load_state_dict`` calls change nothing, and a saved run resumes bit for bit."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.nn import checkpoint as checkpoint_file

CONFIG = ta.models.TransformerLMConfig(vocab_size=13, context_length=8, embed_dim=16,
                                       num_heads=2, num_layers=1, dropout=0.1)


def _model(seed: int = 0) -> ta.TransformerLM:
    ta.manual_seed(seed)
    return ta.TransformerLM(CONFIG)


def _batch(step: int) -> tuple[ta.Tensor, ta.Tensor]:
    tokens = np.random.default_rng(step).integers(0, 13, size=(3, 9))
    return ta.tensor(tokens[:, :-1]), ta.tensor(tokens[:, 1:])


def _train(model: ta.TransformerLM, optimizer: ta.optim.Optimizer, steps: range) -> list[float]:
    losses = []
    for step in steps:
        idx, targets = _batch(step)
        _, loss = model(idx, targets=targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _snapshot(model: ta.nn.Module) -> dict[str, np.ndarray]:
    return {name: p.numpy().copy() for name, p in model.named_parameters()}


def _assert_same(before: dict[str, np.ndarray], model: ta.nn.Module) -> None:
    after = _snapshot(model)
    assert before.keys() == after.keys()
    for name in before:
        assert before[name].dtype == after[name].dtype
        np.testing.assert_array_equal(before[name], after[name], err_msg=name)


# ---- interrupted saves --------------------------------------------------------------------------

@pytest.mark.parametrize("failing", ["savez", "fsync", "replace"])
def test_an_interrupted_save_keeps_the_previous_checkpoint_and_leaves_no_temp_file(
        tmp_path, monkeypatch, failing):
    path = tmp_path / "model.npz"
    good = _model(0)
    good.save(path)
    original = path.read_bytes()

    def write_half_then_fail(file, **arrays):
        file.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt("interrupted mid-save")

    def fail(*args, **kwargs):
        raise KeyboardInterrupt("interrupted mid-save")

    target = {"savez": (checkpoint_file.np, "savez", write_half_then_fail),
              "fsync": (checkpoint_file.os, "fsync", fail),
              "replace": (checkpoint_file.os, "replace", fail)}[failing]
    monkeypatch.setattr(*target)
    with pytest.raises(KeyboardInterrupt, match="interrupted mid-save"):
        _model(1).save(path)
    monkeypatch.undo()

    assert path.read_bytes() == original
    assert sorted(os.listdir(tmp_path)) == ["model.npz"]
    restored = ta.nn.load(path)
    for name, param in good.named_parameters():
        np.testing.assert_array_equal(restored[name], param.numpy())


def test_save_over_an_existing_checkpoint_replaces_it_whole(tmp_path):
    path = tmp_path / "model.npz"
    _model(0).save(path)
    newer = _model(1)
    newer.save(path)
    restored = ta.nn.load(path)
    for name, param in newer.named_parameters():
        np.testing.assert_array_equal(restored[name], param.numpy())
    assert sorted(os.listdir(tmp_path)) == ["model.npz"]


# ---- loading never unpickles ------------------------------------------------------------------

class _RunsOnUnpickle:
    """Unpickling this calls ``os.system`` with a command that would leave a marker file."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_an_object_array_is_rejected_without_running_its_pickle(tmp_path):
    marker = tmp_path / "executed"
    path = tmp_path / "bomb.npz"
    payload = np.empty(1, dtype=object)
    payload[0] = _RunsOnUnpickle(str(marker))
    np.savez(path, weight=np.ones(2), payload=payload)
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["payload.npy", "weight.npy"]

    with pytest.raises(ValueError, match=r"load: '.*bomb\.npz' is not a readable tinyattn "
                                         r"checkpoint .*[Oo]bject arrays cannot be loaded"):
        ta.nn.load(path)
    assert not marker.exists()


def test_truncated_checkpoint_error_names_the_path(tmp_path):
    path = tmp_path / "cut.npz"
    _model().save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match=r"load: '.*cut\.npz' is not a readable"):
        ta.nn.load(path)


def test_a_corrupted_byte_in_the_archive_is_an_error_not_garbage(tmp_path):
    """Zip entries carry a CRC: a flipped byte inside an array must not load silently."""
    path = tmp_path / "flipped.npz"
    ta.nn.Linear(64, 64).save(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"load: '.*flipped\.npz' is not a readable"):
        ta.nn.load(path)


# ---- failed loads change nothing --------------------------------------------------------------

@pytest.mark.parametrize("problem", ["missing", "unexpected", "shape", "dtype", "last-key-bad"])
def test_a_failed_load_state_dict_changes_no_parameter(problem):
    model = _model(0)
    before = _snapshot(model)
    state = {name: tensor.numpy() + 1 for name, tensor in _model(1).state_dict().items()}
    last = list(state)[-1]
    if problem == "missing":
        del state[last]
    elif problem == "unexpected":
        state["blocks.9.weight"] = np.ones(3)
    elif problem == "shape":
        state[last] = np.ones((1,) + state[last].shape)
    elif problem == "dtype":
        state[last] = state[last].astype(str)
    else:
        state[last] = state[last][..., :1]
    with pytest.raises(ValueError, match="nothing was changed"):
        model.load_state_dict(state)
    _assert_same(before, model)


def _optimizer_state(optimizer: ta.optim.Optimizer) -> list:
    state = optimizer.state_dict()
    return [(index, {key: np.array(value) for key, value in entry.items()})
            for index, entry in state["state"].items()] + [state["param_groups"]]


@pytest.mark.parametrize("problem", ["moment-shape", "group-count", "param-count", "bad-lr",
                                     "step-negative"])
def test_a_failed_optimizer_load_state_dict_changes_nothing(problem):
    model = _model(0)
    optimizer = ta.optim.AdamW(model.parameters(), lr=1e-3)
    _train(model, optimizer, range(2))
    before = _optimizer_state(optimizer)
    saved = optimizer.state_dict()
    last = max(saved["state"])
    if problem == "moment-shape":
        saved["state"][last]["exp_avg"] = np.zeros((2, 2))
    elif problem == "group-count":
        saved["param_groups"] = saved["param_groups"] * 2
    elif problem == "param-count":
        saved["param_groups"][0]["params"] = saved["param_groups"][0]["params"][:-1]
    elif problem == "bad-lr":
        saved["param_groups"][0]["lr"] = float("nan")
    else:
        saved["state"][last]["step"] = -1
    saved["state"][0]["exp_avg"] = saved["state"][0]["exp_avg"] + 1  # valid, must not land
    with pytest.raises(ValueError, match=r"AdamW\.load_state_dict"):
        optimizer.load_state_dict(saved)
    after = _optimizer_state(optimizer)
    assert len(before) == len(after)
    for (index_b, entry_b), (index_a, entry_a) in zip(before[:-1], after[:-1]):
        assert index_b == index_a
        for key in entry_b:
            np.testing.assert_array_equal(entry_b[key], entry_a[key])
    assert before[-1] == after[-1]


# ---- resume -----------------------------------------------------------------------------------

def test_model_and_optimizer_round_trip_resumes_training_bit_for_bit(tmp_path):
    model = _model(0)
    optimizer = ta.optim.AdamW(model.parameters(), lr=1e-2)
    _train(model, optimizer, range(3))
    model.save(tmp_path / "model.npz")
    optimizer_state = optimizer.state_dict()
    ta.manual_seed(123)  # the dropout stream both continuations start from
    expected = _train(model, optimizer, range(3, 6))
    expected_params = _snapshot(model)

    resumed = _model(7)  # different initial weights, overwritten by the checkpoint
    resumed.load_state_dict(ta.nn.load(tmp_path / "model.npz"))
    resumed_optimizer = ta.optim.AdamW(resumed.parameters(), lr=0.5)
    resumed_optimizer.load_state_dict(optimizer_state)
    ta.manual_seed(123)
    assert _train(resumed, resumed_optimizer, range(3, 6)) == expected
    _assert_same(expected_params, resumed)
