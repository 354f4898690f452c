"""Training loop and runs: AdamW, cosine warm-up, gradient clipping, evaluation, checkpoints.

:func:`fit` is the loop itself (a few lines per step, as in any PyTorch script);
:func:`train_task` and :func:`train_text` are complete runs behind ``tinyattn train``: they
build a :class:`~tinyattn.models.TransformerLM`, train it, and write to an output directory

- ``model.npz``   the weights (``Module.save``; ``ta.nn.load`` reads them back),
- ``config.json`` model, data and training settings, plus the results,
- ``loss.png``    train/eval loss curves, ``attention.png`` attention maps of a held-out example,
- ``gradients.png`` the gradient-routing maps of that example: for every layer and head the
  weights ``P``, the gradient ``dP`` arriving at them and the gradient ``dS`` at the scores.

A run is reproducible: ``seed`` fixes the initial weights, every batch and every sample.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from . import inspect
from .autograd import no_grad
from .models import TransformerLM, TransformerLMConfig
from .nn import Module, load
from .nn.utils import clip_grad_norm_
from .optim import AdamW, CosineWarmup
from .random import manual_seed
from .tasks import IGNORE_INDEX, CharDataset, SequenceTask, TaskData
from .tensor import Tensor

Batch = tuple[np.ndarray, np.ndarray]
History = dict[str, list[tuple[int, float]]]


@dataclass
class TrainConfig:
    """Optimisation settings (the defaults are those of ``tinyattn train --task reverse``)."""

    steps: int = 300
    batch_size: int = 64
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 50
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_every: int = 50
    seed: int = 0


TASK_MODEL = {"embed_dim": 64, "num_heads": 4, "num_layers": 2}
"""Model sizes of ``tinyattn train --task`` (vocabulary and context come from the task)."""
TEXT_MODEL = {"embed_dim": 128, "num_heads": 4, "num_layers": 2}
"""Model sizes of ``tinyattn train --text`` (the benchmark configuration)."""
TEXT_CONFIG = TrainConfig(steps=600, batch_size=32, lr=2e-3, min_lr=2e-4, eval_every=100)
"""The defaults of ``tinyattn train --text`` (a wider model and longer windows: smaller batches)."""


def set_threads(threads: int) -> None:
    """Use ``threads`` numba threads in the kernels (0: numba's default, all cores).

    The models trained here are small, so each kernel call is short and a second thread costs
    more in synchronisation than it gains, most of all on a busy CPU: one thread is the
    default of ``tinyattn train``. Results are bitwise the same for any thread count.

    Examples
    --------
    >>> import numba
    >>> previous = numba.get_num_threads()
    >>> set_threads(1); numba.get_num_threads()
    1
    >>> set_threads(previous)
    """
    from .kernels.parallel import available_threads, set_num_threads

    set_num_threads(threads or available_threads())


def configure_optimizer(model: Module, config: TrainConfig) -> AdamW:
    """AdamW that decays only matrices (2-D weights), not biases, norms or embeddings' rows.

    Examples
    --------
    >>> import tinyattn as ta
    >>> opt = configure_optimizer(ta.nn.Linear(3, 2), TrainConfig(weight_decay=0.1))
    >>> [g["weight_decay"] for g in opt.param_groups]
    [0.1, 0.0]
    """
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return AdamW([g for g in groups if g["params"]], lr=config.lr)


def fit(
    model: TransformerLM,
    train_batch: Callable[[int], Batch],
    config: TrainConfig,
    evaluate: Callable[[], dict[str, float]] | None = None,
    progress: bool = True,
    stream: TextIO | None = None,
) -> History:
    """Train ``model`` for ``config.steps`` steps; return the loss history.

    Each step: draw a batch, forward, loss, backward, clip the gradient norm, AdamW step,
    advance the cosine warm-up schedule (warm-up capped at a fifth of the steps). Every
    ``eval_every`` steps (and after the last one) ``evaluate()`` runs in eval mode under
    ``no_grad`` and must return a dict with ``"loss"``; its line goes to ``stream`` (stdout).

    Returns
    -------
    dict
        ``{"train": [(step, loss), ...], "eval": [(step, loss), ...]}``

    Examples
    --------
    >>> import tinyattn as ta
    >>> from tinyattn.tasks import SequenceTask, TaskData
    >>> data = TaskData(SequenceTask("copy", length=3), eval_size=8)
    >>> model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 6, 16, 2, 1))
    >>> history = fit(model, data.train_batch, TrainConfig(steps=3, batch_size=4),
    ...               progress=False)
    >>> [step for step, _ in history["train"]]
    [1, 2, 3]
    """
    from tqdm.auto import tqdm  # here: `tinyattn run` imports this module, never a bar

    optimizer = configure_optimizer(model, config)
    warmup = min(config.warmup_steps, config.steps // 5)  # short runs warm up for 20% of steps
    scheduler = CosineWarmup(optimizer, warmup, config.steps, min_lr=min(config.min_lr, config.lr))
    history: History = {"train": [], "eval": []}
    bar = tqdm(range(1, config.steps + 1), disable=not progress, unit="step", leave=False,
               dynamic_ncols=True)
    for step in bar:
        model.train()
        inputs, targets = train_batch(config.batch_size)
        _, loss = model(Tensor(inputs), targets=Tensor(targets))
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        history["train"].append((step, loss.item()))
        bar.set_postfix(loss=f"{loss.item():.4f}")
        if evaluate is not None and (step % config.eval_every == 0 or step == config.steps):
            model.eval()
            with no_grad():
                metrics = evaluate()
            history["eval"].append((step, metrics["loss"]))
            report = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
            line = f"step {step:5d}: train loss {loss.item():.4f}, eval {report}"
            if progress:
                bar.write(line, file=stream)
            else:
                print(line, file=stream)
    model.eval()
    return history


def attention_maps(model: TransformerLM, idx: np.ndarray) -> np.ndarray:
    """Attention weights of every layer and head for one sequence: ``(L, H, T, T)``.

    Read from the model's ``blocks.{l}.attn.hook_pattern`` hook points
    (:meth:`~tinyattn.nn.hooks.HookedModule.run_with_cache`).

    Examples
    --------
    >>> import numpy as np, tinyattn as ta
    >>> model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 6, 16, 2, 3))
    >>> maps = attention_maps(model, np.array([1, 2, 3, 4]))
    >>> maps.shape, bool(np.allclose(maps.sum(axis=-1), 1.0))
    ((3, 2, 4, 4), True)
    """
    tokens = Tensor(np.asarray(idx, dtype=np.int64).reshape(1, -1))  # (1, T)
    with no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith(
            "attn.hook_pattern"))
    return np.stack([cache[f"blocks.{i}.attn.hook_pattern"].numpy()[0]
                     for i in range(len(model.blocks))])  # (L, H, T, T)


def greedy_answers(
    model: TransformerLM, task: SequenceTask, symbols: np.ndarray
) -> np.ndarray:
    """The model's answers ``(B, n)``: greedy decoding after ``x_1 … x_n SEP``, with a
    key/value cache (:meth:`~tinyattn.models.TransformerLM.next_token_logits`).

    Examples
    --------
    >>> import numpy as np, tinyattn as ta
    >>> task = SequenceTask("sort", length=3)
    >>> model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 6, 16, 2, 1))
    >>> greedy_answers(model, task, np.array([[3, 1, 2], [0, 0, 9]])).shape
    (2, 3)
    """
    tokens = task.prompt(symbols)  # (B, n + 1)
    cache = model.new_cache()
    for _ in range(task.length):
        logits = model.next_token_logits(tokens, cache).numpy()  # (B, vocab)
        tokens = np.concatenate([tokens, logits.argmax(axis=-1)[:, None]], axis=1)
    return tokens[:, task.length + 1:]


def _source_position(task: SequenceTask, i: int) -> int | None:
    """Where answer token ``i`` comes from in the prompt (None for sort: it depends on data)."""
    return {"copy": i, "reverse": task.length - 1 - i}.get(task.name)


def alignment(task: SequenceTask, maps: np.ndarray) -> tuple[float, int, int] | None:
    """Best head's mean weight on the source position of each answer token: (score, l, h)."""
    n = task.length
    if _source_position(task, 0) is None:
        return None
    rows = [(n + i, _source_position(task, i)) for i in range(n)]
    scores = np.mean([maps[:, :, q, k] for q, k in rows], axis=0)  # (L, H)
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return float(scores[layer, head]), int(layer), int(head)


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(payload, indent=2) + "\n")
    os.replace(temporary, path)


