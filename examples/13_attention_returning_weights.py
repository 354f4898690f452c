"""The scaled-dot-product notebook (``examples/seeds/004_…txt``) redone in tinyattn: an attention
function that returns ``(output, weights)`` on a batch, and a multi-head self-attention module
built from four Linear layers, a view into heads and that function. Both are compared with
tinyattn's own layers — ``F.scaled_dot_product_attention(..., need_weights=True)`` (a tinyattn
extra: PyTorch's function returns no weights) and ``nn.MultiHeadAttention`` — and with the
notebook's own function and class (its cells are run here), values, weights and gradients.

    python examples/13_attention_returning_weights.py
"""

import sys
from pathlib import Path

import numpy as np

import tinyattn as ta
from tinyattn.study import compare

sys.path.insert(0, str(Path(__file__).resolve().parent / "seeds"))
import notebook  # noqa: E402  (runs a seed notebook's cells)

F = ta.nn.functional
np.set_printoptions(precision=4, suppress=True)
rng = np.random.default_rng(0)


def attention(query, key, value):
    """``softmax(Q Kᵀ / √d_k) V`` over the last two dims; returns the output and the weights."""
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / d_k ** 0.5  # (..., T, S)
    weights = F.softmax(scores, dim=-1)  # every row sums to 1
    return weights @ value, weights  # (..., T, Dv), (..., T, S)


