"""``ta.utils.data``: datasets, samplers, ``DataLoader`` and ``default_collate``.

Oracles: counts worked out by hand (lengths, batch boundaries), the binomial spread of
uniform draws for sampling with replacement, and PyTorch itself where the result does not
depend on random numbers (sequential orders, batch indices, collate output structure).
"""

from __future__ import annotations

import collections
import importlib
import itertools

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.utils import data

# ---- layout ---------------------------------------------------------------------------------


@pytest.mark.parametrize("module, names", [
    ("tinyattn.utils.data", ["DataLoader", "Dataset", "TensorDataset", "RandomSampler",
                             "SequentialSampler", "BatchSampler", "SubsetRandomSampler",
                             "Subset", "random_split", "ConcatDataset", "IterableDataset",
                             "default_collate", "default_convert", "get_worker_info"]),
    ("tinyattn.utils.data.dataloader", ["DataLoader", "default_collate", "get_worker_info"]),
    ("tinyattn.utils.data.dataset", ["Dataset", "TensorDataset", "Subset", "random_split",
                                     "ConcatDataset"]),
    ("tinyattn.utils.data.sampler", ["Sampler", "SequentialSampler", "RandomSampler",
                                     "BatchSampler", "SubsetRandomSampler"]),
    ("tinyattn.utils.data._utils.collate", ["default_collate", "default_convert"]),
])
def test_modules_mirror_torch_layout(module, names):
    loaded = importlib.import_module(module)
    missing = [name for name in names if not hasattr(loaded, name)]
    assert not missing


def test_package_names_are_the_submodules_objects():
    from tinyattn.utils.data.dataloader import DataLoader
    from tinyattn.utils.data.sampler import RandomSampler

    assert data.DataLoader is DataLoader and data.RandomSampler is RandomSampler


# ---- samplers -------------------------------------------------------------------------------


def test_sequential_sampler():
    sampler = data.SequentialSampler(range(5))
    assert list(sampler) == [0, 1, 2, 3, 4] and len(sampler) == 5


def test_random_sampler_is_a_permutation_each_pass():
    ta.manual_seed(0)
    sampler = data.RandomSampler(range(20))
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(20))
    assert first != second  # two passes draw two permutations (1 in 20! to coincide)
    assert len(sampler) == 20


def test_random_sampler_num_samples_without_replacement_chains_permutations():
    sampler = data.RandomSampler(range(4), num_samples=10)
    drawn = list(sampler)
    assert len(drawn) == len(sampler) == 10
    assert sorted(drawn[:4]) == sorted(drawn[4:8]) == [0, 1, 2, 3]
    assert len(set(drawn[8:])) == 2  # the start of a third permutation: no repeats


def test_random_sampler_with_replacement_is_uniform():
    ta.manual_seed(1)
    n, draws = 5, 50_000
    drawn = np.array(list(data.RandomSampler(range(n), replacement=True, num_samples=draws)))
    assert drawn.min() >= 0 and drawn.max() < n
    counts = np.bincount(drawn, minlength=n)
    expected, sd = draws / n, np.sqrt(draws * (1 / n) * (1 - 1 / n))
    assert np.all(np.abs(counts - expected) < 5 * sd), counts
    # with replacement indices repeat within any window longer than n
    assert len(set(drawn[:n + 1].tolist())) <= n


def test_random_sampler_huge_num_samples_is_lazy():
    sampler = data.RandomSampler(range(7), replacement=True, num_samples=int(1e10))
    assert len(sampler) == 10**10
    head = list(itertools.islice(iter(sampler), 100))
    assert len(head) == 100 and all(0 <= i < 7 for i in head)


def test_random_sampler_repeats_under_manual_seed_and_generator():
    ta.manual_seed(5)
    a = list(data.RandomSampler(range(30)))
    ta.manual_seed(5)
    b = list(data.RandomSampler(range(30)))
    assert a == b
    g = ta.Generator().manual_seed(9)
    c = list(data.RandomSampler(range(30), generator=g))
    g.manual_seed(9)
    ta.manual_seed(123)  # the global seed does not matter when a generator is given
    d = list(data.RandomSampler(range(30), generator=g))
    assert c == d


