"""W1: throughput of tinyattn's matmul kernel against numpy (OpenBLAS), float32 and float64.

Shapes: 512³; the Linear shapes of W3, each with its two backward products (``g @ Bᵀ`` and
``Aᵀ @ g``, read through transposed views as autograd passes them); the attention shapes of W2
as batched matmuls. The parent process first checks that both sides agree on every case. Then
each side runs alone in a fresh process (both with ``NUMBA_NUM_THREADS`` and
``OPENBLAS_NUM_THREADS`` set to ``--threads``, both importing tinyattn so that the allocator
settings match), alternating tinyattn, numpy, numpy, tinyattn, ... over ``--rounds`` rounds;
each process times every case (median of ``--calls`` calls after a warm-up). The ratio of a
case is the median over rounds of numpy's median time ÷ tinyattn's (> 1: tinyattn faster).

Run: ``python benchmarks/bench_matmul.py [--threads 2] [--rounds 7] [--calls 21]
[--out benchmarks/results_matmul.md]``. ``--out`` puts the table at the top of the file,
replacing an earlier table of the same CPU and vector unit and keeping the other machines'.

``--large`` times, the same way, the Linear products of larger models instead, whose operands
are megabytes each: nanoGPT's default shakespeare_char configuration (64 sequences of 256
tokens, width 384, MLP 1536) and GPT-2 small's MLP over 4096 tokens (768, 3072), each forward
product with its two backward ones. ``--out`` puts that table after the machine's W1 table.

``--w4`` times W4's products against PyTorch's (MKL) instead of numpy's, float32: the 15
product shapes of one iteration of ``gpt_script.py`` (nanoGPT's CPU recipe: 12 × 64 = 768
tokens, width 128, MLP 512, a head of 65), each ``Linear``'s forward ``x @ Wᵀ`` and its two
backward products ``g @ W`` and ``gᵀ @ x``, read through transposed views as autograd passes
them. Besides each shape it gives the sum over one iteration (each shape times the number of
layers that run it), the products' share of a W4 iteration on either side. ``--out`` puts that
table after the machine's W1 table.

``--alternatives [--tiles 14x2x64,...]`` instead compares design alternatives at one thread,
on the forward W1 products, two with a B of several MiB and products ``x @ Wᵀ`` of a few rows
with GPT-2's weights: copies of the kernel module with another register tile (rows × vectors ×
vector bytes), with every B packed, with a transposed B always packed before the product (not
copied by the tasks from its columns), with A's rows split between tasks whenever a wide
transposed B has few tile columns (so that B is packed first), with a transposed B copied into
panels value by value rather than in blocks transposed in registers, or with A copied first, each
compiled
into a temporary directory, are timed
in one process interleaved with numpy (one thread each, so no thread pools compete), rounds
alternating in order; each cell is the median GF/s and, in brackets, the median over rounds
of numpy time ÷ that variant's time.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

LINEAR_SHAPES = [(1024, 128, 384), (1024, 128, 512), (1024, 512, 128)]  # (M, K, N)
BATCHED_SHAPES = [(64, 64, 32, 64), (64, 256, 64, 256)]  # (batch, M, K, N)
# --large only: Linear products of nanoGPT's default config and of GPT-2 small's MLP (M, K, N)
LARGE_SHAPES = [(16384, 384, 1536), (16384, 1536, 384), (4096, 768, 3072), (4096, 3072, 768)]
WIDE_B_SHAPES = [(192, 512, 4096), (256, 2048, 2048)]  # --alternatives only: B far beyond L2
# --alternatives only: x @ Wᵀ with a few rows of x (a prompt, a generation step without a
# cache) against GPT-2's weights, the 50257 × 768 output head among them, and as in sampling
# from a small GPT (width 128)
FEW_ROWS_WT_SHAPES = [(8, 768, 50257), (64, 768, 50257), (8, 768, 2304), (8, 3072, 768),
                      (100, 768, 3072), (16, 128, 128), (64, 128, 384), (64, 512, 128)]
# --w4 only: W4's Linears, (out features, in features, how many an iteration runs), over
# 12 sequences of 64 tokens: per block the packed q, k, v, the attention's and the MLP's
# projections, then the tied output head
W4_TOKENS = 12 * 64
W4_LINEARS = [(384, 128, 4), (128, 128, 4), (512, 128, 4), (128, 512, 4), (65, 128, 1)]
DTYPES = ("float32", "float64")
TITLE = "## W1 — matmul kernel"


def cases(dtype: str, large: bool = False) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, a, b) for every W1 product, or with ``large`` every product of
    ``LARGE_SHAPES``; inputs standard normal in ``dtype`` (seeded)."""
    rng = np.random.default_rng(0)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(dtype)

    out = [] if large else [("512×512 · 512×512", normal(512, 512), normal(512, 512))]
    for m, k, n in LARGE_SHAPES if large else LINEAR_SHAPES:
        a, b, g = normal(m, k), normal(k, n), normal(m, n)
        out.append((f"{m}×{k} · {k}×{n}", a, b))
        out.append((f"{m}×{n} · ({k}×{n})ᵀ  [g @ Bᵀ]", g, b.T))
        out.append((f"({m}×{k})ᵀ · {m}×{n}  [Aᵀ @ g]", a.T, g))
    for batch, m, k, n in [] if large else BATCHED_SHAPES:
        out.append((f"{batch} × {m}×{k} · {k}×{n}", normal(batch, m, k), normal(batch, k, n)))
    return out


