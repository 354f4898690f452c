"""One seeded training run in a process of its own, for tests/test_determinism.py.

``python tests/seeded_run.py OUT.npz --threads N [--all-parallel]`` runs 50 AdamW steps of a
small TransformerLM with dropout on, from ``manual_seed(0)``, on ``N`` numba threads, and saves
the losses and the final parameters to ``OUT.npz``. The caller sets ``NUMBA_NUM_THREADS`` for
the process, so the thread count never depends on the environment the tests run in.
``--all-parallel`` lowers every kernel's size threshold to 0, so that each kernel this run calls
takes its parallel variant even on these small arrays.
"""

from __future__ import annotations

import argparse

import numba
import numpy as np

import tinyattn as ta
from tinyattn.kernels import adamw, attention, dropout, embedding, gelu, layer_norm, matmul, softmax

CONFIG = ta.models.TransformerLMConfig(vocab_size=29, context_length=16, embed_dim=32,
                                       num_heads=2, num_layers=1, dropout=0.2)
STEPS = 50


def seeded_run() -> tuple[list[float], dict[str, np.ndarray]]:
    """The losses of every step and the final state dict."""
    ta.manual_seed(0)
    model = ta.TransformerLM(CONFIG)
    optimizer = ta.optim.AdamW(model.parameters(), lr=3e-3)
    tokens = ta.randn(8, 17).numpy()  # drawn from the seeded generator too
    data = (np.abs(tokens) * 1000).astype(np.int64) % CONFIG.vocab_size  # (8, T + 1)
    idx, targets = ta.tensor(data[:, :-1]), ta.tensor(data[:, 1:])  # (8, 16) each
    losses = []
    for _ in range(STEPS):
        _, loss = model(idx, targets=targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, {name: value.numpy() for name, value in model.state_dict().items()}


def all_parallel() -> None:
    """Every kernel runs its parallel variant, whatever the size of its arrays."""
    adamw._PARALLEL_MIN_SIZE = 0
    attention._PARALLEL_MIN_WORK = 0
    dropout._PARALLEL_MIN = 0
    embedding._PARALLEL_MIN_ELEMENTS = 0
    gelu._PARALLEL_MIN_ELEMENTS = 0
    layer_norm._PARALLEL_MIN_ELEMENTS = 0
    matmul._TINY_MACS = 0
    softmax._PARALLEL_MIN_ELEMENTS = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--all-parallel", action="store_true")
    args = parser.parse_args()
    numba.set_num_threads(args.threads)  # raises if NUMBA_NUM_THREADS is smaller
    if args.all_parallel:
        all_parallel()
    losses, params = seeded_run()
    np.savez(args.out, threads=numba.get_num_threads(), losses=np.array(losses),
             **{f"param:{name}": value for name, value in params.items()})


if __name__ == "__main__":
    main()