@pytest.mark.parametrize("kwargs, error, words", [
    ({"replacement": 1}, TypeError, "replacement should be a boolean"),
    ({"num_samples": 0}, ValueError, "num_samples should be a positive integer"),
    ({"num_samples": 2.5}, ValueError, "num_samples should be a positive integer"),
    ({"generator": np.random.default_rng(0)}, TypeError, "tinyattn.Generator"),
])
def test_random_sampler_bad_arguments(kwargs, error, words):
    with pytest.raises(error, match=words):
        data.RandomSampler(range(3), **kwargs)


def test_random_sampler_of_empty_dataset_is_an_error():
    with pytest.raises(ValueError, match="num_samples"):
        data.RandomSampler([])


def test_subset_random_sampler():
    ta.manual_seed(2)
    sampler = data.SubsetRandomSampler([10, 20, 30, 40])
    assert sorted(sampler) == [10, 20, 30, 40] and len(sampler) == 4


def test_weighted_random_sampler_follows_weights():
    ta.manual_seed(3)
    drawn = np.array(list(data.WeightedRandomSampler([0.0, 1.0, 3.0], 40_000)))
    counts = np.bincount(drawn, minlength=3)
    assert counts[0] == 0
    assert abs(counts[2] / counts[1] - 3.0) < 0.15
    with pytest.raises(ValueError, match="without replacement"):
        data.WeightedRandomSampler([0.0, 1.0], 2, replacement=False)


@pytest.mark.parametrize("drop_last, batches", [
    (False, [[0, 1, 2], [3, 4, 5], [6]]),
    (True, [[0, 1, 2], [3, 4, 5]]),
])
def test_batch_sampler(drop_last, batches):
    sampler = data.BatchSampler(data.SequentialSampler(range(7)), 3, drop_last)
    assert list(sampler) == batches and len(sampler) == len(batches)


@pytest.mark.parametrize("batch_size, drop_last, words", [
    (0, False, "batch_size should be a positive integer"),
    (True, False, "batch_size should be a positive integer"),
    (2, "yes", "drop_last should be a boolean"),
])
def test_batch_sampler_bad_arguments(batch_size, drop_last, words):
    with pytest.raises(ValueError, match=words):
        data.BatchSampler(range(4), batch_size, drop_last)


def test_generator_object():
    g = ta.Generator()
    assert g.initial_seed() == 67280421310721  # PyTorch's seed of a fresh Generator
    assert g.manual_seed(4) is g and g.initial_seed() == 4
    seed = g.seed()
    assert g.initial_seed() == seed and seed >= 0
    with pytest.raises(RuntimeError, match="CPU only"):
        ta.Generator("cuda")
    with pytest.raises(ValueError, match="seed"):
        g.manual_seed(-1)


# ---- datasets -------------------------------------------------------------------------------


def test_tensor_dataset_and_errors():
    x, y = ta.arange(6).reshape(3, 2), ta.tensor([1.0, 2.0, 3.0])
    ds = data.TensorDataset(x, y)
    assert len(ds) == 3 and ds[1][0].tolist() == [2, 3] and ds[1][1].item() == 2.0
    with pytest.raises(ValueError, match="size mismatch"):
        data.TensorDataset(x, ta.ones(4))
    with pytest.raises(TypeError, match=r"tensors\[1\] must be a Tensor"):
        data.TensorDataset(x, [1, 2, 3])


def test_subset_concat_and_add():
    ds = data.Subset(list("abcdef"), [4, 0, 2])
    assert [ds[i] for i in range(len(ds))] == ["e", "a", "c"]
    both = data.ConcatDataset([list("ab"), list("xyz")])
    assert len(both) == 5 and [both[i] for i in range(5)] == list("abxyz") and both[-1] == "z"
    with pytest.raises(IndexError):
        both[5]
    with pytest.raises(ValueError, match="out of range"):
        both[-6]

    class Letters(data.Dataset):
        def __init__(self, text):
            self.text = text

        def __len__(self):
            return len(self.text)

        def __getitem__(self, i):
            return self.text[i]

    added = Letters("ab") + Letters("c")
    assert isinstance(added, data.ConcatDataset) and [added[i] for i in range(3)] == list("abc")


