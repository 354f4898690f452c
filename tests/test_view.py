"""The explorer's numbers (``ta.inspect.view``, ``ta.inspect.recording``, ``tinyattn view``,
``tinyattn run --inspect-step``), each against an independent computation: numpy forward and
backward passes written here, ``param.grad`` after the ordinary backward, the ops' own
``formula`` and ``check_graph``. The page itself is tested in a browser in
``test_view_browser.py``."""

import json
import re
import textwrap

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import inspect, walkthrough
from tinyattn.autograd.engine import topological_order
from tinyattn.cli import main
from tinyattn.inspect.explain import operand_names, tensor_names
from tinyattn.inspect.summaries import array_stats, decode, heatmap, pool
from tinyattn.run import Inspection, run_script


def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def seed_numpy(causal=False):
    """The seed head's forward and backward in numpy: L = Σ softmax(s·QKᵀ) V ⊙ G."""
    inputs = walkthrough.make_inputs()
    X, G = inputs.X, inputs.G
    Q, K, V = X @ inputs.W_q, X @ inputs.W_k, X @ inputs.W_v
    S = Q @ K.T * inputs.scale
    if causal:
        S = np.where(np.triu(np.ones(S.shape, bool), 1), -np.inf, S)
    P = softmax(S)
    O = P @ V
    dP = G @ V.T
    dS = P * (dP - (dP * P).sum(-1, keepdims=True))
    dQ, dK = dS @ K * inputs.scale, dS.T @ Q * inputs.scale
    return dict(Q=Q, K=K, V=V, S=S, P=P, O=O, L=float((O * G).sum()), dO=G, dP=dP, dS=dS,
                dW_q=X.T @ dQ, dW_k=X.T @ dK, dW_v=X.T @ (P.T @ G))


def norm(a):
    return float(np.sqrt(np.sum(np.square(np.asarray(a, dtype=np.float64)))))


@pytest.fixture(scope="module")
def seed_page():
    return walkthrough.view()


# ---- the graph's numbers ----------------------------------------------------------------------
def test_the_page_has_one_node_per_graph_node_in_the_engines_order(seed_page):
    # the forward recorded Q, K, V, Kᵀ, Q Kᵀ, · s, softmax, P V, ⊙ G, sum: the engine runs
    # them from the last one back
    assert [n["op"] for n in seed_page.nodes] == ["Sum", "Mul", "MatMul", "Softmax", "Mul",
                                                   "MatMul", "Permute", "MatMul", "MatMul",
                                                   "MatMul"]
    assert [n["index"] for n in seed_page.nodes] == list(range(10))
    assert sorted(leaf["name"] for leaf in seed_page.leaves) == ["W_k", "W_q", "W_v"]


def test_values_and_gradients_equal_a_numpy_forward_and_backward(seed_page):
    ref = seed_numpy()
    by_label = {n["label"]: n["outputs"][0] for n in seed_page.nodes}
    # the tensors named by their attention roles: the values, and the gradient arriving there
    for label, value, grad in [("P", ref["P"], ref["dP"]), ("S", ref["S"], ref["dS"]),
                               ("O", ref["O"], ref["dO"]), ("Q", ref["Q"], None),
                               ("V", ref["V"], None)]:
        out = by_label[label]
        assert out["value"]["norm"] == pytest.approx(norm(value), rel=1e-12), label
        assert out["value"]["min"] == pytest.approx(value.min(), rel=1e-12), label
        assert out["value"]["max"] == pytest.approx(value.max(), rel=1e-12), label
        if grad is not None:
            assert out["grad"]["norm"] == pytest.approx(norm(grad), rel=1e-12), label
    assert seed_page.data["loss"] == pytest.approx(ref["L"], rel=1e-12)
    for leaf in seed_page.leaves:
        assert leaf["grad"]["norm"] == pytest.approx(norm(ref["d" + leaf["name"]]), rel=1e-12)