def _new_model(model_config: TransformerLMConfig, seed: int) -> TransformerLM:
    manual_seed(seed)
    return TransformerLM(model_config)


def held_out_gradients(model: TransformerLM, inputs: np.ndarray,
                       targets: np.ndarray) -> inspect.AttentionGradients:
    """The gradient-routing maps (``P``, ``dP``, ``dS`` per layer and head) of one sequence."""
    return inspect.attention_gradients(model, (Tensor(inputs[None]), Tensor(targets[None])))


def _plot(history: History, out: Path, maps: np.ndarray,
          gradients: inspect.AttentionGradients, labels: list[str], title: str) -> None:
    """Write loss.png, attention.png (every layer and head) and gradients.png; skipped
    without matplotlib."""
    try:
        inspect.plot_losses(history, out / "loss.png", title=title)
        L, H = maps.shape[:2]
        inspect.plot_attention(
            maps.reshape(L * H, *maps.shape[2:]), labels, out / "attention.png",  # (L·H, T, T)
            title=f"{title}: attention of a held-out example",
            panel_titles=[f"layer {layer} head {head}" for layer in range(L) for head in range(H)],
        )
        inspect.plot_attention_gradients(
            gradients, out / "gradients.png", tokens=labels,
            title=f"{title}: weights P, gradient dP at the weights, dS at the scores")
    except ImportError as err:
        print(f"skipping the plots: {err}")


