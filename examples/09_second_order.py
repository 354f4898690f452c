"""Second order through attention (``tinyattn walkthrough --second-order`` prints the same):

1. the Jacobian of one row of attention weights, ``diag(p) − p pᵀ``, from tinyattn's
   ``jacobian`` — printed, checked against the formula, drawn as a heatmap;
2. how that Jacobian degenerates when a row saturates (scores scaled by 1 instead of 1/√d_k);
3. the top Hessian eigenvalue of the loss along ``W_q`` and along ``W_v``, by power iteration
   on Hessian-vector products, checked against the eigenvalues of the full Hessian;
4. a few training steps on a gradient-norm penalty, whose gradient runs through the recorded
   backward pass — checked against finite differences.

    python examples/09_second_order.py [--out DIR]
"""

import argparse
from pathlib import Path

import numpy as np

import tinyattn as ta
from tinyattn import curvature, inspect
from tinyattn.study import SEED_TOKENS, compare

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", type=Path, default=Path("runs/second_order"), help="picture folder")
parser.add_argument("--fast", action="store_true", help="accepted for symmetry (already fast)")
args = parser.parse_args()

head = curvature.make_head()  # the walkthrough's head on "Your journey starts with one step"
jacobian = curvature.softmax_jacobian(head, row=1)
print(jacobian)
compare("J == diag(p) - p p^T", jacobian.J, np.diag(jacobian.p) - np.outer(jacobian.p, jacobian.p))
compare("every row of J sums to 0", jacobian.J.sum(axis=1), np.zeros(len(SEED_TOKENS)))
try:
    path = inspect.plot_attention(jacobian.J, list(SEED_TOKENS), args.out / "softmax_jacobian.png",
                                  title='d softmax(s) / d s for the row of "journey"')
    print(f"heatmap: {path}")
except ImportError as err:  # matplotlib is optional
    print(f"(no heatmap: {err})")

saturated = curvature.saturation()
print(saturated)
(_, _, _, spread), (_, _, _, sharp) = saturated.rows
compare("the saturated row passes less gradient (ratio of eigenvalues > 100)",
        float(spread / sharp > 100), 1.0)

curve = curvature.hessian_eigenvalues(head)
print(curve)
loss = head.loss()
for name, index in (("W_q", 0), ("W_v", 2)):
    def along(w, index=index):
        args_ = [ta.tensor(head.weights[n]) for n in ("W_q", "W_k", "W_v")]
        args_[index] = w
        return loss(*args_)
    H = ta.autograd.functional.hessian(along, ta.tensor(head.weights[name])).numpy()
    top = float(np.linalg.eigvalsh(H.reshape(6, 6)).max())
    compare(f"power iteration along {name} == top eigenvalue of the full Hessian",
            curve.eigenvalues[name], top, tol=1e-8)

penalty = curvature.gradient_penalty(head)
print(penalty)
w = ta.tensor(head.weights["W_q"], requires_grad=True)


def penalised(w_q):
    with ta.enable_grad():  # gradcheck evaluates under no_grad; the penalty needs a graph
        value = loss(w_q, ta.tensor(head.weights["W_k"]), ta.tensor(head.weights["W_v"]))
        (g,) = ta.autograd.grad(value, w_q, create_graph=True)
        return value + 0.5 * (g * g).sum()


print(f"  gradient of the penalised loss vs finite differences: {ta.gradcheck(penalised, (w,))}")
print("all checks passed")