def w4_cases() -> list[tuple[str, np.ndarray, np.ndarray, int]]:
    """(label, a, b, count) for each of W4's products (float32, seeded): a Linear's forward
    ``x @ Wᵀ``, ``g @ W`` and ``gᵀ @ x``, and how many of each one iteration runs."""
    rng = np.random.default_rng(0)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    out = []
    for n_out, n_in, count in W4_LINEARS:
        x, w, g = normal(W4_TOKENS, n_in), normal(n_out, n_in), normal(W4_TOKENS, n_out)
        m = W4_TOKENS
        out.append((f"{m}×{n_in} · ({n_out}×{n_in})ᵀ  [x @ Wᵀ]", x, w.T, count))
        out.append((f"{m}×{n_out} · {n_out}×{n_in}  [g @ W]", g, w, count))
        out.append((f"({m}×{n_out})ᵀ · {m}×{n_in}  [gᵀ @ x]", g.T, x, count))
    return out


def flops(a: np.ndarray, b: np.ndarray) -> float:
    """Floating-point operations of ``a @ b`` (2 per multiply-add)."""
    out_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    return 2.0 * float(np.prod(out_shape)) * a.shape[-1]


def child(side: str, dtype: str, calls: int, large: bool, w4: bool, threads: int) -> None:
    """In a fresh process: median milliseconds of each case, and the first calls' seconds.
    Every side imports tinyattn, so that the processes start alike."""
    from tinyattn.kernels.matmul import matmul

    work = [case[1:3] for case in w4_cases()] if w4 else \
        [case[1:] for case in cases(dtype, large)]
    if side == "torch":
        import torch

        torch.set_num_threads(threads)
        product = torch.matmul
        work = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in work]  # views kept
    else:
        product = matmul if side == "tinyattn" else np.matmul
    start = time.perf_counter()
    for a, b in work:
        product(a, b)
    first_calls = time.perf_counter() - start
    medians = []
    for a, b in work:
        for _ in range(3):
            product(a, b)
        times = []
        for _ in range(calls):
            begin = time.perf_counter()
            product(a, b)
            times.append(time.perf_counter() - begin)
        medians.append(float(np.median(times)) * 1e3)
    print(json.dumps({"ms": medians, "first_calls_s": first_calls}))


def run_child(side: str, dtype: str, calls: int, threads: int, large: bool,
              w4: bool = False) -> dict:
    env = {**os.environ, "NUMBA_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", side, "--dtype", dtype,
         "--calls", str(calls), "--threads", str(threads), *(["--large"] if large else []),
         *(["--w4"] if w4 else [])],
        capture_output=True, text=True, check=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def check_agreement(dtype: str, work: list) -> None:
    """Every case ``(label, a, b, ...)`` of ``work``: tinyattn within float rounding of numpy,
    relative to ``|a| @ |b|``."""
    from tinyattn.kernels.matmul import matmul

    tolerance = 1e-5 if dtype == "float32" else 1e-12
    for label, a, b, *_ in work:
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        if not np.all(np.abs(matmul(a, b) - np.matmul(a, b)) <= tolerance * scale):
            raise SystemExit(f"W1: tinyattn and numpy disagree on {label} {dtype}")


