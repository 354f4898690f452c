"""Run the seed notebooks (the text exports beside this file) the way Jupyter would, on tinyattn.

A code cell starts at a line ``In [N]:`` and runs until its printed output; the output is what
the notebook showed. :func:`cells` separates the two: the code is the longest run of
blank-line-separated blocks that compiles and does not look like a printed value. The code runs
with only its imports swapped (``import torch`` → ``import tinyattn as torch``, and likewise for
``torch.nn``/``torch.nn.functional``), all cells of a notebook in one namespace, in order; the
value of a cell's last expression is kept, as Jupyter displays it. Notebook 004 has no ``In``
cells: its code is in fenced ``python`` blocks, which run the same way.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SEEDS = Path(__file__).resolve().parent

_CELL = re.compile(r"^In \[(\d+)\]:\s*$", re.MULTILINE)
_PRINTED_VALUE = re.compile(r"^(tensor\(|array\(|torch\.Size|True|False|Parameter|<|-?\d|\[)")
_IMPORTS = [
    (r"^(\s*)import torch\.nn\.functional as (\w+)", r"\1import tinyattn.nn.functional as \2"),
    (r"^(\s*)import torch\.nn as (\w+)", r"\1import tinyattn.nn as \2"),
    (r"^(\s*)from torch\.nn import functional as (\w+)",
     r"\1from tinyattn.nn import functional as \2"),
    (r"^(\s*)from torch import nn", r"\1from tinyattn import nn"),
    (r"^(\s*)import torch\s*$", r"\1import tinyattn as torch"),
]


@dataclass
class Cell:
    """One code cell: its number, source and the output the notebook printed."""

    number: int
    code: str
    output: str


def _compiles(source: str) -> bool:
    try:
        compile(source, "<cell>", "exec")
    except SyntaxError:
        return False
    return True


def _split(text: str) -> tuple[str, str]:
    """``(code, output)`` of a cell's text: code blocks are taken while they compile (a block
    that does not, like the first part of a function with blank lines, takes the blocks after
    it until they do), and the first printed value or prose ends the code."""
    blocks = re.split(r"\n\s*\n", text.strip("\n"))
    code: list[str] = []
    i = 0
    while i < len(blocks):
        if code and _PRINTED_VALUE.match(blocks[i].lstrip()):
            break
        for j in range(i, len(blocks)):
            if _compiles("\n\n".join(code + blocks[i:j + 1])):
                code += blocks[i:j + 1]
                i = j + 1
                break
        else:
            break
    return "\n\n".join(code), "\n\n".join(blocks[i:])


def cells(name: str) -> list[Cell]:
    """The code cells of seed notebook ``name`` (a file beside this one), in order."""
    text = (SEEDS / name).read_text()
    markers = list(_CELL.finditer(text))
    if not markers:  # fenced code blocks only
        blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
        return [Cell(i, block, "") for i, block in enumerate(blocks)]
    found = []
    for marker, following in zip(markers, markers[1:] + [None]):
        end = following.start() if following else len(text)
        code, output = _split(text[marker.end():end])
        found.append(Cell(int(marker.group(1)), code, output))
    return found


def swap_imports(code: str) -> str:
    """``code`` with its torch imports pointing at tinyattn, nothing else changed."""
    for pattern, replacement in _IMPORTS:
        code = re.sub(pattern, replacement, code, flags=re.MULTILINE)
    return code


@dataclass
class Run:
    """What running a notebook gave: per cell, the value of its last expression, what it
    printed, and the values passed to ``display``."""

    namespace: dict = field(default_factory=dict)
    values: dict[int, Any] = field(default_factory=dict)
    printed: dict[int, str] = field(default_factory=dict)
    displayed: dict[int, list] = field(default_factory=dict)


def run(name: str, swap: bool = True) -> Run:
    """Run every cell of notebook ``name`` in one namespace, in order."""
    result = Run()
    for cell in cells(name):
        shown: list = []

        def display(value: Any, shown: list = shown) -> None:  # Jupyter's display, in order
            shown.append(value)
            print(repr(value))

        result.namespace["display"] = display
        source = swap_imports(cell.code) if swap else cell.code
        tree = ast.parse(source)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(tree, f"<{name} cell {cell.number}>", "exec"), result.namespace)
            if last is not None:
                expression = ast.Expression(last.value)
                result.values[cell.number] = eval(compile(expression, "<cell>", "eval"),
                                                  result.namespace)
        result.printed[cell.number] = out.getvalue()
        result.displayed[cell.number] = shown
    return result


def printed_arrays(output: str) -> list[np.ndarray]:
    """Every ``tensor([...])`` / ``array([...])`` / ``tensor(x)`` printed in ``output``."""
    found = []
    for match in re.finditer(r"(?:tensor|array)\((\[.*?\]|-?[\d.e+-]+)[,)]", output, re.DOTALL):
        body = match.group(1)
        if body.count("[") != body.count("]"):
            continue
        found.append(np.array(ast.literal_eval(re.sub(r"(?<=\d)\.(?=[,\]\s])", ".0", body)),
                              dtype=float))
    return found
