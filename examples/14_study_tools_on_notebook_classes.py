"""tinyattn's study tools on classes a learner wrote for PyTorch: the ``CausalAttention`` and
``MultiHeadAttention`` classes of the seed notebook ``examples/seeds/003_…txt``, taken from its
own cells (run on tinyattn with only the imports swapped). A backward trace of the multi-head
class, its graph as Graphviz DOT, a gradcheck of both classes and finite differences for every
parameter, and a heatmap of its attention weights — caught on the way with a forward hook,
since the class does not return them.

    python examples/14_study_tools_on_notebook_classes.py [--out DIR]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

import tinyattn as ta
from tinyattn import inspect
from tinyattn.study import SEED_TOKENS, TOLERANCE, compare, numeric_gradient

sys.path.insert(0, str(Path(__file__).resolve().parent / "seeds"))
import notebook  # noqa: E402  (runs a seed notebook's cells)

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", type=Path, default=Path("runs/notebook_classes"),
                    help="folder for the graph and the heatmap")
args = parser.parse_args()
np.set_printoptions(precision=4, suppress=True)

run = notebook.run("003_4d985f52cc556509.txt")
CausalAttention = run.namespace["CausalAttention"]  # the notebook's classes, unchanged
MultiHeadAttention = run.namespace["MultiHeadAttention"]
batch = run.namespace["batch"].double()  # (2, 6, 3): the seed sentence twice
print("the notebook's classes:", CausalAttention.__name__, MultiHeadAttention.__name__,
      "; its batch:", batch.shape)

ta.manual_seed(123)
mha = MultiHeadAttention(d_in=3, d_out=4, context_length=6, dropout=0.0, num_heads=2).double()
# The class builds nn.Dropout(p=0.5) whatever `dropout` says; eval() switches it off so that
# every call computes the same function (needed for finite differences).
mha.eval()
print(mha)

print("\n--- the attention weights, caught by a forward hook on the dropout layer ---")
caught = []
hook = mha.dropout.register_forward_hook(lambda module, inputs, output: caught.append(output))
context = mha(batch)  # (2, 6, 4)
hook.remove()
weights = caught[0]  # (B, H, T, T): what the dropout layer received
print("weights of head 0, first sentence:\n", weights[0, 0].numpy())
compare("causal: no weight above the diagonal", np.triu(weights.numpy(), k=1),
        np.zeros(weights.shape), tol=0)
compare("every row sums to 1", weights.sum(dim=-1), np.ones((2, 2, 6)))

print("\n--- a backward trace: every op, the gradient norm in and out ---")
G = ta.tensor(np.random.default_rng(0).standard_normal(context.shape))  # a random dL/dcontext
loss = (context * G).sum()
record = inspect.trace(loss, retain_graph=True)
print(record)
ops = [row.name for row in record]
print("ops seen:", sorted(set(ops)))
for op in ("MaskedFill", "Softmax", "MatMul", "Linear"):
    assert op in ops, f"{op} missing from the trace"
print("  [ok] the in-place masked_fill_ of the notebook is a node of the graph like any op")
# d loss / d context = G, so the norm the trace shows going into the context is ‖G‖.
times_G = next(row for row in record if row.name == "Mul")  # context * G
compare("trace: |grad| sent to the context == |G|", times_G.input_grad_norms[0],
        np.linalg.norm(G.numpy()))

dot = inspect.to_dot(loss, record, names=dict(mha.named_parameters()))
for name, _ in mha.named_parameters():
    assert name in dot, name
print(f"DOT graph: {dot.count('shape=box')} ops, {dot.count(' -> ')} edges, "
      f"{len(list(mha.parameters()))} parameters named")
args.out.mkdir(parents=True, exist_ok=True)
print("graph written to", inspect.render(dot, args.out / "graph.svg"))

print("\n--- finite differences for every parameter of the notebook's class ---")


def loss_at(param, value):
    """The loss with ``param``'s numbers replaced by ``value`` (its array is changed in place
    and restored: ``.numpy()`` is the array itself)."""
    saved = param.numpy().copy()
    param.numpy()[...] = value
    with ta.no_grad():
        result = (mha(batch) * G).sum().item()
    param.numpy()[...] = saved
    return result


for name, param in mha.named_parameters():
    numeric = numeric_gradient(lambda value, p=param: loss_at(p, value), param.numpy().copy())
    compare(f"d{name} (from the trace's backward) vs finite differences", param.grad, numeric,
            tol=TOLERANCE)

print("\n--- gradcheck of the notebook's classes w.r.t. their input ---")
x = batch.detach().requires_grad_()
print("MultiHeadAttention:", ta.gradcheck(mha, [x]))
ta.manual_seed(123)
head = CausalAttention(3, 2, context_length=6, dropout=0.0).double().eval()
print("CausalAttention:", ta.gradcheck(head, [x]))

try:
    picture = inspect.plot_attention(weights[0], list(SEED_TOKENS), args.out / "attention.png",
                                     title="the notebook's MultiHeadAttention, first sentence")
    print("attention heatmap (one panel per head) written to", picture)
except ImportError as err:
    print("no heatmap:", err)
print("\ndone: trace, graph, gradcheck and heatmap of the notebook's own classes")