def cpu_lines() -> list[str]:
    """The machine, the vector unit numba targets, and the matmul's tile and blocking."""
    from timing import machine_header

    from tinyattn.kernels.cpu import data_caches, vector_unit
    from tinyattn.kernels.matmul import TILE, blocking

    caches = data_caches()
    tiles = "; ".join(
        f"{dtype} tile {TILE.rows}×{TILE.columns(np.dtype(dtype).itemsize)}, "
        f"kc {blocking(caches, TILE, np.dtype(dtype).itemsize).kc}"
        for dtype in DTYPES)
    return [
        machine_header(),
        "",
        f"Vector unit: {vector_unit().describe()} · L1d {caches.l1 // 1024} KiB, "
        f"L2 {caches.l2 // 1024} KiB per core · {tiles}",
    ]


def comparison_cells(gflop: float, ours: np.ndarray, ref: np.ndarray) -> str:
    """``tinyattn GF/s | reference GF/s | ratio | ratio range |`` from each round's
    milliseconds of the two sides (ratio: reference time ÷ tinyattn time, median over
    rounds)."""
    ratios = ref / ours
    return (f"{gflop / np.median(ours) * 1e3:.1f} | {gflop / np.median(ref) * 1e3:.1f} | "
            f"{np.median(ratios):.2f}× | {ratios.min():.2f}–{ratios.max():.2f} |")


def load_line(before: tuple, after: tuple) -> str:
    """The load averages before and after a run, for a table's footer."""
    return (f"Load average (1, 5, 15 min): before {', '.join(f'{x:.1f}' for x in before)}; "
            f"after {', '.join(f'{x:.1f}' for x in after)} ({os.cpu_count()} CPUs).")


def table(args: argparse.Namespace) -> str:
    for dtype in DTYPES:
        check_agreement(dtype, cases(dtype, args.large))
    load_before = os.getloadavg()
    rows, first_calls = [], {}
    for dtype in DTYPES:
        work = cases(dtype, args.large)
        rounds = {"tinyattn": [], "numpy": []}
        for r in range(args.rounds):
            order = ("tinyattn", "numpy") if r % 2 == 0 else ("numpy", "tinyattn")
            for side in order:
                rounds[side].append(run_child(side, dtype, args.calls, args.threads,
                                              args.large))
        first_calls[dtype] = rounds["tinyattn"][0]["first_calls_s"]
        for i, (label, a, b) in enumerate(work):
            ours = np.array([run["ms"][i] for run in rounds["tinyattn"]])
            ref = np.array([run["ms"][i] for run in rounds["numpy"]])
            rows.append(f"| {label} | {dtype} | "
                        + comparison_cells(flops(a, b) / 1e9, ours, ref))
    load_after = os.getloadavg()
    command = (f"python benchmarks/bench_matmul.py {'--large ' if args.large else ''}"
               f"--threads {args.threads} --rounds {args.rounds} --calls {args.calls}")
    lines = [
        *cpu_lines(),
        "",
        f"Command: `{command}` · first calls in a fresh process (numba cache load, all "
        "shapes): " + ", ".join(f"{d} {s:.1f} s" for d, s in first_calls.items()),
        "",
        "| shape (a · b) | dtype | tinyattn GF/s | numpy GF/s | ratio | ratio range |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"{args.threads} threads each side, each side alone in a fresh process, {args.rounds} "
        f"alternating rounds of {args.calls} timed calls per case. GF/s: median over rounds. "
        "ratio: median over rounds of numpy time ÷ tinyattn time (> 1: tinyattn faster); "
        "range: lowest and highest round.",
        load_line(load_before, load_after),
    ]
    return "\n".join(lines)


def w4_table(args: argparse.Namespace) -> str:
    """W4's products, tinyattn against torch, each side in its own processes (module doc)."""
    work = w4_cases()
    check_agreement("float32", work)
    load_before = os.getloadavg()
    rounds = {"tinyattn": [], "torch": []}
    for r in range(args.rounds):
        for side in ("tinyattn", "torch") if r % 2 == 0 else ("torch", "tinyattn"):
            rounds[side].append(run_child(side, "float32", args.calls, args.threads, False,
                                          w4=True))
    load_after = os.getloadavg()
    ms = {side: np.array([run["ms"] for run in runs]) for side, runs in rounds.items()}  # (r, c)
    counts = np.array([count for *_, count in work])
    rows = []
    for i, (label, a, b, count) in enumerate(work):
        rows.append(f"| {label} | {count} | "
                    + comparison_cells(flops(a, b) / 1e9, ms["tinyattn"][:, i], ms["torch"][:, i]))
    iteration = {side: times @ counts for side, times in ms.items()}  # ms per round
    ratios = iteration["torch"] / iteration["tinyattn"]
    rows.append(f"| one iteration's products (ms: Σ count × median) | {counts.sum()} | "
                f"{np.median(iteration['tinyattn']):.2f} ms | "
                f"{np.median(iteration['torch']):.2f} ms | {np.median(ratios):.2f}× | "
                f"{ratios.min():.2f}–{ratios.max():.2f} |")
    command = (f"python benchmarks/bench_matmul.py --w4 --threads {args.threads} "
               f"--rounds {args.rounds} --calls {args.calls}")
    return "\n".join([
        *cpu_lines(),
        "",
        f"Command: `{command}`",
        "",
        "| product (float32) | per iteration | tinyattn GF/s | torch GF/s | ratio | "
        "ratio range |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"{args.threads} threads each side, each side alone in a fresh process, {args.rounds} "
        f"alternating rounds of {args.calls} timed calls per product. GF/s: median over "
        "rounds. ratio: median over rounds of torch time ÷ tinyattn time (> 1: tinyattn "
        "faster); range: lowest and highest round. The last row sums each round's medians "
        "over one iteration's products.",
        load_line(load_before, load_after),
    ])