def train_task(
    name: str,
    out_dir: str | os.PathLike,
    config: TrainConfig | None = None,
    model_config: TransformerLMConfig | None = None,
    length: int = 8,
    num_symbols: int = 10,
    eval_size: int = 512,
    progress: bool = True,
    stream: TextIO | None = None,
) -> dict[str, Any]:
    """Train a model on a synthetic task (copy, reverse, sort) and write the run to ``out_dir``.

    The default model (2 layers, 4 heads, width 64) and :class:`TrainConfig` learn ``reverse``
    of 8 digits to ≥ 99% held-out token accuracy. Returns the results: greedy-decoding token
    and sequence accuracy on the held-out set, and the best head's attention alignment.

    Examples
    --------
    >>> import io, tempfile
    >>> log = io.StringIO()
    >>> results = train_task("reverse", tempfile.mkdtemp(), TrainConfig(steps=2), length=3,
    ...                      eval_size=8, progress=False, stream=log)
    >>> log.getvalue().splitlines()[-1].startswith("accuracy: ")
    True
    """
    config = config or TrainConfig()
    task = SequenceTask(name, length=length, num_symbols=num_symbols)
    model_config = model_config or TransformerLMConfig(
        vocab_size=task.vocab_size, context_length=task.context_length, **TASK_MODEL)
    data = TaskData(task, eval_size=eval_size, seed=config.seed)
    model = _new_model(model_config, config.seed)
    eval_inputs, eval_targets = data.eval_batch()
    scored = eval_targets != IGNORE_INDEX

    def evaluate() -> dict[str, float]:
        logits, loss = model(Tensor(eval_inputs), targets=Tensor(eval_targets))
        correct = logits.numpy().argmax(axis=-1) == eval_targets
        return {"loss": loss.item(), "teacher-forced accuracy": float(correct[scored].mean())}

    history = fit(model, data.train_batch, config, evaluate, progress, stream)
    answers = greedy_answers(model, task, data.eval_symbols)
    expected = task.answer(data.eval_symbols)
    results: dict[str, Any] = {
        "accuracy": float(np.mean(answers == expected)),
        "sequence_accuracy": float(np.mean(np.all(answers == expected, axis=1))),
        "final_train_loss": history["train"][-1][1],
        "final_eval_loss": history["eval"][-1][1],
    }
    inputs, targets = task.encode(data.eval_symbols[:1])
    maps = attention_maps(model, inputs[0])
    aligned = alignment(task, maps)
    if aligned is not None:
        results["attention_on_source"] = {"score": aligned[0], "layer": aligned[1],
                                          "head": aligned[2]}
    out = _save_run(model, out_dir, {
        "kind": "task", "task": asdict(task), "model": asdict(model_config),
        "train": asdict(config), "results": results,
    })
    labels = ["|" if t == task.separator else str(t) for t in inputs[0]]
    _plot(history, out, maps, held_out_gradients(model, inputs[0], targets[0]), labels,
          f"{name} task")
    say = _printer(stream)
    say(f"held-out sequence accuracy: {results['sequence_accuracy']:.4f}")
    if aligned is not None:
        say(f"attention on the source position: {aligned[0]:.3f} "
            f"(layer {aligned[1]}, head {aligned[2]})")
    say(f"wrote {out / 'model.npz'}, config.json, loss.png, attention.png, gradients.png")
    say(f"accuracy: {results['accuracy']:.4f}")
    return results