def test_random_split_lengths_and_fractions():
    ta.manual_seed(0)
    a, b = data.random_split(range(10), [7, 3])
    assert len(a) == 7 and len(b) == 3
    assert sorted(list(a) + list(b)) == list(range(10))
    parts = data.random_split(range(11), [0.5, 0.3, 0.2])
    # floor(5.5, 3.3, 2.2) = 5, 3, 2; the one left over goes to the first split
    assert [len(p) for p in parts] == [6, 3, 2]
    g = ta.Generator().manual_seed(1)
    first = [list(p) for p in data.random_split(range(8), [4, 4], generator=g)]
    g.manual_seed(1)
    assert [list(p) for p in data.random_split(range(8), [4, 4], generator=g)] == first
    with pytest.raises(ValueError, match="does not equal the length"):
        data.random_split(range(10), [5, 4])


# ---- DataLoader -----------------------------------------------------------------------------


def _dataset(n=10):
    return data.TensorDataset(ta.arange(n), ta.arange(n) * 10)


def test_dataloader_batches_in_order_with_last_partial():
    loader = data.DataLoader(_dataset(), batch_size=4)
    batches = [(x.tolist(), y.tolist()) for x, y in loader]
    assert batches == [([0, 1, 2, 3], [0, 10, 20, 30]), ([4, 5, 6, 7], [40, 50, 60, 70]),
                       ([8, 9], [80, 90])]
    assert len(loader) == 3


