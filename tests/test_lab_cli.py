"""``tinyattn lab scale``, and the maps ``tinyattn train`` writes."""

import io
import json

import matplotlib.image
import numpy as np
import pytest

import tinyattn as ta
from tinyattn.cli import main
from tinyattn.train import TrainConfig, attention_maps, train_task

SMALL = ["--embed-dim", "16", "--num-heads", "2", "--num-layers", "1", "--seq-len", "12",
         "--batch-size", "2"]


def test_lab_scale_tabulates_plots_and_writes_the_records(tmp_path, capsys):
    status = main(["lab", "scale", *SMALL, "--factor", "4", "--steps", "2", "--out",
                   str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0
    rows = [line.split() for line in out.splitlines() if line[:4] in ("1/√D", "1/D ", "1   ",
                                                                          "4   ")]
    assert [(r[0], r[2]) for r in rows] == [(s, step) for s in ("1/√D", "1/D", "1", "4")
                                            for step in ("0", "1")]
    assert rows[0][1] == f"{1 / np.sqrt(8):.4g}" and rows[2][1] == "0.125"
    records = json.loads((tmp_path / "scale.json").read_text())
    assert len(records) == 4 * 2 * 2  # scales × steps × heads
    assert {r["scale"] for r in records} == {"1/√D", "1/D", "1", "4"}
    # matplotlib is a test dependency: the plot must be there, a PNG that decodes, not blank
    png = tmp_path / "scale.png"
    assert png.is_file(), f"no scale.png was written; the command printed:\n{out}"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(png)  # (rows, columns, RGBA)
    assert image.ndim == 3 and image.shape[0] >= 200 and image.shape[1] >= 200
    assert np.ptp(image[..., :3]) > 0.5  # dark lines on a light background


def test_lab_scale_refuses_bad_sizes(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["lab", "scale", "--embed-dim", "10", "--num-heads", "4", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "not divisible" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["lab", "scale", "--factor", "-1"])
    assert "must be a positive number" in capsys.readouterr().err


def test_attention_maps_are_the_weights_of_each_block():
    ta.manual_seed(0)
    model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 8, 16, 2, 2))
    idx = np.array([3, 1, 4, 1, 5])
    maps = attention_maps(model, idx)
    # independently: run the blocks one by one, asking each attention for its weights
    tokens = ta.tensor(idx[None])
    with ta.no_grad():
        x = model.token_embedding(tokens) + model.position_embedding(ta.arange(5))
        for layer, block in enumerate(model.blocks):
            _, weights = block.attn(block.ln_1(x), need_weights=True,
                                    average_attn_weights=False)
            np.testing.assert_allclose(maps[layer], weights.numpy()[0], atol=1e-6)
            x = block(x)


def test_train_writes_the_gradient_maps_of_a_held_out_example(tmp_path):
    pytest.importorskip("matplotlib")
    log = io.StringIO()
    train_task("reverse", tmp_path, TrainConfig(steps=2), length=3, eval_size=8,
               progress=False, stream=log)
    assert (tmp_path / "gradients.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "gradients.png" in log.getvalue()
