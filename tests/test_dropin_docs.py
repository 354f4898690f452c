"""``docs/dropin.md`` says what it shows: its session replays as printed, every row of its table
of what is not covered fails with the error it quotes, and the counts it gives are the test
suite's."""

import doctest
import re
import sys
from pathlib import Path

import pytest

import tinyattn as ta

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "dropin.md").read_text()
sys.path.insert(0, str(ROOT / "examples" / "seeds"))
import notebook as notebooks  # noqa: E402

ROW = re.compile(r"^\| `(?P<code>[^`]+)`[^|]* \| `(?P<kind>\w+): (?P<message>.+)` \|$",
                 re.MULTILINE)
ROWS = ROW.findall(DOC.split("## What is not covered")[1].split("\n## ")[0])


def test_the_session_prints_what_the_doc_shows():
    session = re.search(r"```pycon\n(.*?)```", DOC, re.DOTALL).group(1)
    test = doctest.DocTestParser().get_doctest(session, {}, "docs/dropin.md", "docs/dropin.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=sys.stdout.write)
    assert runner.failures == 0 and runner.tries >= 10


def _namespace() -> dict:
    return {
        "torch": ta, "nn": ta.nn, "F": ta.nn.functional, "x": ta.ones(2, 3),
        "model": ta.nn.Linear(3, 2), "ids": ta.tensor([0, 2, 2]), "idx_next": ta.tensor([[16]]),
        "w": ta.ones(2, requires_grad=True),
    }


def test_the_table_lists_what_learners_meet_first():
    codes = [code for code, _, _ in ROWS]
    assert len(codes) >= 15
    for expected in ("torch.cuda.set_device(0)", "torch.distributed.init_process_group(",
                     "nn.Conv1d("):
        assert any(code.startswith(expected) for code in codes)


@pytest.mark.parametrize("code, kind, message", ROWS, ids=[code for code, _, _ in ROWS])
def test_every_row_of_what_is_not_covered_fails_as_quoted(code, kind, message, tmp_path,
                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)  # torch.save would write here
    with pytest.raises(Exception) as raised:
        eval(code, _namespace())
    assert type(raised.value).__name__ == kind
    said = str(raised.value)
    if message.endswith("…"):  # shortened in the table
        assert said.startswith(message[:-1].rstrip()), said
    else:
        assert said == message


def test_the_counts_the_doc_gives_are_the_test_suites():
    import test_seed_notebooks
    import test_torch_surface

    cells = sum(len(notebooks.cells(p.name)) for p in notebooks.SEEDS.glob("*.txt"))
    compared = sum(len(numbers) for numbers in test_seed_notebooks.DETERMINISTIC.values())
    assert f"all {cells} code cells" in DOC
    assert f"the {compared} cells whose printed" in DOC
    assert f"**{len(test_torch_surface.CASES)} tensor expressions**" in DOC