def test_dataloader_drop_last():
    loader = data.DataLoader(_dataset(), batch_size=4, drop_last=True)
    assert [x.tolist() for x, _ in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(loader) == 2


def test_dataloader_shuffle_covers_every_sample_and_repeats_under_seed():
    ta.manual_seed(11)
    first = [x.tolist() for x, _ in data.DataLoader(_dataset(), batch_size=3, shuffle=True)]
    ta.manual_seed(11)
    again = [x.tolist() for x, _ in data.DataLoader(_dataset(), batch_size=3, shuffle=True)]
    assert first == again
    assert sorted(sum(first, [])) == list(range(10)) and first != [[0, 1, 2], [3, 4, 5],
                                                                  [6, 7, 8], [9]]
    g = ta.Generator().manual_seed(3)
    one = [x.tolist() for x, _ in data.DataLoader(_dataset(), batch_size=5, shuffle=True,
                                                  generator=g)]
    g.manual_seed(3)
    two = [x.tolist() for x, _ in data.DataLoader(_dataset(), batch_size=5, shuffle=True,
                                                  generator=g)]
    assert one == two


def test_dataloader_batch_sampler_and_no_batching():
    loader = data.DataLoader(_dataset(), batch_sampler=[[3, 1], [0]])
    assert [x.tolist() for x, _ in loader] == [[3, 1], [0]] and len(loader) == 2
    single = data.DataLoader(list(range(3)), batch_size=None)
    assert list(single) == [0, 1, 2] and len(single) == 3
    arrays = list(data.DataLoader([np.ones(2)], batch_size=None))
    assert isinstance(arrays[0], ta.Tensor) and arrays[0].dtype == ta.float64


def test_dataloader_mingpt_trainer_pattern(capsys):
    """minGPT's Trainer: an effectively endless random sampler, next() on one iterator."""
    ta.manual_seed(0)
    ds = _dataset(6)
    loader = data.DataLoader(ds, sampler=data.RandomSampler(ds, replacement=True,
                                                            num_samples=int(1e10)),
                             shuffle=False, pin_memory=True, batch_size=4, num_workers=2)
    it = iter(loader)
    batches = [next(it) for _ in range(50)]
    assert all(x.shape == (4,) and (y.numpy() == x.numpy() * 10).all() for x, y in batches)
    assert len(loader) == 10**10 // 4
    seen = np.concatenate([x.numpy() for x, _ in batches])
    assert set(seen.tolist()) == set(range(6))


def test_dataloader_num_workers_notes_once_and_calls_worker_init_fn(capsys, monkeypatch):
    from tinyattn.utils.data import dataloader

    monkeypatch.setattr(dataloader, "_noted_workers", False)
    calls = []

    def init(worker_id):
        calls.append((worker_id, data.get_worker_info().num_workers))

    loader = data.DataLoader(list(range(4)), batch_size=2, num_workers=3, worker_init_fn=init,
                             prefetch_factor=4, persistent_workers=True)
    data.DataLoader(list(range(4)), num_workers=2)
    err = capsys.readouterr().err
    assert err.count("loads in this process") == 1
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    assert calls == [(0, 1)] and data.get_worker_info() is None


def test_dataloader_num_workers_gives_the_batches_of_zero_workers(capsys):
    def run(workers):
        ta.manual_seed(4)
        loader = data.DataLoader(_dataset(), batch_size=3, shuffle=True, num_workers=workers)
        return [[x.tolist() for x, _ in loader] for _ in range(2)]

    assert run(0) == run(2)


def test_dataloader_iterable_dataset():
    class Stream(data.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in data.DataLoader(Stream(), batch_size=3)] == [[0, 1, 2],
                                                                             [3, 4, 5], [6]]
    assert [b.tolist() for b in data.DataLoader(Stream(), batch_size=3, drop_last=True)] == [
        [0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="expected unspecified shuffle"):
        data.DataLoader(Stream(), shuffle=True)
    with pytest.raises(ValueError, match="expected unspecified sampler"):
        data.DataLoader(Stream(), sampler=[0])


def test_dataloader_uses_getitems_when_defined():
    class Batched(data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            raise AssertionError("__getitems__ should be used")

        def __getitems__(self, indices):
            return [i * 2 for i in indices]

    assert [b.tolist() for b in data.DataLoader(Batched(), batch_size=3)] == [[0, 2, 4], [6]]


@pytest.mark.parametrize("kwargs, error, words", [
    ({"sampler": [0, 1], "shuffle": True}, ValueError, "sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "batch_size": 2}, ValueError,
     "batch_sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "shuffle": True}, ValueError,
     "batch_sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "sampler": [0]}, ValueError,
     "batch_sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "drop_last": True}, ValueError,
     "batch_sampler option is mutually exclusive"),
    ({"batch_size": None, "drop_last": True}, ValueError, "mutually exclusive with drop_last"),
    ({"batch_size": 0}, ValueError, "batch_size should be a positive integer"),
    ({"num_workers": -1}, ValueError, "num_workers"),
    ({"timeout": -1}, ValueError, "timeout"),
    ({"prefetch_factor": 2}, ValueError, "prefetch_factor"),
    ({"persistent_workers": True}, ValueError, "persistent_workers option needs"),
    ({"multiprocessing_context": "spawn"}, ValueError, "multiprocessing_context"),
    ({"pin_memory_device": "cuda"}, RuntimeError, "CPU only"),
    ({"generator": np.random.default_rng(0)}, TypeError, "tinyattn.Generator"),
    ({"shuffle": "yes"}, TypeError, "shuffle"),
    ({"collate_fn": 3}, TypeError, "collate_fn must be callable"),
    ({"drop_last": 1}, TypeError, "drop_last"),
    ({"not_an_option": 1}, TypeError, "not_an_option"),
])
def test_dataloader_refuses_bad_and_unsupported_arguments(kwargs, error, words):
    with pytest.raises(error, match=words):
        data.DataLoader(_dataset(), **kwargs)


# ---- collate --------------------------------------------------------------------------------


def test_default_collate_nested_structures():
    Point = collections.namedtuple("Point", "x y")
    batch = [
        {"t": ta.ones(2), "n": np.zeros(3, dtype=np.int32), "f": 1.5, "i": 1, "b": True,
         "s": "a", "pair": (1, 2.0), "lst": [ta.zeros(1)], "pt": Point(1, 2),
         "od": collections.OrderedDict(k=np.float32(1))},
        {"t": ta.zeros(2), "n": np.ones(3, dtype=np.int32), "f": 2.5, "i": 2, "b": False,
         "s": "b", "pair": (3, 4.0), "lst": [ta.ones(1)], "pt": Point(3, 4),
         "od": collections.OrderedDict(k=np.float32(2))},
    ]
    out = data.default_collate(batch)
    assert out["t"].shape == (2, 2) and out["t"].dtype == ta.float32
    assert out["n"].dtype == ta.int32 and out["n"].tolist() == [[0, 0, 0], [1, 1, 1]]
    assert out["f"].dtype == ta.float64 and out["f"].tolist() == [1.5, 2.5]
    assert out["i"].dtype == ta.int64 and out["b"].dtype == ta.bool_
    assert out["s"] == ["a", "b"]
    assert isinstance(out["pair"], list) and out["pair"][0].tolist() == [1, 3]
    assert out["pair"][1].dtype == ta.float64
    assert isinstance(out["lst"], list) and out["lst"][0].shape == (2, 1)
    assert type(out["pt"]) is Point and out["pt"].y.tolist() == [2, 4]
    assert type(out["od"]) is collections.OrderedDict and out["od"]["k"].dtype == ta.float32


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match="equal size"):
        data.default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found <class 'object'>"):
        data.default_collate([object(), object()])
    with pytest.raises(TypeError, match="numpy array of dtype"):
        data.default_collate([np.array(["a"]), np.array(["b"])])


def test_default_convert():
    out = data.default_convert({"a": np.arange(3), "b": (np.float64(1.0), "x"), "c": 5})
    assert isinstance(out["a"], ta.Tensor) and out["a"].dtype == ta.int64
    assert isinstance(out["b"], list) and out["b"][0].dtype == ta.float64 and out["c"] == 5


# ---- parity with PyTorch --------------------------------------------------------------------


def test_parity_sequential_and_batch_sampler_indices():
    torch = pytest.importorskip("torch")
    tud = torch.utils.data
    for n, size, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (1, 4, False)]:
        theirs = list(tud.BatchSampler(tud.SequentialSampler(range(n)), size, drop))
        ours = list(data.BatchSampler(data.SequentialSampler(range(n)), size, drop))
        assert ours == theirs
        assert len(data.BatchSampler(range(n), size, drop)) == len(
            tud.BatchSampler(range(n), size, drop))
    for n, size, drop in [(10, 4, False), (10, 4, True), (3, None, False)]:
        theirs_loader = tud.DataLoader(list(range(n)), batch_size=size, drop_last=drop)
        ours_loader = data.DataLoader(list(range(n)), batch_size=size, drop_last=drop)
        assert len(ours_loader) == len(theirs_loader)
        assert [np.asarray(b).tolist() for b in ours_loader] == [
            np.asarray(b).tolist() for b in theirs_loader]


def _structure(value):
    """Type names, dtypes and values of a collated batch, comparable across the libraries."""
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return ("tensor", str(value.dtype).replace("torch.", ""), np.asarray(value).tolist())
    if isinstance(value, dict):
        return (type(value).__name__, {k: _structure(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_structure(v) for v in value])
    return (type(value).__name__, value)


def test_parity_collate_output_structure():
    torch = pytest.importorskip("torch")
    Pair = collections.namedtuple("Pair", "a b")

    def batch(lib):
        return [
            {"x": lib.ones(2, 3), "f": 0.5, "i": 3, "b": True, "s": "u",
             "n": np.arange(3, dtype=np.int16), "ns": np.float32(2.5), "t": (1, 2.5),
             "l": [1, 2], "p": Pair(1, 2.0), "od": collections.OrderedDict(z=1)},
            {"x": lib.zeros(2, 3), "f": 1.5, "i": 4, "b": False, "s": "v",
             "n": np.arange(3, 6, dtype=np.int16), "ns": np.float32(3.5), "t": (3, 4.5),
             "l": [3, 4], "p": Pair(3, 4.0), "od": collections.OrderedDict(z=2)},
        ]

    ours = _structure(data.default_collate(batch(ta)))
    theirs = _structure(torch.utils.data.default_collate(batch(torch)))
    assert ours == theirs
    for sample in ([np.ones(2), (np.int64(3), "a")], {"k": (1, [2.0])}):
        assert _structure(data.default_convert(sample)) == _structure(
            torch.utils.data.default_convert(sample))
