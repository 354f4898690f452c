"""The layers of the package: no module imports one from a layer above its own.

The table below is the package's architecture, bottom first (README.md, "Project layout").
Every import statement in ``tinyattn/`` counts, at module level or inside a function; imports
under ``if TYPE_CHECKING:`` (annotations only) do not. The one pair allowed to import each
other is the Tensor and the ops its methods call (a backward rule is written in tensor ops).
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tinyattn"

LAYERS = [
    ("ground floor", ["errors", "validation", "dtypes", "devices", "tables", "printing",
                      "random", "memory", "missing", "notices"]),
    ("kernels", ["kernels"]),
    ("autograd", ["autograd"]),
    ("tensor", ["tensor", "tensor_methods", "creation"]),
    ("ops", ["ops", "gradcheck", "linalg"]),
    ("functional", ["functional"]),
    ("layers, optimizers, data, files", ["nn", "optim", "utils", "serialization",
                                         "restricted_pickle", "cuda",
                                         "distributed", "backends", "amp", "testing",
                                         "compiler"]),
    ("study tools", ["inspect", "curvature", "study"]),
    ("models", ["models", "tasks"]),
    ("interop, training, lessons", ["interop", "gpt2", "checks", "train", "walkthrough",
                                    "exercises", "warmup"]),
    ("entry points", ["cli", "run", "__main__", "__init__"]),
]
ALLOWED = {("tensor", "ops")}
"""(importer layer, imported layer) pairs allowed to point up."""


def layer_of(module: str) -> tuple[int, str]:
    """The layer of ``tinyattn.<module>`` by its longest matching prefix."""
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        for index, (name, members) in enumerate(LAYERS):
            if prefix in members:
                return index, name
    raise KeyError(module)


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """``(line, tinyattn module)`` of every import in the ``source`` of ``tinyattn.<module>``
    outside TYPE_CHECKING blocks."""
    tree = ast.parse(source)
    package = module.split(".") if is_package else module.split(".")[:-1]
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name[len("tinyattn."):]) for a in node.names
                      if a.name.startswith("tinyattn.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.startswith("tinyattn."):
                target = node.module[len("tinyattn."):]
            else:
                continue
            if not target:  # "from . import x" in the package's own __init__
                found += [(node.lineno, a.name) for a in node.names]
            elif node.module is None:  # "from .. import x": x may be a module
                found += [(node.lineno, f"{target}.{a.name}".lstrip(".")) for a in node.names]
            else:
                found.append((node.lineno, target))
    return found


def test_every_module_has_a_layer():
    unknown = []
    for path in sorted(PACKAGE.rglob("*.py")):
        try:
            layer_of(module_name(path))
        except KeyError:
            unknown.append(module_name(path))
    assert not unknown, f"modules missing from LAYERS: {unknown}"


def test_no_module_imports_from_a_higher_layer():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = layer_of(module_name(path))
        for line, target in imports(path.read_text(), module_name(path),
                                    path.name == "__init__.py"):
            try:
                theirs = layer_of(target)
            except KeyError:
                theirs = layer_of(target.rsplit(".", 1)[0])
            if theirs[0] > own[0] and (own[1], theirs[1]) not in ALLOWED:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({own[1]}) imports "
                              f"tinyattn.{target} ({theirs[1]})")
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("source, expected", [
    ("from ..ops import add\n", ["ops"]),
    ("from .. import ops, nn\n", ["ops", "nn"]),
    ("from .engine import grad\n", ["autograd.engine"]),
    ("import tinyattn.nn.module\n", ["nn.module"]),
    ("def f():\n    from ..inspect import trace\n", ["inspect"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..tensor import T\n", []),
])
def test_the_import_reader_resolves_relative_absolute_and_late_imports(source, expected):
    assert [target for _, target in imports(source, "autograd.function")] == expected
    assert [layer_of(t)[1] for t in expected] == [
        {"ops": "ops", "nn": "layers, optimizers, data, files", "autograd.engine": "autograd",
         "nn.module": "layers, optimizers, data, files", "inspect": "study tools"}[t]
        for t in expected]
