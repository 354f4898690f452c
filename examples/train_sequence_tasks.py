"""Train a small transformer on copy, reverse and sort (sequences generated on the fly), and
report held-out token accuracy and where the attention looks.

    python examples/train_sequence_tasks.py                 # all three tasks, default settings
    python examples/train_sequence_tasks.py --task sort --steps 600
    python examples/train_sequence_tasks.py --fast          # a few steps each (for the tests)

Each run writes model.npz, config.json, loss.png and attention.png to runs/<task>/ (or --out).
The same code runs ``tinyattn train --task ...``.
"""

import argparse
from dataclasses import replace
from pathlib import Path

from tinyattn.models import TransformerLMConfig
from tinyattn.tasks import TASKS, SequenceTask
from tinyattn.train import TrainConfig, set_threads, train_task

parser = argparse.ArgumentParser(description="copy / reverse / sort with a small transformer")
parser.add_argument("--task", choices=TASKS, action="append", help="repeatable; default: all")
parser.add_argument("--steps", type=int, help="training steps per task")
parser.add_argument("--out", type=Path, default=Path("runs"), help="parent output folder")
parser.add_argument("--fast", action="store_true", help="tiny model, a few steps")
args = parser.parse_args()
set_threads(1)  # small models: one numba thread is fastest (see tinyattn.train.set_threads)

config = TrainConfig()
if args.fast:
    config = replace(config, steps=6, eval_every=3, batch_size=16, warmup_steps=1)
if args.steps:
    config = replace(config, steps=args.steps)
results = {}
for name in args.task or TASKS:
    print(f"=== {name} ===")
    model_config = None
    if args.fast:
        task = SequenceTask(name, length=4)
        model_config = TransformerLMConfig(task.vocab_size, task.context_length, embed_dim=16,
                                           num_heads=2, num_layers=1)
    results[name] = train_task(name, args.out / name, config, model_config,
                               length=4 if args.fast else 8,
                               eval_size=32 if args.fast else 512, progress=not args.fast)
print("\nheld-out token accuracy:",
      ", ".join(f"{name} {r['accuracy']:.3f}" for name, r in results.items()))