def test_statistics_and_heatmaps_against_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 50, 70))
    a[0, 0, :5] = 0.0
    a[1, 2, 3] = np.nan
    a[2, 0, 0] = -np.inf
    stats = array_stats(a)
    finite = a[np.isfinite(a)]
    assert stats["norm"] == pytest.approx(np.linalg.norm(finite), rel=1e-13)
    assert (stats["min"], stats["max"]) == (finite.min(), finite.max())
    assert stats["zero_fraction"] == 5 / a.size and (stats["nan"], stats["inf"]) == (1, 1)
    picture = heatmap(a, limit=24)
    assert (picture["rows"], picture["cols"], picture["source"]) == (24, 24, [50, 70])
    plane = np.where(np.isfinite(a[0]), a[0], 0.0)  # non-finite cells are drawn as 0
    step = (picture["hi"] - picture["lo"]) / 255
    assert np.max(np.abs(decode(picture) - pool(plane, 24))) <= step / 2 + 1e-12
    # block means: a (48, 72) slice pools to 24 × 24 blocks of 2 × 3
    b = rng.standard_normal((48, 72))
    assert np.allclose(pool(b, 24), b.reshape(24, 2, 24, 3).mean(axis=(1, 3)), rtol=1e-14)
    assert pool(b, 100).shape == (48, 72) and pool(b[:, :30], 24).shape == (24, 24)
    assert heatmap(np.float64(3.0)) is None and heatmap(np.zeros((0, 3))) is None


def test_values_the_graph_did_not_keep_are_recomputed():
    ta.manual_seed(0)
    x = ta.randn(4, 6)
    w = ta.randn(6, 6, requires_grad=True)
    a = x @ w  # MatMul
    b = a.reshape(2, 12)  # Reshape: a linear op keeps only the shape of its input
    c = b + 1.5  # Add: neither does this one
    d = ta.nn.functional.dropout(c, 0.5, training=True)  # reruns with its recorded seed
    e = d.tanh()
    loss = e.sum()
    page = inspect.view(loss)
    names = [n["op"] for n in page.nodes]
    for tensor in (a, b, c, d, e):
        node = page.nodes[names.index(tensor.grad_fn.name)]
        assert node["outputs"][0]["value"]["norm"] == pytest.approx(norm(tensor.numpy()),
                                                                    rel=1e-6)


def test_leaf_gradients_equal_the_ordinary_backward_which_still_runs():
    ta.manual_seed(1)
    model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 6, 8, 2, 1))
    idx = ta.tensor([[1, 2, 3, 4, 5]])
    _, loss = model(idx, targets=idx)
    page = inspect.view(loss, names=model)
    assert all(p.grad is None for p in model.parameters())  # the view accumulated nothing
    loss.backward()  # the graph was kept
    for name, param in model.named_parameters():
        leaf = page.leaf(name)
        assert leaf["grad"]["norm"] == pytest.approx(norm(param.grad.numpy()), rel=1e-6), name


