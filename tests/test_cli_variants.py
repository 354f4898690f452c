"""tinyattn train with block variants and presets; tinyattn sample with and without the
key/value cache."""

import json

import numba
import pytest

from tinyattn.cli import main


@pytest.fixture(autouse=True)
def _restore_numba_threads():
    threads = numba.get_num_threads()
    yield
    numba.set_num_threads(threads)


def test_llama_preset_trains_and_its_options_reach_the_config(tmp_path, capsys):
    out = tmp_path / "llama"
    assert main(["train", "--task", "reverse", "--length", "3", "--steps", "3",
                 "--preset", "llama", "--impl", "composed", "--window-size", "6",
                 "--out", str(out), "--no-progress"]) == 0
    model = json.loads((out / "config.json").read_text())["model"]
    assert (model["positional"], model["norm"], model["mlp"], model["bias"],
            model["num_kv_heads"], model["window_size"]) == ("rope", "rmsnorm", "swiglu", False,
                                                             2, 6)
    assert "accuracy: " in capsys.readouterr().out
    assert main(["sample", "--checkpoint", str(out / "model.npz"), "--prompt", "1 2 3"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["prompt:", "1", "2", "3"]


def test_single_options_override_the_preset(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "--task", "copy", "--length", "3", "--steps", "2", "--preset", "gpt2",
                 "--no-tie-weights", "--positional", "alibi", "--num-kv-heads", "1",
                 "--impl", "composed", "--out", str(out), "--no-progress"]) == 0
    model = json.loads((out / "config.json").read_text())["model"]
    assert (model["tie_weights"], model["gelu_approximate"], model["positional"],
            model["num_kv_heads"]) == (False, "tanh", "alibi", 1)


def test_sample_with_and_without_cache_prints_the_same_text(tmp_path, capsys):
    text = tmp_path / "poem.txt"
    text.write_text("your journey starts with one step. " * 40)
    out = tmp_path / "run"
    assert main(["train", "--text", str(text), "--steps", "2", "--eval-every", "1",
                 "--batch-size", "4", "--embed-dim", "16", "--num-heads", "2", "--num-layers",
                 "2", "--context-length", "8", "--positional", "rope", "--impl", "composed",
                 "--out", str(out),
                 "--no-progress"]) == 0
    capsys.readouterr()
    samples = []
    for extra in ([], ["--no-cache"]):
        assert main(["sample", "--checkpoint", str(out / "model.npz"), "--prompt", "your ",
                     "--max-new-tokens", "30", "--seed", "3", *extra]) == 0
        samples.append(capsys.readouterr().out)
    assert samples[0] == samples[1] and len(samples[0].rstrip("\n")) == len("your ") + 30


@pytest.mark.parametrize("argv, message", [
    (["train", "--task", "copy", "--num-kv-heads", "3"], "num_kv_heads must be None or a "
                                                         "positive divisor"),
    (["train", "--task", "copy", "--window-size", "0"], "must be a positive integer"),
    (["train", "--task", "copy", "--preset", "mistral"], "invalid choice: 'mistral'"),
    (["train", "--task", "copy", "--positional", "rope", "--embed-dim", "12",
      "--num-heads", "4"], "needs an even head size"),
])
def test_bad_variant_options_exit_2_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err
