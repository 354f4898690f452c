"""What README.md and docs/*.md show as printed output, found, rerun and compared.

A checked block is announced by an HTML comment on the line right before its fence:

``<!-- output: COMMAND [| OPTION]... -->``
    the block is what the shell command COMMAND prints on stdout. It runs with bash in a
    scratch directory laid out as the repository (its top-level files and folders linked
    there, so ``examples/…`` and ``tests/…`` resolve and what the command writes stays out of
    the tree), with ``tinyattn`` and ``python`` being this tree's (``python -m tinyattn`` with
    the repository first on ``PYTHONPATH``; the package itself is imported from there, under
    its own path, so numba's on-disk cache serves it).
``<!-- output: console [| OPTION]... -->``
    the block is a shell transcript: each line ``$ COMMAND`` is run (in order, in one scratch
    directory), and the lines up to the next ``$`` line are what it prints.
``<!-- output: code above [| OPTION]... -->``
    the block is what the nearest ```` ```python ```` block above prints. A document's python
    blocks run in order in one interpreter (one namespace), each in its *session*.

Before a python block, ``<!-- code: session=NAME [| needs=MODULE] -->`` puts it in another
session than the document's ``main`` one (``needs=``: skipped when MODULE cannot be
imported), and ``<!-- code: not run | REASON -->`` leaves it out (a file's listing, a
fragment). ```` ```pycon ```` blocks are doctest sessions and are replayed as such.

Options:

``rtol=R``
    a non-integer figure may differ from the document's by ``R`` relative, plus one unit in
    its last printed digit (rounding); for float32 figures, which differ in their last bits
    between CPUs (an AVX2 and an AVX-512 machine sum in different orders). Without it every
    figure must be printed exactly as documented.
``errors-below=T``
    a non-zero documented figure smaller than ``T`` in magnitude is a rounding-error figure
    (a finite-difference error, a residual): it is read as an upper bound, and the printed
    one must be at most ten times it (and may be any smaller, zero included). A documented
    ``0`` stays exactly zero.
``exit=N``
    the exit status the command must have (default 0); in a console block, the last command's
    (the others must succeed).
``setup=COMMAND``
    a shell command run first, in the same scratch directory, whose output is not compared
    (writing a file the documented command reads).
``needs=MODULE``
    skipped when MODULE cannot be imported.

Comparison: blank lines are dropped, whitespace next to a number is ignored and other runs of
whitespace count as one space; every number
(``472,068``, ``-0.068``, ``2.50e-10``) is parsed and compared as a number, everything else
must be equal as text. An integer (no point, no exponent) is always compared exactly. A line
that is only ``...`` stands for any number of lines (zero included); without one at the start
(end), the block must match the output's first (last) lines.

``python tests/docs_outputs.py [DOC[:LINE]]...`` prints what each checked block's command or
code prints now, to regenerate a page after a change.
"""

from __future__ import annotations

import atexit
import doctest
import importlib.util
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<lang>[\w-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>output|code):\s*(?P<body>.*?)\s*-->\s*$")
# a printed number: not glued to a word or a dotted name on its left (``dh1``, ``x_1``,
# ``blocks.0.attn`` are text), thousands separated by commas, fraction, exponent
NUMBER = re.compile(r"(?<![\w.])-?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)"
                    r"(?:[eE][-+]?\d+)?(?![\d,]\d)")
ELISION = "..."


@dataclass
class Block:
    """One fenced block of a document."""

    doc: str
    line: int  # 1-based line of the opening fence
    lang: str
    lines: list[str]
    marker: str | None = None  # "output" or "code"
    marker_body: str = ""

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Options:
    rtol: float | None = None
    errors_below: float | None = None
    exit: int = 0
    setup: str | None = None
    needs: str | None = None
    session: str = "main"
    not_run: bool = False


@dataclass
class Check:
    """An output block and what produces it."""

    block: Block
    source: str  # a shell command, "console" or "code above"
    options: Options
    code: Block | None = None  # the python block above, for "code above"

    @property
    def id(self) -> str:
        return f"{self.block.doc}:{self.block.line}"


@dataclass
class Doc:
    name: str
    blocks: list[Block] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)


def parse_options(parts: list[str]) -> Options:
    options = Options()
    for part in parts:
        key, _, value = (s.strip() for s in part.partition("="))
        if key == "rtol":
            options.rtol = float(value)
        elif key == "errors-below":
            options.errors_below = float(value)
        elif key == "exit":
            options.exit = int(value)
        elif key == "setup":
            options.setup = value
        elif key == "needs":
            options.needs = value
        elif key == "session":
            options.session = value
        elif key:
            raise ValueError(f"unknown marker option {part!r}")
    return options


def split_marker(body: str) -> list[str]:
    """The ``|``-separated parts of a marker, a ``|`` inside quotes (a shell pipe) kept."""
    parts, current, quote = [], "", None
    for char in body:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "|" and not quote:
            parts.append(current.strip())
            current = ""
            continue
        current += char
    parts.append(current.strip())
    return parts