def test_check_verdicts_are_check_graphs_and_a_wrong_backward_fails():
    class Cube(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x * x  # forgot the 3

    ta.manual_seed(2)
    w = ta.randn(3, 4, requires_grad=True)
    loss = Cube.apply(ta.randn(5, 3) @ w).softmax(dim=-1).sum()
    expected = inspect.check_graph(loss)
    page = inspect.view(loss)
    assert [n["check"]["status"] for n in page.nodes] == [n.status for n in expected.nodes]
    cube = next(n for n in page.nodes if n["op"] == "Cube")
    assert cube["check"]["status"] == "FAIL" and "disagrees" in cube["check"]["note"]
    assert cube["check"]["max_rel_error"] > 0.1
    assert page.data["summary"]["check"]["failed"] == 1
    assert cube["doc"] == "(the op has no docstring)"


def test_backward_rules_are_the_ops_own_formulas(seed_page):
    inputs = walkthrough.make_inputs()
    x = ta.tensor(inputs.X)
    w = [ta.tensor(a, requires_grad=True) for a in (inputs.W_q, inputs.W_k, inputs.W_v)]
    q, k, v = x @ w[0], x @ w[1], x @ w[2]
    loss = (((q @ k.T) * inputs.scale).softmax(dim=-1) @ v * ta.tensor(inputs.G)).sum()
    order = topological_order([loss.grad_fn])
    names = {"X": x, "G": ta.tensor(inputs.G), "W_q": w[0], "W_k": w[1], "W_v": w[2]}
    page = inspect.view(loss, names=names)
    labels = tensor_names(order, loss, names)
    index = {id(node): i for i, node in enumerate(order)}

    def label(key):
        return labels.get(key) or f"h{index[key]}"

    checked = 0
    for node, data in zip(order, page.nodes):
        operands = operand_names(node, label)
        for entry in data["inputs"]:
            if "rule" in entry:
                own = node.fn.formula(node, entry["slot"], "d" + label(id(node)), operands,
                                      label(id(node)))
                assert entry["rule"] == own
                checked += 1
        assert data["doc"].startswith(" ".join(node.fn.__doc__.split("\n\n")[0].split()))
    assert checked == 12
    softmax_rules = [e["rule"] for e in page.nodes[3]["inputs"] if "rule" in e]
    assert softmax_rules == ["P ⊙ (dP − rowsum(dP ⊙ P))"]


def test_a_parameters_path_is_explain(seed_page):
    leaf = seed_page.leaf("W_q")
    assert leaf["explain"]["formula"] == "dW_q = Xᵀ · (dS · s · K)"
    # the nodes from the loss to W_q: every node but the W_k and W_v branches (#6, #7, #8)
    assert leaf["explain"]["nodes"] == [0, 1, 2, 3, 4, 5, 9]


def test_memory_is_the_ledgers(seed_page):
    inputs = walkthrough.make_inputs()
    P = softmax(seed_numpy()["S"])
    softmax_node = seed_page.nodes[3]
    assert softmax_node["memory"]["bytes"] == P.nbytes  # the softmax keeps its output
    assert sum(n["memory"]["bytes"] for n in seed_page.nodes) == \
        seed_page.data["summary"]["memory"]["total_bytes"]
    assert inputs.X.shape == (6, 3)


def test_attention_maps_of_the_composed_path_against_numpy(seed_page):
    ref = seed_numpy()
    (site,) = seed_page.sites
    assert (site.kind, site.node, site.shape) == ("composed", 3, (1, 1, 6, 6))
    for key in ("P", "dP", "dS"):
        assert np.allclose(site.__dict__[key][0, 0], ref[key], rtol=1e-12, atol=1e-15), key
        assert site.norms[key][0] == pytest.approx(norm(ref[key]), rel=1e-12)
        assert np.allclose(site.maps[key][0], ref[key], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("impl", ["fused", "composed"])
def test_attention_maps_of_sdpa_is_causal_against_numpy(impl):
    """The fused kernel never forms P: the page recomputes it from the op's q, k, v."""
    rng = np.random.default_rng(3)
    B, H, T, D = 2, 3, 7, 4
    q, k, v = (ta.tensor(rng.standard_normal((B, H, T, D)), requires_grad=True)
               for _ in range(3))
    R = rng.standard_normal((B, H, T, D))
    out = ta.F.scaled_dot_product_attention(q, k, v, is_causal=True, impl=impl)
    page = inspect.view((out * ta.tensor(R)).sum(), check=False)
    (site,) = page.sites
    assert site.kind == impl and site.shape == (B, H, T, T)
    S = q.numpy() @ np.swapaxes(k.numpy(), -1, -2) / np.sqrt(D)
    P = softmax(np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, S))
    dP = R @ np.swapaxes(v.numpy(), -1, -2)
    dS = P * (dP - (dP * P).sum(-1, keepdims=True))
    for key, expected in (("P", P), ("dP", dP), ("dS", dS)):
        assert np.allclose(site.__dict__[key], expected, rtol=1e-10, atol=1e-12), key
        assert np.allclose(site.norms[key], np.sqrt((expected ** 2).sum(axis=(0, 2, 3))))
    assert site.above_diagonal == 0.0
    # query 0 sees only key 0: p = 1 and the softmax Jacobian is 0
    assert np.all(site.gain[:, 0] == 0.0) and np.all(site.gain[:, 1:] > 0)
    data = page.data["attention"]["steps"][0]["sites"][0]
    assert data["norms"]["dS"] == pytest.approx(list(site.norms["dS"]), rel=1e-15)
    picture = data["maps"]["P"][1]
    assert np.max(np.abs(decode(picture) - P[0, 1])) <= (picture["hi"] - picture["lo"]) / 510


def test_fused_and_composed_dropout_give_the_same_maps():
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((1, 2, 6, 4)) for _ in range(3)]
    R = ta.tensor(rng.standard_normal((1, 2, 6, 4)))
    sites = []
    for impl in ("fused", "composed"):
        q, k, v = (ta.tensor(a, requires_grad=True) for a in arrays)
        ta.manual_seed(5)  # the same dropout seed on both paths
        out = ta.F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True,
                                                impl=impl)
        (site,) = inspect.view((out * R).sum(), check=False).sites
        sites.append(site)
    for key in ("P", "dP", "dS"):
        assert np.allclose(sites[0].__dict__[key], sites[1].__dict__[key], atol=1e-12), key
    assert np.allclose(sites[0].dS.sum(-1), 0.0, atol=1e-12)


