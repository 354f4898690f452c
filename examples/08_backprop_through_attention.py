"""The backprop-through-attention walkthrough one step at a time (``tinyattn walkthrough`` runs
the same steps in one go):

    dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),  dQ = dS K·s,  dK = dSᵀ Q·s

each printed next to tinyattn's autograd and finite differences, then the composed vs fused
attention paths and a backward trace. Every step returns what it computed (tensors, arrays,
the disagreement of each check), so between the steps the example looks at it. Afterwards the
graph of one attention head is exported (Graphviz DOT, rendered when ``dot`` is installed) and
its weights drawn as a heatmap.

    python examples/08_backprop_through_attention.py [--out DIR]
"""

import argparse
from pathlib import Path

import numpy as np

import tinyattn as ta
from tinyattn import inspect, walkthrough
from tinyattn.study import SEED_EMBEDDINGS, SEED_TOKENS, TOLERANCE, compare

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", type=Path, default=Path("runs/walkthrough"), help="picture folder")
parser.add_argument("--fast", action="store_true", help="accepted for symmetry (already fast)")
args = parser.parse_args()
T = len(SEED_TOKENS)

inputs = walkthrough.make_inputs()  # X (6, 3); W_q, W_k, W_v (3, 2); G = dL/dO (6, 2)
print(inputs)
forward_pass = walkthrough.forward(inputs)  # Q, K, V, S, P, O: tensors that keep their .grad
print(forward_pass)
compare("every row of P sums to 1", forward_pass.P.sum(dim=-1), np.ones(T))

hand = walkthrough.backward_by_hand(inputs, forward_pass)  # numpy arrays dO ... dW_v
by_autograd = walkthrough.backward_by_autograd(forward_pass)  # the same fields, from .grad
numeric = walkthrough.backward_by_finite_differences(inputs, forward_pass)
gradients = walkthrough.compare_gradients(hand, by_autograd, numeric)
print(gradients)
# A constant added to a row of scores leaves its softmax unchanged, so the row of dS sums to 0.
compare("every row of dS sums to 0", hand.dS.sum(axis=-1), np.zeros(T))

paths = walkthrough.compare_paths(inputs, forward_pass)  # sdpa: composed vs fused kernel
print(paths)
print(walkthrough.trace_backward(inputs, forward_pass))
errors = {**gradients.errors, **paths.errors}
print(walkthrough.verdict(errors))
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