def parse(name: str, text: str | None = None) -> Doc:
    """The fenced blocks of document ``name`` (relative to the repository) and its checks."""
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines() if text is None \
        else text.splitlines()
    doc = Doc(name)
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = opening.group("indent"), opening.group("fence")
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        if end == len(lines):
            raise ValueError(f"{name}:{i + 1}: a block that is never closed")
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip()
                for line in lines[i + 1:end]]
        block = Block(name, i + 1, opening.group("lang"), body)
        marker = MARKER.match(lines[i - 1]) if i else None
        if marker:
            block.marker, block.marker_body = marker.group("kind"), marker.group("body")
        doc.blocks.append(block)
        i = end + 1
    python_above: Block | None = None
    for block in doc.blocks:
        if block.lang == "python":
            python_above = block
        if block.marker != "output":
            continue
        source, *rest = split_marker(block.marker_body)
        check = Check(block, source, parse_options(rest))
        if source == "code above":
            if python_above is None:
                raise ValueError(f"{block.where}: 'output: code above' with no python block above")
            check.code = python_above
        doc.checks.append(check)
    return doc


def code_options(block: Block) -> Options:
    """The session of a python block (``<!-- code: ... -->``)."""
    if block.marker != "code":
        return Options()
    parts = split_marker(block.marker_body)
    if parts[0] == "not run":  # the rest is the reason
        return Options(not_run=True)
    return parse_options(parts)


# ------------------------------------------------------------------------------ comparing


def tokens(line: str) -> list:
    """``line`` as text and numbers, alternating: ``[text, (value, token), text, ...]``; each
    text piece with its runs of whitespace made one space and none at its ends."""
    out: list = []
    position = 0
    for match in NUMBER.finditer(line):
        out.append(" ".join(line[position:match.start()].split()))
        out.append((float(match.group().replace(",", "")), match.group()))
        position = match.end()
    out.append(" ".join(line[position:].split()))
    return out


def last_digit_unit(token: str) -> float:
    """One unit in the last printed digit of ``token`` (``0.0266`` → 1e-4, ``2.5e-10`` →
    1e-11, ``472,068`` → 1)."""
    mantissa, _, exponent = token.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def is_integer(token: str) -> bool:
    return not any(c in token for c in ".eE")


def numbers_agree(printed: float, documented: float, token: str, options: Options) -> bool:
    if math.isnan(printed) or math.isnan(documented):
        return False
    if is_integer(token):
        return printed == documented
    if (options.errors_below is not None and documented != 0
            and abs(documented) < options.errors_below):
        return abs(printed) <= 10 * abs(documented)
    if options.rtol is None:
        return printed == documented
    return abs(printed - documented) <= options.rtol * abs(documented) + last_digit_unit(token)


def line_agrees(printed: str, documented: str, options: Options) -> bool:
    have, want = tokens(printed), tokens(documented)
    if len(have) != len(want):
        return False
    for k, (a, b) in enumerate(zip(have, want)):
        if k % 2 == 0:
            if a != b:
                return False
        elif not numbers_agree(a[0], b[0], b[1], options):
            return False
    return True


def _meaningful(lines: list[str]) -> list[str]:
    return [line for line in lines if line.strip()]


def mismatch(printed: str, documented: list[str], options: Options) -> str | None:
    """None when ``printed`` shows what the ``documented`` lines say; else why not."""
    have = _meaningful(printed.splitlines())
    want = _meaningful(documented)
    segments: list[list[str]] = [[]]
    for line in want:
        if line.strip() == ELISION:
            segments.append([])
        else:
            segments[-1].append(line)
    anchored_start = bool(want) and want[0].strip() != ELISION
    anchored_end = bool(want) and want[-1].strip() != ELISION
    position = 0
    for k, segment in enumerate(segments):
        if not segment:
            continue
        last = k == len(segments) - 1
        starts = [position] if (k == 0 and anchored_start) else range(position, len(have) + 1)
        found = None
        for start in starts:
            if start + len(segment) > len(have):
                break
            if last and anchored_end and start + len(segment) != len(have):
                continue
            if all(line_agrees(have[start + j], segment[j], options)
                   for j in range(len(segment))):
                found = start
                break
        if found is None:
            return explain(have[position:], segment, options)
        position = found + len(segment)
    return None


def explain(have: list[str], segment: list[str], options: Options) -> str:
    """The documented lines that were not found, next to the closest printed ones."""
    best, best_score = 0, -1
    for start in range(max(1, len(have) - len(segment) + 1)):
        score = sum(start + j < len(have) and line_agrees(have[start + j], segment[j], options)
                    for j in range(len(segment)))
        if score > best_score:
            best, best_score = start, score
    report = ["these documented lines are not in the output:"]
    for j, line in enumerate(segment):
        got = have[best + j] if best + j < len(have) else "<no line>"
        sign = " " if line_agrees(got, line, options) else "!"
        report.append(f"{sign} doc:     {line}")
        if sign == "!":
            report.append(f"  printed: {got}")
    return "\n".join(report)


# ------------------------------------------------------------------------------- running