def test_module_scopes_group_the_nodes_and_every_item_is_placed_once():
    ta.manual_seed(6)
    model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 6, 8, 2, 2))
    idx = ta.tensor([[1, 2, 3, 4]])
    page = inspect.view(model, (idx, idx), check=False)
    fused = [n for n in page.nodes if n["op"] == "FusedAttention"]
    assert [n["scope"][-1] for n in fused] == ["TransformerLM/blocks.1.attn",
                                               "TransformerLM/blocks.0.attn"]
    assert [n["attention"] for n in fused] == ["blocks.1.attn", "blocks.0.attn"]
    q_proj = page.leaf("blocks.0.attn.q_proj.weight")
    assert q_proj["group"] == "TransformerLM/blocks.0.attn.q_proj"
    placed = {"n": [], "p": []}

    def walk(items):
        for item in items:
            if "g" in item:
                assert item["g"] in page.data["groups"] and len(item["items"]) > 1
                walk(item["items"])
            else:
                placed["n" if "n" in item else "p"].append(item.get("n", item.get("p")))

    walk(page.data["tree"])
    assert sorted(placed["n"]) == list(range(len(page.nodes)))
    assert sorted(placed["p"]) == list(range(len(page.leaves)))
    hooked = [n for n in page.nodes if n["hooks"]]
    assert any(h.endswith("blocks.0.attn.hook_q") for n in hooked for h in n["hooks"])


def test_the_page_is_self_contained_and_embeds_its_numbers(seed_page):
    text = seed_page.html()
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", text)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", text)
    assert re.findall(r"https?://[^\s\"'<>]+", text) == ["http://www.w3.org/2000/svg"]
    payload = re.search(r'<script type="application/json" id="tinyattn-data">(.*?)</script>',
                        text, re.S).group(1)
    assert json.loads(payload) == json.loads(json.dumps(seed_page.data))
    frame = seed_page._repr_html_()
    assert frame.startswith("<iframe srcdoc=\"&lt;!DOCTYPE html&gt;")


def test_large_tensors_are_summarised_not_embedded():
    ta.manual_seed(7)
    w = ta.randn(300, 400, requires_grad=True)
    page = inspect.view((ta.randn(200, 300) @ w).sum(), check=False)
    out = page.nodes[1]["outputs"][0]
    assert out["value_map"]["rows"] == 24 and out["value_map"]["cols"] == 24
    assert "values" not in out["value_map"]
    assert len(page.html()) < 60_000


def test_save_and_load_round_trip(seed_page, tmp_path):
    seed_page.save_json(tmp_path / "view.json")
    again = inspect.View.load(tmp_path / "view.json")
    assert again.data == json.loads(json.dumps(seed_page.data))
    assert again.html() == seed_page.html()
    with pytest.raises(ValueError, match="must end in .html"):
        seed_page.save(tmp_path / "view.txt")
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(ValueError, match="not the data of a tinyattn view"):
        inspect.View.load(tmp_path / "other.json")


