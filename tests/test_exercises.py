"""Bring your own backward: the stubs, the grader, and one wrong solution per diagnosis."""

import re

import pytest
from printed import printed_numbers

from tinyattn.cli import main
from tinyattn.exercises import EXERCISES

# the body of each stub's backward, written out (the stub's own first line stays)
SOLUTIONS = {
    "softmax": """\
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))
""",
    "layer_norm": """\
    g = dy * weight
    dx = (g - g.mean(axis=-1, keepdims=True)
          - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) * rstd
    rows = tuple(range(dy.ndim - 1))
    return dx, (dy * x_hat).sum(axis=rows), dy.sum(axis=rows)
""",
    "attention_head": """\
    dv = np.swapaxes(p, -1, -2) @ d_out
    dp = d_out @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = s * ds @ k
    dk = s * np.swapaxes(ds, -1, -2) @ q
    return dq, dk, dv
""",
    "cross_entropy": """\
    delta = probs.copy()
    delta[np.arange(len(targets)), targets] -= 1.0
    return delta / len(targets) * d_loss
""",
    "dropout_attention": """\
    dv = np.swapaxes(dropped, -1, -2) @ d_out
    dp = (d_out @ np.swapaxes(v, -1, -2)) * keep / (1.0 - p)
    ds = weights * (dp - (dp * weights).sum(axis=-1, keepdims=True))
    dq = s * ds @ k
    dk = s * np.swapaxes(ds, -1, -2) @ q
    return dq, dk, dv
""",
}


def run(capsys, *argv):
    status = main(["exercise", *argv])
    return status, capsys.readouterr().out


def solution(tmp_path, name, old=None, new=None):
    """The stub of ``name`` with its backward written out (and ``old`` replaced by ``new``)."""
    text, count = re.subn(r"    raise NotImplementedError\(.*\)\n", lambda _: SOLUTIONS[name],
                          EXERCISES[name].stub)
    assert count == 1
    if old is not None:
        assert old in text, f"{old!r} is not in the solution of {name}"
        text = text.replace(old, new)
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def test_list_names_every_exercise(capsys):
    status, out = run(capsys, "list")
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()] == list(EXERCISES)
    assert set(EXERCISES) == {"softmax", "layer_norm", "attention_head", "cross_entropy",
                              "dropout_attention"}


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_fresh_stub_is_graded_as_not_written_and_the_solution_passes(name, tmp_path, capsys):
    status, out = run(capsys, "new", name, str(tmp_path))
    assert status == 0 and f"wrote {tmp_path / (name + '.py')}" in out
    status, out = run(capsys, "check", str(tmp_path / f"{name}.py"))
    assert status == 1 and "backward is not written yet" in out and out.rstrip().endswith(
        "FAILED")
    status, out = run(capsys, "check", str(solution(tmp_path / "solved", name)))
    assert status == 0, out
    assert out.rstrip().endswith("with finite differences") and "PASSED: all 3 cases" in out
    assert out.count("  ok") == 3 * len(EXERCISES[name].inputs)


