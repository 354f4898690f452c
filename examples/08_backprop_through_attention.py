"""The backprop-through-attention walkthrough (also ``tinyattn walkthrough``):

    dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),  dQ = dS K·s,  dK = dSᵀ Q·s

each printed next to tinyattn's autograd and finite differences, then the composed vs fused
attention paths and a backward trace. Afterwards the graph of one attention head is exported
(Graphviz DOT, rendered when ``dot`` is installed) and its weights drawn as a heatmap.

    python examples/08_backprop_through_attention.py [--out DIR]
"""

import argparse
from pathlib import Path

import numpy as np

import tinyattn as ta
from tinyattn import inspect
from tinyattn.study import SEED_EMBEDDINGS, SEED_TOKENS, TOLERANCE
from tinyattn.walkthrough import run

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", type=Path, default=Path("runs/walkthrough"), help="picture folder")
parser.add_argument("--fast", action="store_true", help="accepted for symmetry (already fast)")
args = parser.parse_args()

errors = run()
assert max(errors.values()) < TOLERANCE

print("\n--- the graph of one causal head, with gradient norms ---")
ta.manual_seed(123)
head = ta.nn.SelfAttention(3, 2, causal=True).double()
x = ta.tensor(np.array(SEED_EMBEDDINGS))
context, weights = head(x, need_weights=True)  # composed path: every step is a node
loss = (context * ta.tensor(np.random.default_rng(0).standard_normal(context.shape))).sum()
record = inspect.trace(loss, retain_graph=True)
print(record)
dot = inspect.to_dot(loss, record, names=dict(head.named_parameters()))
print(f"DOT graph: {dot.count('shape=box')} ops, {dot.count(' -> ')} edges")
args.out.mkdir(parents=True, exist_ok=True)
print("graph written to", inspect.render(dot, args.out / "graph.svg"))
try:
    picture = inspect.plot_attention(weights, list(SEED_TOKENS), args.out / "attention.png",
                                     title="one causal head")
    print("attention heatmap written to", picture)
except ImportError as err:
    print("no heatmap:", err)
print("\ndone: backprop through attention")
