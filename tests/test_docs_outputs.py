"""Docs that cannot drift: every block of README.md and docs/*.md that shows what a command or
a piece of code prints is run again and compared with the page, figure by figure (the marker
syntax and the comparison rules are in tests/docs_outputs.py); and every figure a page shows
in a code block is under such a marker, or listed below as input with the reason."""

import re

import pytest
from docs_outputs import (
    DOCS,
    ROOT,
    Block,
    Options,
    code_options,
    console_commands,
    mismatch,
    module_missing,
    parse,
    pycon_failures,
    run_session,
    scratch,
    session_blocks,
    shell,
)

PARSED = {name: parse(name) for name in DOCS}
CHECKS = [check for doc in PARSED.values() for check in doc.checks]
PYCON = [block for doc in PARSED.values() for block in doc.blocks if block.lang == "pycon"]

# blocks with figures that are not output: (document, the block's first line) -> why
INPUT_BLOCKS = {
    ("README.md", "tinyattn/"): "the project's file tree (gpt2.py is a name, not a figure)",
}
# figures in the comments of input code (python, bash): (document, comment) -> why
INPUT_COMMENTS = {
    ("docs/lab.md", "forgot the product rule: σ + x σ (1 − σ)"): "a formula, not a figure",
    ("README.md", "step 100's graph, and the maps of the steps before"):
        "the step asked for two lines above (graph_step=100)",
}

_outputs: dict = {}


def _session_outputs(doc_name: str, session: str) -> dict[int, str]:
    key = (doc_name, session)
    if key not in _outputs:
        blocks = session_blocks(PARSED[doc_name])[session]
        _outputs[key] = run_session([(block.line, block.text) for block in blocks])
    return _outputs[key]