def module_missing(name: str | None) -> bool:
    return name is not None and importlib.util.find_spec(name) is None


def scratch() -> Path:
    """A fresh directory laid out as the repository (its top-level entries but the package
    linked), with a ``.bin/`` of ``python`` and ``tinyattn`` that run this tree's tinyattn."""
    where = Path(tempfile.mkdtemp(prefix="tinyattn-docs-"))
    atexit.register(shutil.rmtree, where, True)
    for entry in ROOT.iterdir():
        # not tinyattn/: imported from PYTHONPATH under its own path, numba's on-disk cache
        # (keyed by the source file's path) serves it
        if entry.name not in ("tinyattn", "runs") and not entry.name.startswith("."):
            (where / entry.name).symlink_to(entry)
    shims = Path(tempfile.mkdtemp(prefix="tinyattn-docs-bin-"))
    atexit.register(shutil.rmtree, shims, True)
    for name, command in (("python", f'exec "{sys.executable}" "$@"'),
                          ("tinyattn", f'exec "{sys.executable}" -m tinyattn "$@"')):
        (shims / name).write_text(f"#!/bin/sh\n{command}\n")
        (shims / name).chmod(0o755)
    (where / ".bin").symlink_to(shims)
    return where


def environment(where: Path) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{where / '.bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"]
                                     if env.get("PYTHONPATH") else "")
    env["TINYATTN_QUIET_COMPILE"] = "1"
    env["MPLBACKEND"] = "Agg"
    env.pop("COLUMNS", None)
    return env


def shell(command: str, where: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=where, env=environment(where),
                          capture_output=True, text=True, timeout=timeout)


def console_commands(lines: list[str]) -> list[tuple[str, list[str]]]:
    """The ``$ command`` lines of a console block, each with the lines it prints."""
    pairs: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif not pairs:
            raise ValueError(f"a console block must start with '$ ': {line!r}")
        else:
            pairs[-1][1].append(line)
    return pairs


SENTINEL = "\x00--- block {} ---\x00"
DRIVER = textwrap.dedent("""\
    import json, sys
    blocks = json.load(open(sys.argv[1]))
    namespace = {"__name__": "__main__"}
    for index, code in blocks:
        print(%r.format(index), flush=True)
        exec(compile(code, f"<doc block {index}>", "exec"), namespace)
        sys.stdout.flush()
    """) % SENTINEL


def run_session(blocks: list[tuple[int, str]]) -> dict[int, str]:
    """Run python blocks ``(line, code)`` in order in one interpreter; the stdout of each."""
    where = scratch()
    (where / ".blocks.json").write_text(json.dumps(blocks))
    (where / ".driver.py").write_text(DRIVER)
    done = shell(f"{shlex.quote(sys.executable)} .driver.py .blocks.json", where)
    if done.returncode:
        raise AssertionError(f"the documented code failed (exit {done.returncode}):\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    outputs: dict[int, str] = {}
    pieces = re.split("\x00--- block (\\d+) ---\x00\n", done.stdout)
    for index, text in zip(pieces[1::2], pieces[2::2]):
        outputs[int(index)] = text
    return outputs


def session_blocks(doc: Doc) -> dict[str, list[Block]]:
    sessions: dict[str, list[Block]] = {}
    for block in doc.blocks:
        if block.lang != "python":
            continue
        options = code_options(block)
        if options.not_run:
            continue
        sessions.setdefault(options.session, []).append(block)
    return sessions


def pycon_failures(block: Block) -> int:
    test = doctest.DocTestParser().get_doctest(block.text + "\n", {}, block.where, block.doc,
                                               block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=sys.stdout.write)
    return runner.failures if runner.tries else 1


def main(argv: list[str]) -> None:
    """``python tests/docs_outputs.py [DOC[:LINE]]...``: print what each checked block's
    command or code prints now (to regenerate a page's blocks), and whether it agrees."""
    wanted = argv or DOCS
    for name in DOCS:
        doc = parse(name)
        sessions: dict[str, dict[int, str]] = {}
        for check in doc.checks:
            if not any(w == name or w == check.id for w in wanted):
                continue
            options = check.options
            if check.source == "code above":
                session = code_options(check.code).session
                if session not in sessions:
                    blocks = session_blocks(doc)[session]
                    sessions[session] = run_session([(b.line, b.text) for b in blocks])
                printed = sessions[session][check.code.line]
            elif check.source == "console":
                where = scratch()
                if options.setup:
                    shell(options.setup, where)
                printed = "".join(f"$ {command}\n" + shell(command, where).stdout
                                  for command, _ in console_commands(check.block.lines))
                problem = None
            else:
                where = scratch()
                if options.setup:
                    shell(options.setup, where)
                printed = shell(check.source, where).stdout
            if check.source == "console":
                problem = "(console: run the test)"
            else:
                problem = mismatch(printed, check.block.lines, options)
            print(f"===== {check.id}  {check.source}  "
                  f"{'agrees' if problem is None else 'DIFFERS'}")
            print(printed)


if __name__ == "__main__":
    main(sys.argv[1:])
