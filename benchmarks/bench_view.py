"""The explorer's page at scale: size, first render and selecting a node, in headless Chromium.

Targets (the issue's): page ≤ 5 MB, first render ≤ 2 s, selecting a node ≤ 100 ms, for

* the W3 model's graph (``bench_train_step.py``'s model and batch: 2 blocks, 4 heads, width 128,
  context 64, batch 16, dropout 0.1), captured by ``ta.inspect.recording`` at the
  ``--w3-step``-th training step with the attention maps of every ``--w3-every``-th step before
  it (the training view);
* the nanoGPT recipe's graph: nanoGPT's own ``train.py`` with the CPU recipe of its README
  (``config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20
  --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128
  --dropout=0.0``) run unchanged by ``tinyattn run --inspect-step N --stop-after-inspect``.
  nanoGPT is not part of tinyattn: give a checkout with ``--nanogpt DIR`` whose
  ``data/shakespeare_char`` has been prepared (its ``prepare.py``); without it this row is
  skipped.

Per page: its size; Python's time to capture the step and write the page; the first render —
``performance.now()`` when the page's script has drawn it (``document.body.dataset.ready``),
i.e. from the start of navigation, over ``--loads`` fresh loads of the ``file://`` URL (median
and worst); selecting a node — the page's own measure of ``select()`` up to a forced layout
(``tinyattnView.lastSelectMs``), and the time from the call to the second animation frame after
it (the frame that shows it), over every node (median and worst). Chromium runs headless with
the flags of ``tinyattn.inspect.browser``, on this machine's cores (2). Not a test: figures go
to ``results_view.md`` (``--out``), newest first.

Run: ``python benchmarks/bench_view.py [--nanogpt DIR] [--loads 5] [--w3-step 48]
[--w3-every 3]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from timing import load_average, machine_header, prepend_section  # noqa: E402

TITLE = "# The explorer's page: size, first render, selecting a node (newest first)"
NANOGPT_RECIPE = ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False",
                  "--eval_iters=20", "--log_interval=1", "--block_size=64", "--batch_size=12",
                  "--n_layer=4", "--n_head=4", "--n_embd=128", "--max_iters=2000",
                  "--lr_decay_iters=2000", "--dropout=0.0"]
TARGETS = {"size": 5e6, "render": 2000.0, "select": 100.0}


def w3_page(folder: Path, step: int, every: int) -> tuple[Path, float]:
    """The W3 model's page at training step ``step``; the seconds to train, capture and write."""
    from bench_train_step import batch, tinyattn_model

    import tinyattn as ta
    from tinyattn import inspect

    model = tinyattn_model()
    idx, targets = (ta.tensor(a) for a in batch())
    optimizer = ta.optim.AdamW(model.parameters(), lr=3e-4)
    begin = time.perf_counter()
    with inspect.recording(graph_step=step, every=every,
                           title=f"W3: training step {step}") as rec:
        for _ in range(step):
            _, loss = model(idx, targets=targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    path = rec.view().save(folder / "w3.html")
    return path, time.perf_counter() - begin


def nanogpt_page(folder: Path, checkout: Path, step: int) -> tuple[Path, float]:
    """nanoGPT's train.py, its CPU recipe, inspected at its ``step``-th backward."""
    out = folder / "nanogpt"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TINYATTN_QUIET_COMPILE="1")
    begin = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "tinyattn", "run", "--inspect-step", str(step), "--out",
         str(out), "--stop-after-inspect", "train.py", *NANOGPT_RECIPE],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - begin
    if result.returncode != 0 or not (out / "view.html").is_file():
        raise RuntimeError(f"nanoGPT's train.py failed ({result.returncode}):\n"
                           f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return out / "view.html", seconds


def measure(path: Path, loads: int) -> dict[str, float]:
    """First render over ``loads`` fresh loads; select() over every node of the page."""
    from tinyattn.inspect import browser

    driver = browser.headless_chromium(1400, 1000)
    try:
        renders = []
        for _ in range(loads):
            driver.get("about:blank")
            browser.open_page(driver, path, timeout=120)
            renders.append(driver.execute_script("return window.tinyattnView.renderMs"))
        keys = driver.execute_script(
            "return window.tinyattnView.data.nodes.map(function (n) { return 'n' + n.index; })"
            ".concat(window.tinyattnView.data.leaves.map(function (l) { return l.id; }))")
        selects, framed = [], []
        for key in keys:
            framed.append(driver.execute_async_script(
                "var done = arguments[arguments.length - 1], t = performance.now();"
                "window.tinyattnView.select(arguments[0]);"
                "requestAnimationFrame(function () { requestAnimationFrame(function () {"
                "done(performance.now() - t); }); });", key))
            selects.append(driver.execute_script("return window.tinyattnView.lastSelectMs"))
        errors = browser.console_errors(driver) + driver.execute_script(
            "return window.tinyattnView.errors")
        nodes = driver.execute_script("return document.querySelectorAll('#graph g.node').length")
    finally:
        driver.quit()
    if errors:
        raise RuntimeError(f"{path}: JavaScript errors: {errors}")
    return {"size": path.stat().st_size, "nodes": nodes, "items": len(keys),
            "render_median": statistics.median(renders), "render_max": max(renders),
            "select_median": statistics.median(selects), "select_max": max(selects),
            "framed_median": statistics.median(framed), "framed_max": max(framed)}


def chromium_version() -> str:
    from tinyattn.inspect.browser import find_chromium

    binary, _ = find_chromium()
    if binary is None:
        return "no Chromium"
    return subprocess.run([binary, "--version"], capture_output=True, text=True,
                          check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nanogpt", type=Path, help="a nanoGPT checkout (data prepared)")
    parser.add_argument("--nanogpt-step", type=int, default=5,
                        help="which backward() of train.py to inspect (5)")
    parser.add_argument("--w3-step", type=int, default=48,
                        help="the W3 training step whose graph is captured (48)")
    parser.add_argument("--w3-every", type=int, default=3,
                        help="record the attention maps of every K-th W3 step (3)")
    parser.add_argument("--loads", type=int, default=5, help="fresh page loads per page (5)")
    parser.add_argument("--out", type=Path, default=HERE / "results_view.md")
    args = parser.parse_args()
    from tinyattn.train import set_threads

    set_threads(0)  # the machine's cores
    folder = Path(tempfile.mkdtemp(prefix="bench-view-"))
    rows, loads_seen = [], [load_average()]
    try:
        pages = [("W3 model", f"step {args.w3_step}, maps every {args.w3_every} steps",
                  *w3_page(folder, args.w3_step, args.w3_every))]
        loads_seen.append(load_average())
        if args.nanogpt is not None:
            pages.append(("nanoGPT recipe", f"train.py, backward call {args.nanogpt_step}",
                          *nanogpt_page(folder, args.nanogpt, args.nanogpt_step)))
            loads_seen.append(load_average())
        for name, what, path, seconds in pages:
            figures = measure(path, args.loads)
            loads_seen.append(load_average())
            met = (figures["size"] <= TARGETS["size"]
                   and figures["render_max"] <= TARGETS["render"]
                   and figures["select_max"] <= TARGETS["select"]
                   and figures["framed_max"] <= TARGETS["select"])
            rows.append(
                f"| {name} ({what}) | {figures['nodes']} nodes, {figures['items']} with the "
                f"parameters | {figures['size'] / 1e6:.2f} MB | {seconds:.1f} s | "
                f"{figures['render_median']:.0f} / {figures['render_max']:.0f} ms | "
                f"{figures['select_median']:.1f} / {figures['select_max']:.1f} ms | "
                f"{figures['framed_median']:.1f} / {figures['framed_max']:.1f} ms | "
                f"{'yes' if met else 'NO'} |")
            print(rows[-1], flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    command = "python benchmarks/bench_view.py" + (
        f" --nanogpt {args.nanogpt}" if args.nanogpt else "") + \
        f" --loads {args.loads} --w3-step {args.w3_step} --w3-every {args.w3_every}"
    section = "\n".join([
        f"## {machine_header()}", "", f"{chromium_version()}, headless; load average while "
        f"measuring: {', '.join(loads_seen)}", "", f"Command: `{command}`", "",
        "| page | graph | page size | Python: train, capture, write | first render, median "
        "/ worst | select(), median / worst | select → 2nd frame, median / worst | targets "
        "met (≤ 5 MB, ≤ 2 s, ≤ 100 ms) |", "|---|---|---:|---:|---:|---:|---:|---|",
        *rows])
    prepend_section(args.out, TITLE, section)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
