"""Files that documented commands read: ``python tests/doc_fixtures.py NAME [DIR]`` writes the
solution file of fixture NAME into DIR (default ``ex``), as a learner would have written it.

docs/lab.md grades these with ``tinyattn exercise check`` (tests/test_docs_outputs.py reruns
the command and compares its output with the page).
"""

import sys
from pathlib import Path

from test_exercises import NUMPY_SOFTMAX, SOLUTIONS, solution_text

# fixture -> (exercise, the replacements made in the right solution)
FIXTURES = {
    "attention_head_without_scale": (
        "attention_head", ("        dq = ctx.scale * ds @ k", "        dq = ds @ k")),
    "softmax_through_numpy": ("softmax", (SOLUTIONS["softmax"], NUMPY_SOFTMAX)),
}


def main(name: str, directory: str = "ex") -> None:
    exercise, replacement = FIXTURES[name]
    path = Path(directory) / f"{exercise}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(solution_text(exercise, replacement))


if __name__ == "__main__":
    main(*sys.argv[1:])