def test_view_refuses_what_is_not_a_graph():
    with pytest.raises(TypeError, match="expected a Tensor"):
        inspect.view(3.0)
    x = ta.randn(3, requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="freed"):
        inspect.view(loss)
    with pytest.raises(ValueError, match="needs its batch"):
        inspect.view(ta.nn.Linear(2, 2))


# ---- a recorded training run ------------------------------------------------------------------
def _train(steps):
    ta.manual_seed(8)
    model = ta.TransformerLM(ta.models.TransformerLMConfig(13, 8, 16, 2, 2, dropout=0.1))
    optimizer = ta.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(9)
    losses = []
    for _ in range(steps):
        idx = ta.tensor(rng.integers(0, 13, (3, 8)))
        _, loss = model(idx, targets=idx)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses


def test_a_recording_changes_no_number_of_the_run():
    plain, plain_losses = _train(4)
    with inspect.recording(graph_step=3, every=1) as rec:
        recorded, recorded_losses = _train(4)
    assert recorded_losses == plain_losses
    for (name, a), (_, b) in zip(plain.named_parameters(), recorded.named_parameters()):
        assert np.array_equal(a.numpy(), b.numpy()), name
    assert rec.steps == [1, 2, 3] and rec.backward_calls == 4 and rec.errors == []
    assert rec.layers == ["blocks.0.attn", "blocks.1.attn"]
    assert rec.norms("dS").shape == (3, 2, 2) and rec.gain().shape == (3, 2, 2, 8)
    assert np.all(rec.gain()[:, :, :, 0] == 0.0)  # query 0: one key, p = 1, no gradient
    assert [r.loss for r in rec.records] == pytest.approx(plain_losses[:3], rel=1e-7)
    # the Module and Function wrappers are gone
    assert ta.nn.Module.__call__.__name__ == "__call__"
    assert "apply" in ta.autograd.Function.__dict__
    assert ta.autograd.backward is ta.autograd.engine.backward


def test_recording_the_graph_step_gives_the_page_with_its_training_view():
    with inspect.recording(graph_step=2) as rec:
        model, _ = _train(2)
    page = rec.view()
    steps = page.data["attention"]["steps"]
    assert [s["step"] for s in steps] == [1, 2] and page.data["step"] == 2
    assert len(page.nodes) == len(rec.graph.nodes) > 0
    table = str(rec)
    assert "least gain" in table and "at query 0" in rec.summary()
    # the norms of the table are the recorded ones
    site = rec.records[-1].sites[0]
    assert f"{site.norms['dS'][0]:.3e}" in table
    assert np.allclose(np.sqrt((site.dS ** 2).sum(axis=(0, 2, 3))), site.norms["dS"])


def test_recording_rejects_bad_arguments():
    with pytest.raises(ValueError, match="every must be a positive int"):
        inspect.recording(every=0).__enter__()
    with pytest.raises(ValueError, match="graph_step"):
        inspect.recording(graph_step=0).__enter__()


# ---- the command line -------------------------------------------------------------------------
def test_tinyattn_view_writes_the_seed_page_and_a_saved_json(tmp_path, capsys, seed_page):
    assert main(["view", "--out", str(tmp_path / "seed.html")]) == 0
    assert "wrote" in capsys.readouterr().out
    text = (tmp_path / "seed.html").read_text()
    assert "Your journey starts with one step" in text
    seed_page.save_json(tmp_path / "v.json")
    assert main(["view", str(tmp_path / "v.json"), "--out", str(tmp_path / "again.html")]) == 0
    assert (tmp_path / "again.html").read_text() == seed_page.html()


