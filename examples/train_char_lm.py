"""A character-level language model on any text file — by default on tinyshakespeare, the
Shakespeare text that ships with tinyattn — then a sample from it.

    python examples/train_char_lm.py                       # tinyshakespeare
    python examples/train_char_lm.py --text input.txt --steps 2000
    python examples/train_char_lm.py --fast                # tiny model, a few steps

Writes model.npz, config.json, loss.png and attention.png to runs/char_lm/ (or --out); sample
more with ``tinyattn sample --checkpoint runs/char_lm/model.npz --prompt "ROMEO:"``.
"""

import argparse
from dataclasses import replace
from pathlib import Path

from tinyattn.models import TransformerLMConfig
from tinyattn.tasks import CharDataset, default_corpus
from tinyattn.train import TEXT_CONFIG, set_threads, train_text

parser = argparse.ArgumentParser(description="character-level LM with sampling")
parser.add_argument("--text", type=Path, help="a UTF-8 text file (default: tinyshakespeare)")
parser.add_argument("--steps", type=int, default=600, help="training steps (default 600)")
parser.add_argument("--out", type=Path, default=Path("runs/char_lm"), help="output folder")
parser.add_argument("--fast", action="store_true", help="tiny model, a few steps")
args = parser.parse_args()
set_threads(1)  # small models: one numba thread is fastest (see tinyattn.train.set_threads)

text = default_corpus() if args.text is None else args.text.read_text(encoding="utf-8")
print(f"corpus: {len(text):,} characters, {len(set(text))} distinct")
context = 16 if args.fast else 64
dataset = CharDataset(text, context_length=context)
config = replace(TEXT_CONFIG, steps=args.steps)
model_config = None
if args.fast:
    config = replace(config, steps=6, eval_every=3, batch_size=8, warmup_steps=1)
    model_config = TransformerLMConfig(dataset.vocab_size, context, embed_dim=16, num_heads=2,
                                       num_layers=1)
train_text(dataset, args.out, config, model_config, sample_chars=40 if args.fast else 300,
           progress=not args.fast)
