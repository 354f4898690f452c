"""Every notebook in examples/notebooks runs top to bottom in a fresh kernel, with its plots
inline and its reports as HTML tables."""

from pathlib import Path

import pytest
from printed import printed_number

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "examples" / "notebooks"

# notebook -> (output types it must show, text that must appear in its outputs, and the
# numbers printed after a label, parsed and compared exactly)
EXPECTED = {
    "01_embedding_to_context.ipynb": ({"image/png", "text/html"},
                                      ["rows 8 and 9 untouched: True"], {}),
    "02_numpy_attention_and_its_backward.ipynb": ({"text/html"},
                                                  ["two heads == numpy: True",
                                                   "every row of dS sums to zero: True"], {}),
    "03_eight_heads_d512.ipynb": ({"image/png", "text/html"},
                                  ["same output: True", "head 3's dW_V, layer vs separate: True"],
                                  {}),
    "04_your_journey_starts_with_one_step.ipynb": ({"image/png", "text/html"},
                                                   ["d scores (a) == d scores (b): True"],
                                                   {"largest |d score| above the diagonal:": 0.0,
                                                    "largest |dS| or |P| above the diagonal:":
                                                    0.0}),
    "05_batched_and_multihead_attention.ipynb": ({"text/html"},
                                                 ["same as F.scaled_dot_product_attention: "
                                                  "True True"], {}),
    "06_attention_gradient_lab.ipynb": ({"image/png", "text/html"},
                                        ["every backward agrees with finite differences"],
                                        {"largest |dS| or |P| above the diagonal:": 0.0,
                                         "least gradient through the softmax at query": 0}),
}

INLINE_PAGES = {"06_attention_gradient_lab.ipynb"}
"""Notebooks that show an ``inspect.view`` page inline."""


def test_every_notebook_is_covered_and_stored_without_outputs():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)
    for path in NOTEBOOKS.glob("*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), path.name
        assert notebook.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_in_a_fresh_kernel(name, tmp_path):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on the first cell that fails
    kinds, text, pages = set(), [], []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            kinds |= set(output.get("data", {}))
            text.append(output.get("text", "") + output.get("data", {}).get("text/plain", ""))
            pages.append(output.get("data", {}).get("text/html", ""))
    shows, says, numbers = EXPECTED[name]
    assert shows <= kinds, f"{name} shows {sorted(kinds)}"
    joined = "\n".join(text)
    for line in says:
        assert line in joined, f"{name} did not print {line!r}"
    for label, value in numbers.items():
        # the whole printed number: a printed 0.0123 is not 0.0
        assert printed_number(joined, label) == value, f"{name}: {label}"
    if name in INLINE_PAGES:  # the explorer shows inline: its page in an iframe
        assert any(page.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;') for page in pages)