@pytest.mark.parametrize("argv, message", [
    (["view", "/no/such.json"], "no file"),
    (["view", "--out", "x.png"], "must end in .html"),
    (["run", "--out", "d", "script.py"], "only make sense with --inspect-step"),
    (["run", "--inspect-step", "0", "script.py"], "must be a positive integer"),
])
def test_bad_view_and_inspect_usage_exits_2(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "script.py").write_text("print(1)\n")
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_train_help_lists_every_file_it_writes(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in ("model.npz", "config.json", "loss.png", "attention.png", "gradients.png"):
        assert name in text


TRAIN_SCRIPT = """
import sys
import torch
import torch.nn as nn
from torch.nn import functional as F

class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(self.norm(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(y.transpose(1, 2).contiguous().view(B, T, C))

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(11, 8)
        self.blocks = nn.ModuleList([Block(8, 2) for _ in range(2)])
        self.head = nn.Linear(8, 11)

    def forward(self, idx, targets):
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x)
        return F.cross_entropy(self.head(x).view(-1, 11), targets.view(-1))

torch.manual_seed(0)
model = Tiny()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
data = torch.randint(0, 11, (4, 6))
for step in range(int(sys.argv[1])):
    loss = model(data, data)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.8f}")
"""


def test_run_inspect_step_writes_the_page_and_changes_no_number(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TRAIN_SCRIPT))
    assert run_script(script, ["4"]) == 0
    plain = capsys.readouterr().out
    out = tmp_path / "inspect"
    assert run_script(script, ["4"], Inspection(3, out, every=1)) == 0
    captured = capsys.readouterr()
    assert captured.out == plain  # the same losses, to the last printed digit
    assert "backward call 3 inspected" in captured.err
    data = json.loads((out / "view.json").read_text())
    page = (out / "view.html").read_text()
    assert json.dumps(data, sort_keys=True) == json.dumps(json.loads(re.search(
        r'id="tinyattn-data">(.*?)</script>', page, re.S).group(1)), sort_keys=True)
    assert [s["step"] for s in data["attention"]["steps"]] == [1, 2, 3]
    sites = data["attention"]["steps"][-1]["sites"]
    assert [s["name"] for s in sites] == ["blocks.0", "blocks.1"]  # SDPA called in the Block
    assert all(s["kind"] == "fused" and s["above_diagonal"] == 0.0 for s in sites)
    assert data["summary"]["check"]["failed"] == 0
    third = float(re.search(r"step 2: loss (\S+)", plain).group(1))
    assert data["loss"] == pytest.approx(third, abs=1e-8)
    assert {leaf["name"] for leaf in data["leaves"]} >= {"tok.weight", "head.weight",
                                                         "blocks.0.qkv.weight"}


def test_run_inspect_stops_when_asked_and_says_when_the_step_is_never_reached(tmp_path,
                                                                               capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TRAIN_SCRIPT))
    assert run_script(script, ["4"], Inspection(2, tmp_path / "a", stop=True,
                                                check=False)) == 0
    captured = capsys.readouterr()
    assert "step 0:" in captured.out and "step 1:" not in captured.out  # stopped in step 1
    assert (tmp_path / "a" / "view.html").is_file()
    assert run_script(script, ["2"], Inspection(5, tmp_path / "b")) == 0
    assert "was never reached" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


# ---- what the same new-user run found ---------------------------------------------------------
@pytest.fixture(scope="module")
def small_maps():
    ta.manual_seed(10)
    mha = ta.nn.MultiHeadAttention(8, num_heads=2, causal=True)
    return inspect.attention_gradients(mha, ta.randn(1, 5, 8), lambda out: (out * out).sum())


def test_gradients_png_labels_queries_and_keys(small_maps):
    pytest.importorskip("matplotlib")
    figure = inspect.plot_attention_gradients(small_maps)
    panels = [ax for ax in figure.axes if ax.get_title()]
    assert len(panels) == 2 * 3
    assert all((ax.get_xlabel(), ax.get_ylabel()) == ("key", "query") for ax in panels)


def test_the_attention_gradient_table_says_what_its_columns_are(small_maps):
    text = str(small_maps)
    assert "|P|, |dP|, |dS|: norms over the batch of the head's weights P" in text
    # and |P| is what it says: the norm of the weights (B = 1, T = S = 5)
    P = small_maps[0].P
    row = text.splitlines()[2].split()
    assert float(row[2]) == pytest.approx(np.linalg.norm(P[:, 0]), rel=1e-3)
    assert np.sqrt(5 / 5) <= np.linalg.norm(P[:, 0]) <= np.sqrt(5)