def machine_heading() -> str:
    """``### <CPU model> — <vector unit>``: the heading that one machine's table goes under."""
    from timing import machine_header

    from tinyattn.kernels.cpu import vector_unit

    model = machine_header().split(" · ")[1]
    unit = vector_unit()
    return f"### {model} — {unit.cpu_name}, {8 * unit.vector_bytes}-bit vectors"


def write_results(path: Path, heading: str, body: str) -> None:
    """Put ``body`` under ``heading`` in ``path``: first if new, else in place of the older
    section with that heading; the other sections (other machines') are kept.

    Sections start with ``### ``; a machine's main table comes before its other sections.
    """
    sections = []
    if path.exists():
        sections = [f"### {part.strip()}" for part in path.read_text().split("\n### ")[1:]]
    new = f"{heading}\n\n{body}"
    headings = [section.splitlines()[0] for section in sections]
    if heading in headings:
        sections[headings.index(heading)] = new
    else:  # after its machine's main table if there is one, else first
        owners = [i + 1 for i, other in enumerate(headings) if heading.startswith(other)]
        sections.insert(max(owners, default=0), new)
    path.write_text("\n\n".join([TITLE, *sections]) + "\n")


KERNEL = Path(__file__).resolve().parent.parent / "tinyattn" / "kernels" / "matmul.py"
_TILE_LINE = "TILE = micro_tile(vector_unit())"
_B_IN_PLACE = "    if b3.flags.c_contiguous and n % nr == 0:"
_A_LAYOUT = "    a_transposed = not a3.flags.c_contiguous\n"
_B_COLUMNS = "    elif not b3.flags.c_contiguous and m_blocks == 1 and b3.shape[0] == out.shape[0]:"
_EVEN_SHARE = "            out.shape[0] * n_blocks % threads == 0:"
_BLOCK_TRANSPOSE = ("        for p in range(0, blocked, lanes):\n"
                    "            transpose_block(columns, first + g, p, panel, row0 + p, g)\n")


def kernel_variants(tiles: list[tuple[int, int, int]]) -> dict[str, str]:
    """Name → source of each variant of the kernel module (imports made absolute)."""
    source = KERNEL.read_text().replace("\nfrom .", "\nfrom tinyattn.kernels.")
    for marker in (_TILE_LINE, _B_IN_PLACE, _A_LAYOUT, _B_COLUMNS, _EVEN_SHARE, _BLOCK_TRANSPOSE):
        if marker not in source:
            raise SystemExit(f"bench_matmul: the kernel no longer contains {marker!r}")
    variants = {"kernel as is": source}
    for rows, vectors, width in tiles:
        variants[f"tile {rows}×{vectors}×{8 * width}-bit"] = source.replace(
            _TILE_LINE, f"TILE = TileShape({rows}, {vectors}, {width})")
    variants["B always packed"] = source.replace(_B_IN_PLACE, "    if False:").replace(
        _B_COLUMNS, "    elif False:")
    variants["Bᵀ packed first"] = source.replace(_B_COLUMNS, "    elif False:")
    variants["A's rows split for few Bᵀ columns"] = source.replace(_EVEN_SHARE,
                                                                  "            False:")
    variants["Bᵀ copied value by value"] = source.replace(_BLOCK_TRANSPOSE, (
        "        for p in range(blocked):\n"
        "            for q in range(lanes):\n"
        "                panel[row0 + p, g + q] = columns[first + g + q, p]\n"))
    variants["A copied first"] = source.replace(
        _A_LAYOUT, "    a3 = np.ascontiguousarray(a3.swapaxes(1, 2)).swapaxes(1, 2)\n" + _A_LAYOUT)
    return variants