MISTAKES = [
    ("softmax", "    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))",
     "    return y * dy", "the row-sum term is missing"),
    ("attention_head", "    dq = s * ds @ k", "    dq = ds @ k",
     "the scale s = 1/√D is missing in dQ: "),
    ("attention_head", "    dk = s * np.swapaxes(ds, -1, -2) @ q",
     "    dk = np.swapaxes(ds, -1, -2) @ q", "the scale s = 1/√D is missing in dK: "),
    ("attention_head", "    dk = s * np.swapaxes(ds, -1, -2) @ q", "    dk = s * ds @ q",
     "a transpose is missing in dK"),
    ("attention_head", "    dv = np.swapaxes(p, -1, -2) @ d_out", "    dv = p @ d_out",
     "a transpose is missing in dV"),
    ("attention_head", "    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))",
     "    ds = p * dp", "the row-sum term of the softmax backward is missing"),
    ("dropout_attention", "    dp = (d_out @ np.swapaxes(v, -1, -2)) * keep / (1.0 - p)",
     "    dp = d_out @ np.swapaxes(v, -1, -2)", "the dropout mask is not reapplied"),
    ("dropout_attention", "    dv = np.swapaxes(dropped, -1, -2) @ d_out",
     "    dv = np.swapaxes(weights, -1, -2) @ d_out", "dV = Wᵀ dO with the dropped weights"),
    ("dropout_attention", "    dp = (d_out @ np.swapaxes(v, -1, -2)) * keep / (1.0 - p)",
     "    dp = (d_out @ np.swapaxes(v, -1, -2)) * keep", "without its 1 / (1 − p) scale"),
    ("cross_entropy", "    return delta / len(targets) * d_loss", "    return delta * d_loss",
     "sum instead of mean"),
    ("cross_entropy", "    return delta / len(targets) * d_loss",
     "    return delta / delta.size * d_loss", "mean over all N·C entries"),
    ("cross_entropy", "    return delta / len(targets) * d_loss",
     "    return delta / len(targets)", "the upstream gradient d_loss is ignored"),
    ("layer_norm", "          - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) * rstd",
     "          ) * rstd", "the variance's dependence on x is missing"),
]


@pytest.mark.parametrize("name, old, new, diagnosis", MISTAKES,
                         ids=[f"{m[0]}: {m[3][:40]}" for m in MISTAKES])
def test_each_known_mistake_is_diagnosed(name, old, new, diagnosis, tmp_path, capsys):
    status, out = run(capsys, "check", str(solution(tmp_path, name, old, new)))
    assert status == 1
    assert "FAIL: " in out and out.rstrip().endswith("FAILED")
    diagnoses = [line for line in out.splitlines() if "diagnosis: " in line]
    assert diagnoses and all(diagnosis in line for line in diagnoses), out


def test_general_slips_are_diagnosed(tmp_path, capsys):
    path = solution(tmp_path, "layer_norm", "    g = dy * weight\n    dx = (",
                    "    g = dy * weight\n    dx = 2.0 * (")
    status, out = run(capsys, "check", str(path))
    assert status == 1
    # the slip doubles dx: each of the 3 cases is diagnosed with the whole factor 2
    assert printed_numbers(out, "diagnosis: dx is off by a constant factor") == [2.0] * 3
    path = solution(tmp_path, "softmax", "    return y * (", "    return -y * (")
    assert "diagnosis: dx has the opposite sign" in run(capsys, "check", str(path))[1]
    path = solution(tmp_path, "layer_norm", "    return dx, (dy * x_hat).sum(axis=rows)",
                    "    return dx, (dy * x_hat).sum(axis=rows, keepdims=True)")
    out = run(capsys, "check", str(path))[1]
    assert "dweight has shape (1, 6), expected (6,)" in out


def test_files_that_cannot_be_graded(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("EXERCISE = 'softmax'\ndef forward(x:\n")
    status, out = run(capsys, "check", str(broken))
    assert status == 1 and "could not be imported: SyntaxError" in out
    unnamed = tmp_path / "unnamed.py"
    unnamed.write_text("def forward(x):\n    return x, ()\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["exercise", "check", str(unnamed)])
    assert exit_info.value.code == 2
    assert "does not name an exercise" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["exercise", "new", "softmaxx", str(tmp_path)])
    assert "no exercise named 'softmaxx'" in capsys.readouterr().err
    (tmp_path / "softmax.py").write_text("mine")
    with pytest.raises(SystemExit):
        main(["exercise", "new", "softmax", str(tmp_path)])
    assert "exists already" in capsys.readouterr().err
    assert main(["exercise", "new", "softmax", str(tmp_path), "--force"]) == 0
    assert "NotImplementedError" in (tmp_path / "softmax.py").read_text()