def train_text(
    dataset: CharDataset,
    out_dir: str | os.PathLike,
    config: TrainConfig | None = None,
    model_config: TransformerLMConfig | None = None,
    sample_chars: int = 200,
    progress: bool = True,
    stream: TextIO | None = None,
) -> dict[str, Any]:
    """Train a character-level language model on ``dataset``, write the run, print a sample.

    The default model is the benchmark configuration (2 layers, 4 heads, width 128) with the
    dataset's context length.
    """
    config = config or TEXT_CONFIG
    model_config = model_config or TransformerLMConfig(
        vocab_size=dataset.vocab_size, context_length=dataset.context_length, **TEXT_MODEL)
    model = _new_model(model_config, config.seed)
    train_rng = np.random.default_rng([config.seed, 0])
    eval_inputs, eval_targets = dataset.batch("eval", 4 * config.batch_size,
                                              np.random.default_rng([config.seed, 1]))

    def evaluate() -> dict[str, float]:
        _, loss = model(Tensor(eval_inputs), targets=Tensor(eval_targets))
        return {"loss": loss.item()}

    history = fit(model, lambda size: dataset.batch("train", size, train_rng), config, evaluate,
                  progress, stream)
    results = {"final_train_loss": history["train"][-1][1],
               "final_eval_loss": history["eval"][-1][1]}
    out = _save_run(model, out_dir, {
        "kind": "text", "chars": dataset.chars, "model": asdict(model_config),
        "train": asdict(config), "results": results,
    })
    window = eval_inputs[0][:32]
    _plot(history, out, attention_maps(model, window),
          held_out_gradients(model, window, eval_targets[0][:32]),
          [repr(c)[1:-1] for c in dataset.decode(window)], "character LM")
    manual_seed(config.seed)
    sample = model.generate(Tensor(window[None, :8]), sample_chars, temperature=0.8, top_k=10)
    say = _printer(stream)
    say("sample:\n" + dataset.decode(sample.numpy()[0]))
    say(f"wrote {out / 'model.npz'}, config.json, loss.png, attention.png, gradients.png")
    say(f"eval loss: {results['final_eval_loss']:.4f}")
    return results


def _printer(stream: TextIO | None) -> Callable[[str], None]:
    return lambda text: print(text, file=stream)


def _save_run(model: Module, out_dir: str | os.PathLike, payload: dict[str, Any]) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "model.npz")
    _write_json(out / "config.json", {"checkpoint": "model.npz", **payload})
    return out


def load_run(checkpoint: str | os.PathLike) -> tuple[TransformerLM, dict[str, Any]]:
    """Rebuild a model from ``checkpoint`` and the ``config.json`` beside it.

    Examples
    --------
    >>> import io, os, tempfile
    >>> out = tempfile.mkdtemp()
    >>> _ = train_task("copy", out, TrainConfig(steps=2), length=3, eval_size=8,
    ...                progress=False, stream=io.StringIO())
    >>> model, config = load_run(os.path.join(out, "model.npz"))
    >>> config["kind"], config["task"]["name"], model.training
    ('task', 'copy', False)
    """
    path = Path(checkpoint)
    config_path = path.parent / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"load_run: no checkpoint file at {str(path)!r}")
    if not config_path.is_file():
        raise FileNotFoundError(f"load_run: no config.json beside the checkpoint ({config_path})")
    config = json.loads(config_path.read_text())
    known = {f.name for f in fields(TransformerLMConfig)}
    model = TransformerLM(TransformerLMConfig(**{k: v for k, v in config["model"].items()
                                                 if k in known}))
    model.load_state_dict(load(path))
    model.eval()
    return model, config
