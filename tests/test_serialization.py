"""``ta.save`` / ``ta.load`` against PyTorch's checkpoint format.

Oracles: files written by real ``torch.save`` and read back by real ``torch.load`` (torch is
imported per test with ``importorskip``, so the rest of the suite runs without it), numpy views
for memory sharing, and hand-built zip archives for malicious and broken files.
"""

from __future__ import annotations

import collections
import io
import json
import os
import pickle
import struct
import zipfile

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.nn.checkpoint import save_arrays
from tinyattn.serialization import CheckpointError, RefusedError

DTYPES = ["float32", "float64", "int64", "int32", "int16", "int8", "uint8", "bool"]


def _torch():
    return pytest.importorskip("torch")


def _values(dtype, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


def _zip(path, records, prefix="archive"):
    """A zip archive of ``records`` (name -> bytes) under ``prefix/``, like a checkpoint."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in records.items():
            archive.writestr(f"{prefix}/{name}", data)
    return path


def _records(path):
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        prefix = names[0].split("/")[0]
        return {name[len(prefix) + 1:]: archive.read(name) for name in names}


# ---- torch.save -> ta.load ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_from_torch(tmp_path, dtype):
    torch = _torch()
    expected = _values(dtype, seed=DTYPES.index(dtype))
    torch.save({"t": torch.from_numpy(expected.copy())}, tmp_path / "t.pt")
    loaded = ta.load(tmp_path / "t.pt")["t"]
    assert isinstance(loaded, ta.Tensor) and loaded.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(loaded.numpy(), expected)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_loads_as_float32(tmp_path, dtype):
    torch = _torch()
    source = torch.randn(5, 3, generator=torch.Generator().manual_seed(0)).to(
        getattr(torch, dtype))
    torch.save({"t": source, "view": source[1:, ::2]}, tmp_path / "h.pt")
    loaded = ta.load(tmp_path / "h.pt")
    assert loaded["t"].dtype == ta.float32
    np.testing.assert_array_equal(loaded["t"].numpy(), source.float().numpy())  # exact widening
    np.testing.assert_array_equal(loaded["view"].numpy(), source[1:, ::2].float().numpy())
    assert np.shares_memory(loaded["t"].numpy(), loaded["view"].numpy())


def test_views_and_shared_storage_from_torch(tmp_path):
    torch = _torch()
    base = torch.arange(24, dtype=torch.float64)
    grid = base.view(4, 6)
    obj = {"base": base, "grid": grid, "t": grid.t(), "strided": base[3:20:4],
           "narrow": grid[1:3, 2:5], "expand": base[:1].expand(3, 2),
           "other": {"again": grid[2]}, "scalar": base[5].clone()}
    torch.save(obj, tmp_path / "v.pt")
    loaded = ta.load(tmp_path / "v.pt")
    for key in ("base", "grid", "t", "strided", "narrow", "expand"):
        assert loaded[key].shape == tuple(obj[key].shape)
        np.testing.assert_array_equal(loaded[key].numpy(), obj[key].numpy())
        assert np.shares_memory(loaded[key].numpy(), loaded["base"].numpy()), key
    assert loaded["t"].stride() == (1, 6) and loaded["strided"].stride() == (4,)
    loaded["base"].numpy()[14] = -1.0  # grid[2, 2]: visible through every view of it
    assert loaded["grid"][2, 2].item() == -1.0 and loaded["t"][2, 2].item() == -1.0
    assert loaded["other"]["again"][2].item() == -1.0 and loaded["narrow"][1, 0].item() == -1.0
    assert not np.shares_memory(loaded["scalar"].numpy(), loaded["base"].numpy())
    assert loaded["scalar"].shape == () and loaded["scalar"].item() == 5.0


def test_nested_structures_from_torch(tmp_path):
    torch = _torch()
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    obj = {
        "model": model.state_dict(),
        "list": [torch.ones(2), (torch.zeros(1, dtype=torch.int64), 3), []],
        "tuple": (1, 2.5, "s", None, True),
        "big": 2**70, "neg": -5, "text": "héllo", "bytes": b"\x00\xff", "none": None,
        "set": {1, 2}, "complex": 1 + 2j, "size": torch.Size([2, 3]),
        "dtype": torch.float64, "device": torch.device("cpu"),
        "od": collections.OrderedDict([("b", 1), ("a", 2)]),
        "param": torch.nn.Parameter(torch.full((2,), 3.0)),
        "grad": torch.ones(1, requires_grad=True),
    }
    torch.save(obj, tmp_path / "n.pt")
    loaded = ta.load(tmp_path / "n.pt")
    state = loaded["model"]
    assert type(state) is collections.OrderedDict and list(state) == list(model.state_dict())
    assert state._metadata == model.state_dict()._metadata  # PyTorch's attribute survives
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(state[key].numpy(), value.numpy())
    assert isinstance(loaded["list"], list) and loaded["list"][1][1] == 3
    assert loaded["list"][1][0].dtype == ta.int64 and loaded["list"][2] == []
    assert loaded["tuple"] == (1, 2.5, "s", None, True)
    assert (loaded["big"], loaded["neg"], loaded["text"]) == (2**70, -5, "héllo")
    assert loaded["bytes"] == b"\x00\xff" and loaded["none"] is None
    assert loaded["set"] == {1, 2} and loaded["complex"] == 1 + 2j
    assert isinstance(loaded["size"], ta.Size) and loaded["size"] == (2, 3)
    assert loaded["dtype"] == ta.float64 and loaded["device"] == ta.device("cpu")
    assert list(loaded["od"].items()) == [("b", 1), ("a", 2)]
    assert isinstance(loaded["param"], ta.nn.Parameter) and loaded["param"].requires_grad
    assert loaded["param"].tolist() == [3.0, 3.0]
    assert loaded["grad"].requires_grad and loaded["grad"].is_leaf


def test_map_location_forms(tmp_path):
    torch = _torch()
    torch.save({"w": torch.arange(3.0)}, tmp_path / "m.pt")
    seen = []

    def keep(storage, location):
        seen.append(location)
        return storage

    for where in (None, "cpu", "cpu:0", ta.device("cpu"), torch.device("cpu"), {"cpu": "cpu"},
                  {"cuda:0": "cpu"}, keep, lambda storage, location: None):
        assert ta.load(tmp_path / "m.pt", map_location=where)["w"].tolist() == [0.0, 1.0, 2.0]
    assert seen == ["cpu"]
    for where, error in (("cuda", RuntimeError), ("cuda:1", RuntimeError),
                         ({"cpu": "cuda:0"}, RuntimeError), (5, TypeError),
                         (lambda storage, location: "elsewhere", TypeError)):
        with pytest.raises(error, match="map_location"):
            ta.load(tmp_path / "m.pt", map_location=where)
    with pytest.raises(RuntimeError, match="CPU only"):
        ta.load(tmp_path / "m.pt", map_location=lambda storage, location: storage.cuda())


def test_storages_saved_on_a_gpu_load_on_the_cpu(tmp_path):
    """A checkpoint whose storages say 'cuda:0' (made from a CPU one by editing its pickle)."""
    torch = _torch()
    torch.save({"w": torch.arange(4.0)}, tmp_path / "cpu.pt")
    records = _records(tmp_path / "cpu.pt")
    cpu, cuda = b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0"
    assert cpu in records["data.pkl"]
    records["data.pkl"] = records["data.pkl"].replace(cpu, cuda)
    _zip(tmp_path / "gpu.pt", records)
    locations = []
    out = ta.load(tmp_path / "gpu.pt", map_location=lambda s, loc: locations.append(loc))
    assert out["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and locations == ["cuda:0"]
    assert ta.load(tmp_path / "gpu.pt", map_location={"cuda:0": "cpu"})["w"].shape == (4,)
    assert ta.load(tmp_path / "gpu.pt")["w"].shape == (4,)


def test_big_endian_checkpoint(tmp_path):
    torch = _torch()
    values = np.array([1.5, -2.25, 3e10], dtype=np.float64)
    ints = torch.tensor([1, -2], dtype=torch.int32)
    torch.save({"w": torch.from_numpy(values.copy()), "i": ints}, tmp_path / "le.pt")
    records = _records(tmp_path / "le.pt")
    records["byteorder"] = b"big"
    swapped = {}
    for name, data in records.items():
        if name.startswith("data/"):
            itemsize = 8 if len(data) == 24 else 4
            swapped[name] = np.frombuffer(data, dtype=f"<u{itemsize}").byteswap().tobytes()
    records.update(swapped)
    _zip(tmp_path / "be.pt", records)
    loaded = ta.load(tmp_path / "be.pt")
    np.testing.assert_array_equal(loaded["w"].numpy(), values)
    assert loaded["i"].tolist() == [1, -2]


def test_file_objects_and_mmap(tmp_path):
    torch = _torch()
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(5.0)}, buffer)
    buffer.seek(0)
    assert ta.load(buffer)["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    torch.save({"w": torch.arange(5.0)}, tmp_path / "m.pt")
    mapped = ta.load(tmp_path / "m.pt", mmap=True)["w"]
    assert mapped.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    mapped.numpy()[0] = 9.0  # copy-on-write: the file keeps its values
    assert ta.load(tmp_path / "m.pt")["w"][0].item() == 0.0
    with pytest.raises(ValueError, match="mmap=True needs f to be a file path"):
        ta.load(io.BytesIO(buffer.getvalue()), mmap=True)


def test_weights_only_false_does_not_widen(tmp_path):
    torch = _torch()
    torch.save({"d": collections.defaultdict(int)}, tmp_path / "d.pt")
    assert isinstance(torch.load(tmp_path / "d.pt", weights_only=False)["d"],
                      collections.defaultdict)  # the file is fine for an unrestricted reader
    for weights_only in (True, False, None):
        with pytest.raises(RefusedError, match="collections.defaultdict"):
            ta.load(tmp_path / "d.pt", weights_only=weights_only)


def test_unsupported_tensors_and_arguments(tmp_path):
    torch = _torch()
    torch.save({"c": torch.ones(2, dtype=torch.complex64)}, tmp_path / "c.pt")
    with pytest.raises(CheckpointError, match="complex64"):
        ta.load(tmp_path / "c.pt")
    torch.save({"w": torch.ones(1)}, tmp_path / "w.pt")
    with pytest.raises(TypeError, match="pickle_module"):
        ta.load(tmp_path / "w.pt", pickle_module=pickle)
    with pytest.raises(TypeError, match="fix_imports"):
        ta.load(tmp_path / "w.pt", fix_imports=True)
    with pytest.raises(FileNotFoundError, match="no checkpoint file"):
        ta.load(tmp_path / "absent.pt")


# ---- malicious and broken files -------------------------------------------------------------


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_reduce_to_os_system_is_refused_and_nothing_runs(tmp_path):
    payload = pickle.dumps({"w": _Evil(tmp_path / "proof")}, protocol=2)
    pickle.loads(payload)  # the payload is live: an ordinary unpickler runs it
    assert (tmp_path / "proof").exists()
    marker = tmp_path / "marker"
    evil = _zip(tmp_path / "evil.pt", {
        "data.pkl": pickle.dumps({"w": _Evil(marker)}, protocol=2), "byteorder": b"little",
        "version": b"3\n"})
    with pytest.raises(pickle.UnpicklingError, match=r"refused the global (posix|os)\.system"):
        ta.load(evil)
    assert not marker.exists()


def test_torch_saved_malicious_object_is_refused(tmp_path):
    torch = _torch()
    marker = tmp_path / "marker"
    torch.save({"w": torch.ones(1), "evil": _Evil(marker)}, tmp_path / "evil.pt")
    with pytest.raises(RefusedError, match="system"):
        ta.load(tmp_path / "evil.pt", weights_only=False)
    assert not marker.exists()


@pytest.mark.parametrize("pickled, words", [
    (b"\x80\x02c__main__\nSomething\nq\x00.", "refused the global __main__.Something"),
    (b"\x80\x02cbuiltins\neval\nX\x04\x00\x00\x001+1;\x85R.", "refused the global builtins.eval"),
    (b"\x80\x02ctorch\nfloat32\n)R.", "not a function it may call"),
    (b"\x80\x02}}b.", "sets the state of a dict"),
    (b"\x80\x02ccollections\nOrderedDict\n)R}X\x0d\x00\x00\x00__reduce_ex__K\x01sb.",
     "sets the state of a OrderedDict"),
    (b"(S'touch MARKER'\nios\nsystem\n.", "INST"),
    (b"\x80\x02]X\x01\x00\x00\x00aX\x01\x00\x00\x00bs.", "may only fill a dict"),
])
def test_refused_pickles(tmp_path, pickled, words):
    marker = tmp_path / "MARKER"
    pickled = pickled.replace(b"MARKER", str(marker).encode())
    path = _zip(tmp_path / "bad.pt", {"data.pkl": pickled, "version": b"3\n"})
    with pytest.raises(RefusedError, match=words):
        ta.load(path)
    assert not marker.exists()


def test_truncated_and_corrupt_files(tmp_path):
    torch = _torch()
    torch.save({"w": torch.arange(1000.0)}, tmp_path / "good.pt")
    raw = (tmp_path / "good.pt").read_bytes()
    (tmp_path / "half.pt").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        ta.load(tmp_path / "half.pt")
    records = _records(tmp_path / "good.pt")
    start = raw.index(records["data/0"][:64])  # flip one byte inside the storage
    (tmp_path / "flipped.pt").write_bytes(raw[:start + 100] + bytes([raw[start + 100] ^ 0xFF])
                                           + raw[start + 101:])
    with pytest.raises(CheckpointError, match="corrupt"):
        ta.load(tmp_path / "flipped.pt")
    broken = dict(records, **{"data.pkl": records["data.pkl"][:40]})
    with pytest.raises(CheckpointError, match="pickle"):
        ta.load(_zip(tmp_path / "short-pickle.pt", broken))
    missing = {k: v for k, v in records.items() if not k.startswith("data/")}
    with pytest.raises(CheckpointError, match="no record"):
        ta.load(_zip(tmp_path / "missing.pt", missing))
    short = dict(records, **{"data/0": records["data/0"][:-8]})
    with pytest.raises(CheckpointError, match="holds 3992 bytes, its storage needs 4000"):
        ta.load(_zip(tmp_path / "short.pt", short))
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty"):
        ta.load(tmp_path / "empty.pt")
    (tmp_path / "noise.pt").write_bytes(b"this is not a checkpoint")
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        ta.load(tmp_path / "noise.pt")
    with pytest.raises(CheckpointError, match="no data.pkl"):
        ta.load(_zip(tmp_path / "other.zip", {"readme.txt": b"hi"}))
    torch.save({"w": torch.ones(1)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match="legacy"):
        ta.load(tmp_path / "legacy.pt")


def test_out_of_bounds_view_is_refused(tmp_path):
    torch = _torch()
    torch.save({"w": torch.arange(4.0)}, tmp_path / "w.pt")
    records = _records(tmp_path / "w.pt")
    # the size (4,) is BININT1 4 then TUPLE1; make it 5 so the view reaches past the storage
    assert b"K\x04\x85" in records["data.pkl"]
    records["data.pkl"] = records["data.pkl"].replace(b"K\x04\x85", b"K\x05\x85", 1)
    with pytest.raises(CheckpointError, match="reaches element 4 of a storage of 4"):
        ta.load(_zip(tmp_path / "oob.pt", records))


# ---- ta.save -> torch.load ------------------------------------------------------------------


def test_every_dtype_to_torch(tmp_path):
    torch = _torch()
    arrays = {dtype: _values(dtype, seed=10 + i) for i, dtype in enumerate(DTYPES)}
    ta.save({dtype: ta.from_numpy(array) for dtype, array in arrays.items()}, tmp_path / "a.pt")
    loaded = torch.load(tmp_path / "a.pt", weights_only=True)
    for dtype, array in arrays.items():
        assert loaded[dtype].dtype == getattr(torch, dtype)
        np.testing.assert_array_equal(loaded[dtype].numpy(), array)


def test_shared_memory_and_views_to_torch(tmp_path):
    torch = _torch()
    base = ta.arange(12.0)
    grid = base.reshape(3, 4)
    ta.save({"base": base, "grid": grid, "t": grid.T, "row": grid[1], "cols": grid[:, 1::2],
             "copy": grid.clone()}, tmp_path / "s.pt")
    loaded = torch.load(tmp_path / "s.pt", weights_only=True)
    pointer = loaded["base"].untyped_storage().data_ptr()
    for key in ("grid", "t", "row", "cols"):
        assert loaded[key].untyped_storage().data_ptr() == pointer, key
    assert loaded["copy"].untyped_storage().data_ptr() != pointer
    assert loaded["t"].stride() == (1, 4) and loaded["cols"].stride() == (4, 2)
    assert loaded["row"].storage_offset() == 4
    np.testing.assert_array_equal(loaded["cols"].numpy(), grid.numpy()[:, 1::2])
    loaded["base"][5] = -1.0
    assert loaded["grid"][1, 1].item() == -1.0 and loaded["cols"][1, 0].item() == -1.0


def test_nested_structures_to_torch_and_back(tmp_path):
    torch = _torch()
    obj = {"state": collections.OrderedDict(w=ta.ones(2, 2), b=ta.zeros(2)),
           "list": [ta.tensor([1, 2]), (3, "x"), []], "tuple": (1, 2.5, None, False),
           "big": -2**80, "text": "héllo", "bytes": b"\x00\xff", "set": {4}, "complex": 3j,
           "size": ta.Size([2, 3]), "dtype": ta.int16, "device": ta.device("cpu"),
           "param": ta.nn.Parameter(ta.ones(3)), "array": np.arange(3, dtype=np.int32),
           "np_scalar": np.float32(0.5), "empty": ta.zeros(0, 2), "zero_d": ta.tensor(7.0)}
    ta.save(obj, tmp_path / "n.pt")
    theirs = torch.load(tmp_path / "n.pt", weights_only=True)
    assert type(theirs["state"]) is collections.OrderedDict and list(theirs["state"]) == ["w", "b"]
    assert theirs["list"][0].tolist() == [1, 2] and theirs["list"][1:] == [(3, "x"), []]
    assert theirs["tuple"] == (1, 2.5, None, False) and theirs["big"] == -2**80
    assert (theirs["text"], theirs["bytes"], theirs["set"]) == ("héllo", b"\x00\xff", {4})
    assert theirs["complex"] == 3j and theirs["size"] == torch.Size([2, 3])
    assert theirs["dtype"] is torch.int16 and theirs["device"] == torch.device("cpu")
    assert isinstance(theirs["param"], torch.nn.Parameter) and theirs["param"].requires_grad
    assert theirs["array"].dtype == torch.int32 and theirs["np_scalar"] == 0.5
    assert theirs["empty"].shape == (0, 2) and theirs["zero_d"].item() == 7.0
    ours = ta.load(tmp_path / "n.pt")
    assert ours["tuple"] == obj["tuple"] and ours["dtype"] == ta.int16
    assert ours["state"]["w"].tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_saved_file_layout(tmp_path):
    ta.save({"w": ta.ones(3), "v": ta.ones(5, dtype=ta.int64)}, tmp_path / "ckpt.pt")
    with zipfile.ZipFile(tmp_path / "ckpt.pt") as archive:
        names = archive.namelist()
        raw = (tmp_path / "ckpt.pt").read_bytes()
        for info in archive.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            name_length, extra_length = struct.unpack(
                "<HH", raw[info.header_offset + 26:info.header_offset + 30])
            assert (info.header_offset + 30 + name_length + extra_length) % 64 == 0, info
        assert archive.read("ckpt/byteorder") == b"little"
        assert archive.read("ckpt/version") == b"3\n"
    assert names[0] == "ckpt/data.pkl" and "ckpt/data/0" in names and "ckpt/data/1" in names


def test_save_to_a_file_object(tmp_path):
    torch = _torch()
    buffer = io.BytesIO()
    ta.save([ta.arange(3)], buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True)[0].tolist() == [0, 1, 2]


def test_save_refuses_what_torch_load_cannot_read(tmp_path):
    with pytest.raises(TypeError, match=r"cannot save a tinyattn.nn.linear.Linear at obj\['m'\]"):
        ta.save({"m": ta.nn.Linear(2, 2)}, tmp_path / "m.pt")
    Pair = collections.namedtuple("Pair", "a b")
    with pytest.raises(TypeError, match="Pair"):
        ta.save(Pair(1, 2), tmp_path / "p.pt")
    loop = []
    loop.append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        ta.save(loop, tmp_path / "loop.pt")
    with pytest.raises(ValueError, match="pickle_protocol"):
        ta.save({}, tmp_path / "x.pt", pickle_protocol=4)
    with pytest.raises(ValueError, match="legacy"):
        ta.save({}, tmp_path / "x.pt", _use_new_zipfile_serialization=False)
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "x.pt").exists()


# ---- models and optimizers across the libraries ---------------------------------------------


def _torch_mlp(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def _ta_mlp():
    return ta.nn.Sequential(ta.nn.Linear(4, 8), ta.nn.Tanh(), ta.nn.Linear(8, 3))


def _steps(lib, model, optimizer, inputs, targets, count):
    for _ in range(count):
        optimizer.zero_grad()
        loss = ((model(inputs) - targets) ** 2).mean()
        loss.backward()
        optimizer.step()


def _data(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((16, 4)).astype(np.float32), rng.standard_normal(
        (16, 3)).astype(np.float32)


def test_torch_trained_model_and_adamw_continue_in_tinyattn(tmp_path):
    torch = _torch()
    x, y = _data(1)
    theirs = _torch_mlp(torch)
    their_opt = torch.optim.AdamW(theirs.parameters(), lr=0.01, weight_decay=0.1)
    _steps(torch, theirs, their_opt, torch.from_numpy(x), torch.from_numpy(y), 3)
    torch.save({"model": theirs.state_dict(), "optimizer": their_opt.state_dict(), "iter": 3},
               tmp_path / "torch.pt")

    checkpoint = ta.load(tmp_path / "torch.pt", map_location="cpu")
    ours = _ta_mlp()
    ours.load_state_dict(checkpoint["model"])
    our_opt = ta.optim.AdamW(ours.parameters(), lr=0.5)
    our_opt.load_state_dict(checkpoint["optimizer"])
    assert our_opt.param_groups[0]["lr"] == 0.01 and checkpoint["iter"] == 3
    with torch.no_grad():
        np.testing.assert_allclose(ours(ta.from_numpy(x)).numpy(),
                                   theirs(torch.from_numpy(x)).numpy(), rtol=1e-6, atol=1e-6)
    # two more steps each: equal only if the moments and step counts came across
    _steps(ta, ours, our_opt, ta.from_numpy(x), ta.from_numpy(y), 2)
    _steps(torch, theirs, their_opt, torch.from_numpy(x), torch.from_numpy(y), 2)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    assert our_opt.state[ours[0].weight]["step"] == 5


def test_tinyattn_trained_model_and_adamw_continue_in_torch(tmp_path):
    torch = _torch()
    x, y = _data(2)
    ours = _ta_mlp()
    theirs = _torch_mlp(torch)
    ours.load_state_dict(theirs.state_dict())  # same start, so both runs can be compared
    our_opt = ta.optim.AdamW(ours.parameters(), lr=0.01, weight_decay=0.1)
    _steps(ta, ours, our_opt, ta.from_numpy(x), ta.from_numpy(y), 3)
    ta.save({"model": ours.state_dict(), "optimizer": our_opt.state_dict()}, tmp_path / "ta.pt")

    checkpoint = torch.load(tmp_path / "ta.pt", weights_only=True)
    theirs.load_state_dict(checkpoint["model"])
    their_opt = torch.optim.AdamW(theirs.parameters(), lr=0.5)
    their_opt.load_state_dict(checkpoint["optimizer"])
    assert their_opt.param_groups[0]["lr"] == 0.01
    with torch.no_grad():
        np.testing.assert_allclose(theirs(torch.from_numpy(x)).numpy(),
                                   ours(ta.from_numpy(x)).numpy(), rtol=1e-6, atol=1e-6)
    _steps(ta, ours, our_opt, ta.from_numpy(x), ta.from_numpy(y), 2)
    _steps(torch, theirs, their_opt, torch.from_numpy(x), torch.from_numpy(y), 2)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.numpy(), rtol=1e-5, atol=1e-6)
    assert their_opt.state[theirs[0].weight]["step"].item() == 5


def test_optimizer_state_dict_has_torch_layout():
    torch = _torch()
    ours = _ta_mlp()
    theirs = _torch_mlp(torch)
    x, y = _data(3)
    our_opt = ta.optim.AdamW(ours.parameters())
    their_opt = torch.optim.AdamW(theirs.parameters())
    _steps(ta, ours, our_opt, ta.from_numpy(x), ta.from_numpy(y), 1)
    _steps(torch, theirs, their_opt, torch.from_numpy(x), torch.from_numpy(y), 1)
    mine, yours = our_opt.state_dict(), their_opt.state_dict()
    assert sorted(mine["state"]) == sorted(yours["state"]) == [0, 1, 2, 3]
    assert [g["params"] for g in mine["param_groups"]] == [g["params"] for g in
                                                           yours["param_groups"]]
    assert set(mine["param_groups"][0]) <= set(yours["param_groups"][0])
    for index in mine["state"]:
        assert set(mine["state"][index]) == set(yours["state"][index])
        assert isinstance(mine["state"][index]["exp_avg"], ta.Tensor)


def test_optimizer_refuses_capturable_groups():
    params = [ta.nn.Parameter(ta.ones(2))]
    opt = ta.optim.AdamW(params)
    saved = opt.state_dict()
    saved["param_groups"][0]["capturable"] = True
    with pytest.raises(ValueError, match="capturable=True is not supported"):
        opt.load_state_dict(saved)


# ---- tinyattn's earlier .npz checkpoints -------------------------------------------------


def test_module_save_npz_still_loads(tmp_path):
    layer = ta.nn.Linear(3, 2)
    layer.save(tmp_path / "layer.npz")
    loaded = ta.load(tmp_path / "layer.npz")
    assert sorted(loaded) == ["bias", "weight"]
    np.testing.assert_array_equal(loaded["weight"].numpy(), layer.weight.numpy())
    other = ta.nn.Linear(3, 2)
    other.load_state_dict(loaded)
    np.testing.assert_array_equal(other.bias.numpy(), layer.bias.numpy())


def test_earlier_ta_save_npz_still_loads(tmp_path):
    """The structure-plus-arrays .npz the earlier ta.save wrote."""
    structure = {"dict": [["model", {"dict": [["w", {"tensor": "array_0"}]]}],
                          ["step", {"value": 7}], ["names", {"list": [{"value": "a"}]}],
                          ["raw", {"ndarray": "array_1"}]]}
    save_arrays(tmp_path / "old.pth", {
        "array_0": np.arange(4, dtype=np.float32), "array_1": np.ones(2, dtype=np.int16),
        "__structure__": np.frombuffer(json.dumps(structure).encode(), dtype=np.uint8)})
    loaded = ta.load(tmp_path / "old.pth")
    assert loaded["model"]["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and loaded["step"] == 7
    assert loaded["names"] == ["a"] and loaded["raw"].dtype == np.int16