class MultiHeadSelfAttention(ta.nn.Module):
    """Q, K, V projections of width C, split into H heads of D = C / H; attention per head; the
    heads side by side through an output projection. Returns the output and the weights."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.linear_q = ta.nn.Linear(d_model, d_model)
        self.linear_k = ta.nn.Linear(d_model, d_model)
        self.linear_v = ta.nn.Linear(d_model, d_model)
        self.linear_out = ta.nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape

        def heads(t):
            return t.view(B, T, self.num_heads, self.d_k).transpose(1, 2)  # (B, H, T, D)

        q, k, v = heads(self.linear_q(x)), heads(self.linear_k(x)), heads(self.linear_v(x))
        z, weights = attention(q, k, v)  # (B, H, T, D), (B, H, T, T)
        z = z.transpose(1, 2).reshape(B, T, C)  # (B, T, H*D): heads side by side
        return self.linear_out(z), weights


def leaf(*shape):
    return ta.tensor(rng.standard_normal(shape), requires_grad=True)  # float64


print("--- the notebook's own cells (imports swapped to tinyattn) ---")
run = notebook.run("004_92dd7a91a633e5a3.txt")
nb_attention = run.namespace["self_attention"]
NbMultiHead = run.namespace["MultiHeadSelfAttention"]
print("its example call:", run.namespace["output"].shape, run.namespace["attention_weights"].shape)

print("\n--- 1. attention returning (output, weights) on a batch ---")
B, T, S, D = 2, 5, 6, 8
q, k, v = leaf(B, T, D), leaf(B, S, D), leaf(B, S, D)
out, weights = attention(q, k, v)
print("output", out.shape, "weights", weights.shape, "; weights of the first query:\n",
      weights[0, 0].numpy())
compare("every row of the weights sums to 1", weights.sum(dim=-1), np.ones((B, T)))
sdpa_out, sdpa_weights = F.scaled_dot_product_attention(q, k, v, need_weights=True)
compare("output == F.scaled_dot_product_attention", out, sdpa_out, tol=1e-14)
compare("weights == its need_weights=True weights", weights, sdpa_weights, tol=1e-15)
compare("output == the fused kernel (no weights)", out,
        F.scaled_dot_product_attention(q, k, v, impl="fused"), tol=1e-14)
nb_out, nb_weights = nb_attention(q, k, v)
compare("== the notebook's self_attention (output)", nb_out, out, tol=1e-7)
compare("== the notebook's self_attention (weights)", nb_weights, weights, tol=1e-7)
print("(the notebook divides by torch.sqrt(torch.tensor(d_k, dtype=torch.float32)): "
      "sqrt(8) rounded to float32, hence 1e-8 and not 1e-16)")

print("\n--- 2. gradients through both outputs ---")
G_out, G_weights = rng.standard_normal(out.shape), rng.standard_normal(weights.shape)
grads = {}
for name, fn in (("ours", attention), ("sdpa", lambda *a: F.scaled_dot_product_attention(
        *a, need_weights=True))):
    inputs = [t.detach().requires_grad_() for t in (q, k, v)]
    o, w = fn(*inputs)
    ((o * ta.tensor(G_out)).sum() + (w * ta.tensor(G_weights)).sum()).backward()
    grads[name] = [t.grad.numpy() for t in inputs]
for i, name in enumerate("qkv"):
    compare(f"d{name}: ours == F.scaled_dot_product_attention's", grads["ours"][i],
            grads["sdpa"][i], tol=1e-13)
# By hand, with P the weights: dV = Pᵀ dO; dP = dO Vᵀ + (the weights' own cotangent);
# dS = P ⊙ (dP − rowsum(dP ⊙ P)); dQ = dS K / √D.
P = weights.detach().numpy()
dP = G_out @ v.detach().numpy().transpose(0, 2, 1) + G_weights
dS = P * (dP - (dP * P).sum(-1, keepdims=True))
compare("dV == P^T dO", grads["ours"][2], P.transpose(0, 2, 1) @ G_out, tol=1e-13)
compare("dQ == dS K / sqrt(D)", grads["ours"][0], dS @ k.detach().numpy() / D ** 0.5, tol=1e-13)
print("gradcheck of attention() w.r.t. q, k, v (both outputs):",
      ta.gradcheck(attention, [q, k, v]))

print("\n--- 3. the multi-head module vs nn.MultiHeadAttention ---")
C, H = 16, 4
ta.manual_seed(0)
ours = MultiHeadSelfAttention(C, H).double()
layer = ta.nn.MultiHeadAttention(C, H).double()  # q_proj, k_proj, v_proj, out_proj
renamed = {"linear_q": "q_proj", "linear_k": "k_proj", "linear_v": "v_proj",
           "linear_out": "out_proj"}
layer.load_state_dict({renamed[key.split(".")[0]] + "." + key.split(".")[1]: value
                       for key, value in ours.state_dict().items()})
print("our parameters:", list(ours.state_dict()))
print("as nn.MultiHeadAttention's:", list(layer.state_dict()))
x = leaf(2, T, C)
x_copy = x.detach().requires_grad_()
out, weights = ours(x)
layer_out, layer_weights = layer(x_copy, need_weights=True, average_attn_weights=False)
compare("output == nn.MultiHeadAttention", out, layer_out, tol=1e-14)
compare("weights (B, H, T, T) == its per-head weights", weights, layer_weights, tol=1e-15)
G = rng.standard_normal(out.shape)
(out * ta.tensor(G)).sum().backward()
(layer_out * ta.tensor(G)).sum().backward()
compare("dx == nn.MultiHeadAttention's dx", x.grad, x_copy.grad, tol=1e-14)
layer_params = dict(layer.named_parameters())
for name, param in ours.named_parameters():
    module, kind = name.split(".")
    compare(f"d{name} == d{renamed[module]}.{kind}", param.grad,
            layer_params[f"{renamed[module]}.{kind}"].grad, tol=1e-13)

notebook_module = NbMultiHead(d_model=C, num_heads=H).double()
notebook_module.load_state_dict(ours.state_dict())  # the same parameter names
nb_out, nb_weights = notebook_module(x.detach())
compare("== the notebook's MultiHeadSelfAttention (output)", nb_out, out, tol=1e-7)
compare("== the notebook's MultiHeadSelfAttention (weights)", nb_weights, weights, tol=1e-7)
averaged = layer(x.detach(), need_weights=True)[1]  # PyTorch's default: mean over the heads
compare("average_attn_weights=True == mean over heads", averaged, weights.mean(dim=1),
        tol=1e-15)
print("\ndone: attention that returns its weights, forward and backward")