def alternatives(args: argparse.Namespace) -> str:
    """Interleaved single-thread comparison of kernel variants with numpy (see module doc)."""
    from tinyattn.kernels.matmul import TILE

    half_width = [(TILE.rows, TILE.vectors, TILE.vector_bytes // 2)]  # same registers, halves
    tiles = half_width if TILE.vector_bytes > 16 else []
    tiles += [tuple(int(x) for x in spec.split("x")) for spec in args.tiles.split(",") if spec]
    folder = Path(tempfile.mkdtemp(prefix="tinyattn-matmul-variants-"))
    sys.path.insert(0, str(folder))
    products = {"numpy": np.matmul}
    for i, (name, source) in enumerate(kernel_variants(tiles).items()):
        (folder / f"variant_{i}.py").write_text(source)
        products[name] = importlib.import_module(f"variant_{i}").matmul
    tiles_argument = args.tiles or '""'
    lines = [*cpu_lines(), "", f"Command: `python benchmarks/bench_matmul.py --alternatives "
             f"--tiles {tiles_argument} --rounds {args.rounds}` (one thread)", ""]
    for dtype in DTYPES:
        names = list(products)
        lines += [f"| {dtype} | " + " | ".join(names) + " |",
                  "|---|" + "---:|" * len(names)]
        rng = np.random.default_rng(1)
        wide_b = [(f"{m}×{k} · {k}×{n}  [B of {k * n * np.dtype(dtype).itemsize >> 20} MiB]",
                   rng.standard_normal((m, k)).astype(dtype),
                   rng.standard_normal((k, n)).astype(dtype))
                  for m, k, n in WIDE_B_SHAPES]
        few_rows = [(f"{m}×{k} · ({n}×{k})ᵀ  [Wᵀ of {k * n * np.dtype(dtype).itemsize / 2**20:.3g} "
                     "MiB]", rng.standard_normal((m, k)).astype(dtype),
                     rng.standard_normal((n, k)).astype(dtype).T)
                    for m, k, n in FEW_ROWS_WT_SHAPES]
        for label, a, b in [case for case in cases(dtype) if "ᵀ" not in case[0]] + wide_b + \
                few_rows:
            for product in products.values():
                product(a, b)
            reps = max(2, int(2e7 / flops(a, b)))
            times = {name: [] for name in names}
            for r in range(args.rounds):
                for name in names if r % 2 == 0 else names[::-1]:
                    start = time.process_time()
                    for _ in range(reps):
                        products[name](a, b)
                    times[name].append((time.process_time() - start) / reps)
            ref = np.array(times["numpy"])
            cells = [f"{flops(a, b) / np.median(ref) / 1e9:.0f}"]
            for name in names[1:]:
                own = np.array(times[name])
                cells.append(f"{flops(a, b) / np.median(own) / 1e9:.0f} "
                             f"({np.median(ref / own):.2f})")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
        lines.append("")
    lines.append(f"Load average (1, 5, 15 min) at the end: "
                 f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs).")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for both sides")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds per dtype")
    parser.add_argument("--calls", type=int, default=21, help="timed calls per case and round")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    parser.add_argument("--large", action="store_true",
                        help="time the Linear products of larger models instead of W1's")
    parser.add_argument("--w4", action="store_true",
                        help="time W4's products against torch's instead of W1's against numpy")
    parser.add_argument("--alternatives", action="store_true",
                        help="compare kernel variants at one thread instead")
    parser.add_argument("--tiles", default="6x2x32,14x2x64,12x2x64,8x3x64,4x4x64",
                        help="extra tiles for --alternatives: rows x vectors x vector bytes")
    parser.add_argument("--child", choices=["tinyattn", "numpy", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--dtype", choices=DTYPES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.dtype, args.calls, args.large, args.w4, args.threads)
        return
    if args.alternatives:
        if os.environ.get("NUMBA_NUM_THREADS") != "1":
            env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
            os.execve(sys.executable, [sys.executable, *sys.argv], env)
        body = alternatives(args)
        print(body)
        if args.out is not None:
            write_results(args.out, f"{machine_heading()}: kernel variants at one thread", body)
        return
    body = w4_table(args) if args.w4 else table(args)
    print(body)
    if args.out is not None:
        suffix = ": Linear products of larger models" if args.large else \
            ": W4's products against torch" if args.w4 else ""
        write_results(args.out, machine_heading() + suffix, body)


if __name__ == "__main__":
    main()
