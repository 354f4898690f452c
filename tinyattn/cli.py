"""The ``tinyattn`` command (also ``python -m tinyattn``).

Subcommands::

    tinyattn walkthrough                  backprop through attention, by hand vs autograd
    tinyattn gradcheck                    every op and layer against finite differences
    tinyattn train --task reverse         train a small transformer on a synthetic task
    tinyattn train --task reverse --preset llama   ... with RoPE, RMSNorm, SwiGLU, GQA
    tinyattn train --text [FILE]          ... or a character LM (default: tinyshakespeare)
    tinyattn sample --checkpoint PATH     sample from a trained run
    tinyattn lab scale [--factor F]       how the score scale saturates the softmax
    tinyattn exercise list|new|check      write a backward pass by hand, get it graded
    tinyattn warmup [--dtype float32]     compile every kernel ahead, with a progress bar
    tinyattn run SCRIPT [ARGS...]         run an unchanged PyTorch script, torch being tinyattn
    tinyattn run --inspect-step N --out DIR SCRIPT [ARGS...]
                                          ... and write the explorer of its N-th backward()
    tinyattn view [JSON]                  write the explorer page (default: the seed sentence)

Bad usage (an unknown option, a missing file) prints a message and exits with status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DEFAULT_CORPUS = "<tinyshakespeare>"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``tinyattn`` command.

    Examples
    --------
    >>> args = build_parser().parse_args(["train", "--task", "reverse", "--steps", "50"])
    >>> args.task, args.steps, args.threads
    ('reverse', 50, 1)
    """
    from .models import POSITIONALS, PRESETS
    from .nn.transformer import MLPS, NORMS
    from .tasks import TASKS
    from .train import TEXT_CONFIG, TrainConfig

    def threads_option(default: int, why: str) -> argparse.ArgumentParser:
        parent = argparse.ArgumentParser(add_help=False)
        parent.add_argument("--threads", type=int, default=default, metavar="N",
                            help=f"numba threads for the kernels, 0 = all cores ({why})")
        return parent

    common = threads_option(1, "default 1: the small models here run fastest on one thread, "
                               "especially on a busy CPU")
    parser = argparse.ArgumentParser(
        prog="tinyattn",
        description="Study backpropagation through attention, and train small transformers.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    walk = commands.add_parser(
        "walkthrough", parents=[common], help="derive attention's backward pass step by step",
        description="Print the forward and backward pass of one attention head on the sentence "
                    "'Your journey starts with one step': each gradient by hand, by autograd "
                    "and by finite differences; then the composed vs the fused attention path.")
    walk.add_argument("--seed", type=int, default=123, help="seed of the weights (default 123)")
    walk.add_argument("--second-order", action="store_true",
                      help="also differentiate the gradient: the softmax Jacobian, saturation, "
                           "the loss's curvature along W_q and W_v, a gradient penalty")

    check = commands.add_parser(
        "gradcheck", parents=[common], help="check every op and layer's gradient",
        description="Gradient-check every op and layer in float64 against central finite "
                    "differences; exits with status 1 if any check fails.")
    check.add_argument("--order", type=int, choices=(1, 2), default=1,
                       help="1: gradients; 2: second derivatives (the gradient of each "
                            "vector-Jacobian product)")

    defaults = TrainConfig()
    train = commands.add_parser(
        "train", parents=[common], help="train a transformer on a task or a text",
        description="Train a decoder-only transformer on a synthetic task (copy, reverse, "
                    "sort) or as a character LM, writing to --out: model.npz (the weights), "
                    "config.json (settings and results), loss.png (loss curves), "
                    "attention.png (the attention maps of a held-out example) and "
                    "gradients.png (for every layer and head of that example, the weights P, "
                    "the gradient dP arriving at them and the gradient dS at the scores).")
    data = train.add_mutually_exclusive_group(required=True)
    data.add_argument("--task", choices=TASKS, help="a synthetic sequence task")
    data.add_argument("--text", nargs="?", const=DEFAULT_CORPUS, metavar="FILE",
                      help="a character LM on FILE (without FILE: tinyshakespeare, the "
                           "Shakespeare text shipped with tinyattn)")
    train.add_argument("--steps", type=_positive_int, help=f"training steps (default "
                       f"{defaults.steps} for tasks, {TEXT_CONFIG.steps} for text)")
    train.add_argument("--batch-size", type=_positive_int, help=f"sequences per step (default "
                       f"{defaults.batch_size} for tasks, {TEXT_CONFIG.batch_size} for text)")
    train.add_argument("--lr", type=_positive_float, help="peak learning rate")
    train.add_argument("--eval-every", type=_positive_int, help="steps between evaluations")
    train.add_argument("--seed", type=int, default=0, help="seed of weights and data (0)")
    train.add_argument("--length", type=_positive_int, default=8,
                       help="task sequence length (default 8)")
    train.add_argument("--embed-dim", type=_positive_int, help="model width (64 for tasks, "
                       "128 for text)")
    train.add_argument("--num-heads", type=_positive_int, help="attention heads (4)")
    train.add_argument("--num-layers", type=_positive_int, help="transformer blocks (2)")
    train.add_argument("--context-length", type=_positive_int, default=64,
                       help="text window in characters (default 64)")
    variant = train.add_argument_group(
        "block variant", "a preset, then any of these options to change one part of it")
    variant.add_argument("--preset", choices=PRESETS, default="gpt",
                         help="gpt (default: learned positions, LayerNorm, GELU, biases), gpt2 "
                              "(+ tied head, tanh GELU) or llama (RoPE, RMSNorm, SwiGLU, no "
                              "biases, half as many key/value heads)")
    variant.add_argument("--positional", choices=POSITIONALS, help="position signal")
    variant.add_argument("--norm", choices=NORMS, help="normalisation layers")
    variant.add_argument("--mlp", choices=MLPS, help="feed-forward layer")
    variant.add_argument("--gelu-approximate", choices=("none", "tanh"), help="GELU form")
    variant.add_argument("--num-kv-heads", type=_positive_int,
                         help="key/value heads (grouped-query attention; 1: multi-query)")
    variant.add_argument("--window-size", type=_positive_int,
                         help="sliding window: each query sees the last N keys")
    variant.add_argument("--bias", action=argparse.BooleanOptionalAction,
                         help="biases in every Linear and LayerNorm")
    variant.add_argument("--tie-weights", action=argparse.BooleanOptionalAction,
                         help="the head shares the token embedding's weight")
    variant.add_argument("--impl", choices=("auto", "composed", "fused"),
                         help="attention path (default auto)")
    train.add_argument("--out", type=Path, help="output directory (default runs/<name>)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")

    sample = commands.add_parser(
        "sample", parents=[common], help="generate from a trained checkpoint",
        description="Load a checkpoint written by 'tinyattn train' (with the config.json "
                    "beside it) and generate: text for a character LM, the answer for a task.")
    sample.add_argument("--checkpoint", type=Path, required=True, metavar="PATH",
                        help="the model.npz of a training run")
    sample.add_argument("--prompt", help="start text (char LM) or the task's input digits")
    sample.add_argument("--max-new-tokens", type=_positive_int, default=200,
                        help="characters to generate (char LM; default 200)")
    sample.add_argument("--temperature", type=_positive_float, default=0.8,
                        help="sampling temperature (default 0.8)")
    sample.add_argument("--top-k", type=_positive_int, help="sample among the k likeliest")
    sample.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    sample.add_argument("--no-cache", action="store_true",
                        help="recompute the whole context at every step instead of decoding "
                             "with a key/value cache (same tokens, slower)")
    lab = commands.add_parser(
        "lab", help="the attention gradient lab",
        description="Experiments on the gradient through attention.")
    experiments = lab.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    scale = experiments.add_parser(
        "scale", parents=[common], help="rescale the scores: saturation and gradient norms",
        description="Run one batch of text (tinyshakespeare, shipped with tinyattn) through a "
                    "small transformer with the attention "
                    "scores q·k scaled by 1/√D, 1/D, 1 and --factor; tabulate per scale the "
                    "row entropy of the weights, the largest eigenvalue of the softmax "
                    "Jacobian, |dS|/|dP| and the gradient norm reaching each head's W_q and "
                    "W_k; write scale.png and scale.json to --out.")
    scale.add_argument("--factor", type=_positive_float, default=8.0,
                       help="a scale of your own, multiplying q·k (default 8)")
    scale.add_argument("--steps", type=_positive_int, default=1,
                       help="training steps on the batch at each scale, recording each "
                            "(default 1: the initial weights only)")
    scale.add_argument("--lr", type=_positive_float, default=3e-3,
                       help="AdamW learning rate when --steps > 1 (default 3e-3)")
    scale.add_argument("--embed-dim", type=_positive_int, default=128, help="model width (128)")
    scale.add_argument("--num-heads", type=_positive_int, default=4, help="heads (4)")
    scale.add_argument("--num-layers", type=_positive_int, default=2, help="blocks (2)")
    scale.add_argument("--seq-len", type=_positive_int, default=64,
                       help="characters per sequence (64)")
    scale.add_argument("--batch-size", type=_positive_int, default=8,
                       help="sequences in the batch (8)")
    scale.add_argument("--seed", type=int, default=0, help="seed of weights and batch (0)")
    scale.add_argument("--out", type=Path, default=Path("runs") / "lab-scale",
                       help="output directory (default runs/lab-scale)")

    exercise = commands.add_parser(
        "exercise", help="write a backward pass by hand and have it graded",
        description="Bring your own backward: list the exercises, write one's stub, grade it.")
    actions = exercise.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the exercises",
                                 description="List the exercises.")
    new = actions.add_parser(
        "new", help="write an exercise's stub",
        description="Write NAME.py into DIR: a custom autograd.Function, its forward given, "
                    "its backward to fill in; then print the rule it asks for, read from "
                    "tinyattn's ops.")
    new.add_argument("name", metavar="NAME", help="the exercise (see 'tinyattn exercise list')")
    new.add_argument("directory", type=Path, metavar="DIR", help="where to write NAME.py")
    new.add_argument("--force", action="store_true", help="overwrite an existing file")
    grade = actions.add_parser(
        "check", help="grade a solution file",
        description="Grade FILE element by element against tinyattn's backward and finite "
                    "differences, on several shapes, then differentiate a right backward again "
                    "(a second-order check, not graded); exits with status 0 when it is right, "
                    "1 otherwise.")
    grade.add_argument("file", type=Path, metavar="FILE", help="the solution file")
    warm = commands.add_parser(
        "warmup", help="compile every kernel ahead of the first run",
        description="Compile every numba kernel tinyattn uses for the chosen dtypes (or load "
                    "it from numba's on-disk cache), with a progress bar on stderr, so that "
                    "later runs start without compiling. (A kernel compiled on first use "
                    "says so in one line on stderr; TINYATTN_QUIET_COMPILE=1 silences it.)")
    warm.add_argument("--dtype", choices=("float32", "float64", "all"), default="all",
                      help="the dtypes to compile the kernels for (default all)")
    run = commands.add_parser(
        "run", parents=[threads_option(0, "default 0: a script runs on every core, as under "
                                          "torch")],
        help="run an unchanged PyTorch script on tinyattn",
        usage="tinyattn run [-h] [--threads N] [--inspect-step N [--out DIR] "
              "[--inspect-every K] [--stop-after-inspect] [--no-check]] SCRIPT [ARGS ...]",
        description="Run SCRIPT as 'python SCRIPT ARGS' would (sys.argv, __main__, __file__, "
                    "sys.path[0]), with 'import torch' and every 'import torch.X' giving "
                    "tinyattn's modules. Something tinyattn does not have fails at the line "
                    "that uses it, naming it. The exit status is the script's (1 with a "
                    "traceback when it raises). ARGS go to the script as they are, options "
                    "included; tinyattn's own options come before SCRIPT.")
    run.add_argument("--inspect-step", type=_positive_int, metavar="N",
                     help="at the script's N-th backward() call, capture its graph (values, "
                          "gradients, check_graph, explain, saved memory, P/dP/dS of every "
                          "attention call) and write DIR/view.html (the explorer: open it in "
                          "a browser, no server needed) and DIR/view.json; the backward "
                          "passes are observed, not changed")
    run.add_argument("--out", type=Path, metavar="DIR",
                     help="where --inspect-step writes (default runs/inspect)")
    run.add_argument("--inspect-every", type=_positive_int, metavar="K",
                     help="record the attention maps of every K-th backward() call before "
                          "N, for the page's training view (default about 16 of them)")
    run.add_argument("--stop-after-inspect", action="store_true",
                     help="end the run (status 0) once the page is written")
    run.add_argument("--no-check", action="store_true",
                     help="skip the finite-difference check of every node (faster)")
    run.add_argument("script", metavar="SCRIPT", help="the PyTorch script")
    run.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                     help="the script's arguments")
    view = commands.add_parser(
        "view", parents=[common], help="write the interactive explorer of a backward pass",
        description="Write one self-contained HTML page (no server, no network) exploring a "
                    "backward pass: every node of the graph with its rules, values, "
                    "gradients, finite-difference check and saved memory, the gradient path "
                    "to each parameter, and P/dP/dS of every attention per head. Without "
                    "JSON: the walkthrough's attention head on 'Your journey starts with one "
                    "step'. With JSON: the numbers of a page written by 'tinyattn run "
                    "--inspect-step' (its view.json).")
    view.add_argument("source", nargs="?", type=Path, metavar="JSON",
                      help="a view.json to make the page of")
    view.add_argument("--causal", action="store_true",
                      help="the seed sentence's head with a causal mask")
    view.add_argument("--seed", type=int, default=123, help="seed of the weights (default 123)")
    view.add_argument("--no-check", action="store_true",
                      help="skip the finite-difference check of every node")
    view.add_argument("--out", type=Path, default=Path("runs") / "view" / "view.html",
                      metavar="PATH", help="the page to write (default runs/view/view.html)")
    for sub in (walk, check, train, sample, scale, listing, new, grade, warm, run, view):
        sub.set_defaults(command_parser=sub)
    lab.set_defaults(command_parser=lab)
    exercise.set_defaults(command_parser=exercise)
    return parser