def _command_output(command: str, options: Options) -> str:
    key = (command, options.setup)
    if key not in _outputs:
        where = scratch()
        if options.setup:
            done = shell(options.setup, where)
            assert done.returncode == 0, f"setup {options.setup!r} failed:\n{done.stderr}"
        done = shell(command, where)
        assert done.returncode == options.exit, (
            f"{command!r} exited with {done.returncode}, expected {options.exit}:\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        _outputs[key] = done.stdout
    return _outputs[key]


@pytest.mark.parametrize("check", CHECKS, ids=[check.id for check in CHECKS])
def test_a_documented_output_is_what_its_command_prints(check):
    options = check.options
    if module_missing(options.needs):
        pytest.skip(f"needs {options.needs}")
    if check.source == "code above":
        session = code_options(check.code)
        if module_missing(session.needs):
            pytest.skip(f"needs {session.needs}")
        printed = _session_outputs(check.block.doc, session.session)[check.code.line]
        problem = mismatch(printed, check.block.lines, options)
        assert problem is None, f"{check.id}, printed by the code at line {check.code.line}:\n" \
                                f"{problem}\n--- printed ---\n{printed}"
        return
    commands = console_commands(check.block.lines) if check.source == "console" else []
    if len(commands) == 1 and not options.setup:  # the same command may be shown elsewhere
        (command, shown), = commands
        printed = _command_output(command, options)
        problem = mismatch(printed, shown, options)
        assert problem is None, f"{check.id}, $ {command}:\n{problem}\n--- printed ---\n" \
                                f"{printed}"
        return
    if check.source == "console":
        where = scratch()
        if options.setup:
            assert shell(options.setup, where).returncode == 0, options.setup
        for k, (command, shown) in enumerate(commands):
            done = shell(command, where)
            expected_status = options.exit if k == len(commands) - 1 else 0
            assert done.returncode == expected_status, (command, done.returncode, done.stderr)
            problem = mismatch(done.stdout, shown, options)
            assert problem is None, f"{check.id}, $ {command}:\n{problem}\n--- printed ---\n" \
                                    f"{done.stdout}"
        return
    printed = _command_output(check.source, options)
    problem = mismatch(printed, check.block.lines, options)
    assert problem is None, f"{check.id}, $ {check.source}:\n{problem}\n--- printed ---\n" \
                            f"{printed}"


@pytest.mark.parametrize("block", PYCON, ids=[block.where for block in PYCON])
def test_a_documented_interactive_session_replays_as_shown(block):
    assert pycon_failures(block) == 0


def _comments(block: Block) -> list[str]:
    return [line.split("#", 1)[1].strip() for line in block.lines if "#" in line]


def test_every_figure_in_a_code_block_is_checked_or_input():
    unchecked, used_blocks, used_comments = [], set(), set()
    for doc in PARSED.values():
        for block in doc.blocks:
            if block.marker == "output" or block.lang == "pycon":
                continue
            if block.lang in ("python", "bash", "sh"):
                for comment in _comments(block):
                    if re.search(r"\d", comment):
                        if (doc.name, comment) in INPUT_COMMENTS:
                            used_comments.add((doc.name, comment))
                        else:
                            unchecked.append(f"{block.where}: # {comment}")
                continue
            if any(re.search(r"\d", line) for line in block.lines):
                key = (doc.name, block.lines[0])
                if key in INPUT_BLOCKS:
                    used_blocks.add(key)
                else:
                    unchecked.append(f"{block.where}: {block.lines[0]}")
    assert not unchecked, ("figures in code blocks that no test compares (put the block under "
                           "an output marker, see tests/docs_outputs.py):\n"
                           + "\n".join(unchecked))
    assert used_blocks == set(INPUT_BLOCKS), set(INPUT_BLOCKS) - used_blocks
    assert used_comments == set(INPUT_COMMENTS), set(INPUT_COMMENTS) - used_comments


def test_the_outputs_the_issue_names_are_checked():
    def checked(doc, first_words):
        return any(check.block.doc == doc and any(line.startswith(first_words)
                                                   for line in check.block.lines)
                   for check in CHECKS)

    assert checked("README.md", "scale  factor")  # the lab scale table
    assert checked("docs/lab.md", " #  op              input shapes")  # check_graph
    assert checked("docs/lab.md", "scale  factor")
    assert checked("README.md", "1. Softmax Jacobian")  # walkthrough --second-order
    assert any(check.source.endswith("tinyattn walkthrough") for check in CHECKS)
    assert len(CHECKS) >= 25


def test_the_drift_the_issue_reported_is_caught():
    """The README's lab scale table as it was before this harness (the package's own source as
    the corpus, the autograd core before its redesign) no longer matches what the command
    prints; the page's table does, and a figure moved beyond the stated tolerance does not."""
    check = next(c for c in CHECKS if c.block.doc == "README.md"
                 and c.source == "tinyattn lab scale")
    printed = _command_output(check.source, check.options)
    assert mismatch(printed, check.block.lines, check.options) is None
    stale = ["2 layers, 4 heads of D = 32, batch 8 × 64 characters of tinyattn's source; scales "
             "1/√D = 0.1768, 1/D = 0.03125, 1 = 1, 8 = 8", "...",
             "1/√D   0.1768   0     5.2663  3.158    0.0865  0.0266     6.622e-03        "
             "7.195e-03", "..."]
    assert mismatch(printed, stale, check.options) is not None
    row = next(i for i, line in enumerate(check.block.lines) if line.startswith("1/√D "))
    cells = check.block.lines[row].split()
    for k, moved in ((3, f"{float(cells[3]) * 1.01:.4f}"),  # the loss, 1% off (rtol is 0.1%)
                     (2, "1")):  # the step, an integer
        lines = list(check.block.lines)
        lines[row] = lines[row].replace(f" {cells[k]} ", f" {moved} ", 1)
        assert lines != check.block.lines
        assert mismatch(printed, lines, check.options) is not None, lines[row]


# ------------------------------------------------------- the comparison, on made-up output


def test_figures_are_parsed_whole_and_compared_exactly_by_default():
    exact = Options()
    assert mismatch("loss 2.6036; leak 0\n", ["loss 2.6036; leak 0"], exact) is None
    # a printed string that merely starts with the documented figure is not it
    assert mismatch("leak 0.535\n", ["leak 0"], exact) is not None
    assert mismatch("leak 0.0123\n", ["leak 0.0"], exact) is not None
    assert mismatch("12,345 B\n", ["2,345 B"], exact) is not None
    assert mismatch("loss 2.6037\n", ["loss 2.6036"], exact) is not None
    assert mismatch("loss  2.6036 \n\n", ["loss 2.6036"], exact) is None  # whitespace
    assert mismatch("Loss 2.6036\n", ["loss 2.6036"], exact) is not None  # text is exact
    assert mismatch("W_q 1\n", ["W_k 1"], exact) is not None
    assert mismatch("x dh12\n", ["x dh1"], exact) is not None  # a name is text


def test_rtol_allows_the_stated_relative_difference_and_one_unit_of_rounding():
    loose = Options(rtol=1e-3)
    assert mismatch("loss 5.2700\n", ["loss 5.2663"], loose) is None  # 7e-4 relative
    assert mismatch("loss 5.2800\n", ["loss 5.2663"], loose) is not None  # 2.6e-3
    assert mismatch("|dS| 0.0267\n", ["|dS| 0.0266"], loose) is None  # the last digit
    assert mismatch("|dS| 0.0268\n", ["|dS| 0.0266"], loose) is not None
    assert mismatch("step 1\n", ["step 0"], loose) is not None  # integers stay exact


def test_error_figures_are_upper_bounds_within_a_factor_ten():
    bounds = Options(errors_below=1e-4)
    assert mismatch("err 3.1e-10\n", ["err 2.0e-09"], bounds) is None
    assert mismatch("err 0.0e+00\n", ["err 2.0e-09"], bounds) is None
    assert mismatch("err 1.9e-08\n", ["err 2.0e-09"], bounds) is None
    assert mismatch("err 2.1e-08\n", ["err 2.0e-09"], bounds) is not None
    assert mismatch("err 1.0e-16\n", ["err 0.00e+00"], bounds) is not None  # zero is exact
    assert mismatch("loss 2.7\n", ["loss 2.6"], bounds) is not None  # not an error figure


def test_elided_lines_stand_for_any_lines_and_the_ends_are_anchored():
    printed = "a 1\nb 2\nc 3\nd 4\n"
    exact = Options()
    assert mismatch(printed, ["a 1", "...", "d 4"], exact) is None
    assert mismatch(printed, ["...", "c 3", "..."], exact) is None
    assert mismatch(printed, ["a 1", "b 2", "c 3", "d 4"], exact) is None
    assert mismatch(printed, ["b 2", "..."], exact) is not None  # the first line is a 1
    assert mismatch(printed, ["...", "c 3"], exact) is not None  # the last line is d 4
    assert mismatch(printed, ["a 1", "c 3", "..."], exact) is not None  # b 2 left out
    assert mismatch(printed, ["...", "d 4", "c 3", "..."], exact) is not None  # order


def test_markers_are_read_from_a_page(tmp_path):
    page = ("text\n\n```python\nprint(1 + 1)\n```\n\n<!-- output: code above | rtol=1e-3 -->\n"
            "```\n2\n```\n\n<!-- output: echo 'a | b' | exit=0 -->\n```\na | b\n```\n")
    doc = parse("page.md", page)
    first, second = doc.checks
    assert first.source == "code above" and first.code.lines == ["print(1 + 1)"]
    assert first.options.rtol == 1e-3 and first.block.lines == ["2"]
    assert second.source == "echo 'a | b'" and second.options.exit == 0
    with pytest.raises(ValueError, match="unknown marker option"):
        parse("page.md", "<!-- output: true | rtoll=1 -->\n```\n1\n```\n")


def test_the_scratch_directory_runs_this_trees_tinyattn():
    where = scratch()
    done = shell("python -c 'import tinyattn, sys; print(tinyattn.__file__)'", where)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT / "tinyattn" / "__init__.py")
    assert shell("command -v tinyattn", where).stdout.strip().startswith(str(where))


def test_the_readmes_mutant_counts_are_the_mutants_tools_mutants_defines():
    """The mutation check's paragraph counts the mutants twice ("N of them", "N of N caught");
    both are the number ``tools/mutants.py --list`` reports, with no stale entry."""
    listed = shell("python tools/mutants.py --list", ROOT)
    assert listed.returncode == 0, listed.stderr
    total = re.search(r"^(\d+) mutants; none stale$", listed.stdout, re.MULTILINE)
    assert total, listed.stdout[-500:]
    readme = (ROOT / "README.md").read_text()
    counts = re.findall(r"one at a time — (\d+) of them", readme)
    counts += [x for pair in re.findall(r"(\d+) of (\d+) caught", readme) for x in pair]
    assert len(counts) == 3 and set(counts) == {total.group(1)}, counts