def _train(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .memory import keep_freed_memory_unless_disabled
    from .models import TransformerLM, TransformerLMConfig, preset_config
    from .tasks import CharDataset, SequenceTask, default_corpus
    from .train import TASK_MODEL, TEXT_CONFIG, TEXT_MODEL, TrainConfig, train_task, train_text

    keep_freed_memory_unless_disabled()

    def model_config(defaults: dict, vocab_size: int, context_length: int) -> TransformerLMConfig:
        sizes = {key: default if getattr(args, key) is None else getattr(args, key)
                 for key, default in defaults.items()}
        if sizes["embed_dim"] % sizes["num_heads"]:
            parser.error(f"--embed-dim {sizes['embed_dim']} is not divisible by --num-heads "
                         f"{sizes['num_heads']}")
        chosen = {key: getattr(args, key) for key in (
            "positional", "norm", "mlp", "gelu_approximate", "num_kv_heads", "window_size",
            "bias", "tie_weights", "impl") if getattr(args, key) is not None}
        config = preset_config(args.preset, vocab_size, context_length, **sizes, **chosen)
        try:
            TransformerLM(config)
        except ValueError as err:
            parser.error(str(err))
        return config

    overrides = {key: value for key, value in (
        ("steps", args.steps), ("batch_size", args.batch_size), ("lr", args.lr),
        ("eval_every", args.eval_every), ("seed", args.seed)) if value is not None}
    if args.lr is not None:
        overrides["min_lr"] = args.lr / 10
    progress = not args.no_progress
    if args.task is not None:
        config = replace(TrainConfig(), **overrides)
        out = args.out or Path("runs") / args.task
        task = SequenceTask(args.task, length=args.length)
        sizes = model_config(TASK_MODEL, task.vocab_size, task.context_length)
        train_task(args.task, out, config, sizes, length=args.length, progress=progress)
        return 0
    if args.text == DEFAULT_CORPUS:
        text, name = default_corpus(), "tinyshakespeare"
    else:
        path = Path(args.text)
        if not path.is_file():
            parser.error(f"--text file {str(path)!r} does not exist")
        text, name = path.read_text(encoding="utf-8", errors="replace"), path.stem
    try:
        dataset = CharDataset(text, context_length=args.context_length)
    except ValueError as err:
        parser.error(str(err))
    config = replace(TEXT_CONFIG, **overrides)
    sizes = model_config(TEXT_MODEL, dataset.vocab_size, dataset.context_length)
    train_text(dataset, args.out or Path("runs") / name, config, sizes, progress=progress)
    return 0


def _parse_symbols(parser: argparse.ArgumentParser, prompt: str, task: dict) -> np.ndarray:
    parts = prompt.split() if " " in prompt.strip() else list(prompt.strip())
    if not all(p.isdigit() for p in parts) or len(parts) != task["length"] or any(
            int(p) >= task["num_symbols"] for p in parts):
        parser.error(f"the {task['name']} task needs --prompt of {task['length']} "
                     f"symbols in 0..{task['num_symbols'] - 1} (e.g. '3 1 4 1 5 9 2 6'), got "
                     f"{prompt!r}")
    return np.array([[int(p) for p in parts]], dtype=np.int64)


def _sample(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .random import manual_seed
    from .tasks import SequenceTask
    from .tensor import Tensor
    from .train import greedy_answers, load_run

    try:
        model, config = load_run(args.checkpoint)
    except FileNotFoundError as err:
        parser.error(str(err))
    except (ValueError, KeyError, TypeError) as err:
        parser.error(f"cannot rebuild the model from {args.checkpoint}: {err}")
    manual_seed(args.seed)
    if config["kind"] == "task":
        task = SequenceTask(**config["task"])
        prompt = args.prompt
        if prompt is None:
            prompt = " ".join(str(d) for d in np.random.default_rng(args.seed).integers(
                0, task.num_symbols, task.length))
        symbols = _parse_symbols(parser, prompt, config["task"])
        answer = greedy_answers(model, task, symbols)[0]
        print(f"prompt:   {' '.join(map(str, symbols[0]))}")
        print(f"answer:   {' '.join(map(str, answer))}")
        print(f"expected: {' '.join(map(str, task.answer(symbols)[0]))}")
        return 0
    chars = config["chars"]
    prompt = args.prompt if args.prompt is not None else "\n"
    unknown = sorted(set(prompt) - set(chars))
    if unknown or not prompt:
        parser.error(f"the prompt must be non-empty and use the model's characters; "
                     f"unknown: {unknown!r}")
    ids = np.array([[chars.index(c) for c in prompt]], dtype=np.int64)
    limit = config["model"]["context_length"]
    tokens = model.generate(Tensor(ids[:, -limit:]), args.max_new_tokens,
                            temperature=args.temperature, top_k=args.top_k,
                            use_cache=not args.no_cache)
    print(prompt[: -limit] + "".join(chars[int(i)] for i in tokens.numpy()[0]))
    return 0


def _lab_scale(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import json

    from . import inspect
    from .models import TransformerLM, TransformerLMConfig
    from .random import manual_seed
    from .tasks import CharDataset, default_corpus
    from .tensor import Tensor

    if args.embed_dim % args.num_heads:
        parser.error(f"--embed-dim {args.embed_dim} is not divisible by --num-heads "
                     f"{args.num_heads}")
    dataset = CharDataset(default_corpus(), context_length=args.seq_len)
    inputs, targets = dataset.batch("train", args.batch_size, np.random.default_rng(args.seed))
    manual_seed(args.seed)
    model = TransformerLM(TransformerLMConfig(dataset.vocab_size, args.seq_len, args.embed_dim,
                                              args.num_heads, args.num_layers))
    head_size = args.embed_dim // args.num_heads
    scales = inspect.standard_scales(head_size, args.factor)
    print(f"{args.num_layers} layers, {args.num_heads} heads of D = {head_size}, batch "
          f"{args.batch_size} × {args.seq_len} characters of tinyshakespeare; scales "
          + ", ".join(f"{label} = {factor:.4g}" for label, factor in scales))
    lab = inspect.scale_lab(model, (Tensor(inputs), Tensor(targets)), scales, steps=args.steps,
                            lr=args.lr)
    print(lab)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(
        [record.__dict__ for record in lab.records], indent=1) + "\n")
    try:
        picture = inspect.plot_scale_lab(lab, args.out / "scale.png",
                                         title=f"scores scaled by factor · q·k (D = {head_size})")
        print(f"wrote {picture} and scale.json")
    except ImportError as err:
        print(f"skipping the plot: {err}; wrote {args.out / 'scale.json'}")
    return 0


def _exercise(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .exercises import EXERCISES, ExerciseFileError, check, instructions, write_stub

    if args.action == "list":
        width = max(len(name) for name in EXERCISES)
        for name, exercise in EXERCISES.items():
            print(f"{name.ljust(width)}  {exercise.summary}")
        return 0
    if args.action == "new":
        if args.name not in EXERCISES:
            parser.error(f"no exercise named {args.name!r}; choose one of {sorted(EXERCISES)}")
        try:
            path = write_stub(args.name, args.directory, overwrite=args.force)
        except FileExistsError as err:
            parser.error(str(err))
        print(f"wrote {path}: fill in backward(), then run: tinyattn exercise check {path}")
        print(instructions(args.name))
        return 0
    try:
        grade = check(args.file)
    except (FileNotFoundError, ExerciseFileError) as err:
        parser.error(str(err))
    print(grade)
    return 0 if grade.passed else 1


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .run import Inspection, run_script

    if not Path(args.script).is_file():
        parser.error(f"can't open file {args.script!r}: no such file")
    inspection = None
    if args.inspect_step is None:
        extra = [flag for flag, given in (("--out", args.out is not None),
                                          ("--inspect-every", args.inspect_every is not None),
                                          ("--stop-after-inspect", args.stop_after_inspect),
                                          ("--no-check", args.no_check)) if given]
        if extra:
            parser.error(f"{', '.join(extra)} only make sense with --inspect-step N")
    else:
        inspection = Inspection(args.inspect_step, args.out or Path("runs") / "inspect",
                                args.inspect_every, args.stop_after_inspect, not args.no_check)
    return run_script(args.script, args.args, inspection)


def _view(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from .inspect import View

    if args.out.suffix.lower() not in (".html", ".htm"):
        parser.error(f"--out must end in .html, got {str(args.out)!r}")
    if args.source is not None:
        if args.causal or args.seed != 123 or args.no_check:
            parser.error("--causal, --seed and --no-check make the seed sentence's page; a "
                         "JSON is shown as it is")
        try:
            page = View.load(args.source)
        except (FileNotFoundError, ValueError) as err:
            parser.error(str(err))
    else:
        from .walkthrough import view as seed_view

        page = seed_view(seed=args.seed, causal=args.causal, check=not args.no_check)
    path = page.save(args.out)
    print(f"wrote {path} ({path.stat().st_size:,} bytes, {len(page.nodes)} nodes): open it in "
          "a browser (it needs no server and no network)")
    return 0


def _warmup(args: argparse.Namespace) -> int:
    from .warmup import DTYPE_CHOICES, warmup

    print(warmup(DTYPE_CHOICES[args.dtype]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tinyattn`` command; returns the exit status.

    Examples
    --------
    >>> main(["walkthrough"])  # doctest: +SKIP
    >>> main(["train", "--task", "reverse", "--out", "runs/reverse"])  # doctest: +SKIP
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    parser = args.command_parser  # errors name the subcommand in their usage line
    if args.command == "exercise":
        return _exercise(parser, args)
    if args.command == "warmup":
        return _warmup(args)
    from .train import set_threads

    try:
        set_threads(args.threads)
    except ValueError as err:
        parser.error(f"--threads: {err}")
    if args.command == "run":
        return _run(parser, args)
    if args.command == "view":
        return _view(parser, args)
    if args.command == "lab":
        return _lab_scale(parser, args)
    if args.command == "walkthrough":
        from .walkthrough import TOLERANCE, run

        errors = run(seed=args.seed)
        if args.second_order:
            from . import curvature

            print()
            second = curvature.run(seed=args.seed)
            if max(second.values()) >= curvature.TOLERANCE:
                return 1
        return 0 if max(errors.values()) < TOLERANCE else 1
    if args.command == "gradcheck":
        from .checks import run

        return 1 if run(order=args.order) else 0
    if args.command == "train":
        return _train(parser, args)
    return _sample(parser, args)
