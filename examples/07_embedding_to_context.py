"""From token ids to context vectors: a tiny tokenizer, token + position embeddings, causal
multi-head attention — and the gradient back into the embedding table.

Only the rows of tokens that occur receive a gradient; a token that occurs twice gets the sum
of the gradients of both occurrences (the backward of a lookup is a scatter-add).

    python examples/07_embedding_to_context.py
"""

import numpy as np

import tinyattn as ta
from tinyattn.study import compare

np.set_printoptions(precision=4, suppress=True)
text = "your journey starts with one step and one more step"
vocab = sorted(set(text.split())) + ["<pad>", "<unk>"]  # two tokens that never occur
ids = np.array([vocab.index(word) for word in text.split()])
print("vocabulary:", vocab)
print("token ids: ", ids.tolist())

ta.manual_seed(123)
embed_dim, num_heads = 8, 2
token_embedding = ta.nn.Embedding(len(vocab), embed_dim).double()
position_embedding = ta.nn.Embedding(len(ids), embed_dim).double()
attention = ta.nn.MultiHeadAttention(embed_dim, num_heads, causal=True).double()

idx = ta.tensor(ids[None])  # (1, T): a batch of one sequence
x = token_embedding(idx) + position_embedding(ta.arange(len(ids)))  # (1, T, 8)
context, weights = attention(x, need_weights=True)  # (1, T, 8), (1, T, T) head-averaged
print("embeddings:", x.shape, "-> context vectors:", context.shape)
print("attention weights (averaged over heads), row = query:\n", weights.numpy()[0])
compare("causal: no weight on future tokens", np.triu(weights.numpy()[0], k=1),
        np.zeros((len(ids), len(ids))))

print("\n--- backward into the embedding table ---")
G = ta.tensor(np.random.default_rng(0).standard_normal(context.shape))  # random dL/dcontext
(context * G).sum().backward()
grad = token_embedding.weight.grad.numpy()
unused = [i for i in range(len(vocab)) if i not in ids]
print("rows of unused tokens", [vocab[i] for i in unused], "get no gradient")
compare("unused rows have zero gradient", grad[unused], np.zeros((len(unused), embed_dim)))
# dL/dx is the same for the token table and the position table (x is their sum), so the
# gradient of a token row is the sum of the position gradients where that token occurs.
per_position = position_embedding.weight.grad.numpy()
for word in ("one", "step"):
    where = np.flatnonzero(ids == vocab.index(word))
    compare(f"row '{word}' (positions {where.tolist()}) == sum of its occurrences",
            grad[vocab.index(word)], per_position[where].sum(axis=0))


def loss_of(table):
    x = ta.nn.functional.embedding(idx, table) + position_embedding(ta.arange(len(ids)))
    return attention(x)


weight = token_embedding.weight.detach().requires_grad_()
print("gradcheck of the whole path w.r.t. the embedding table:",
      ta.gradcheck(loss_of, [weight]))
print("\ndone: token ids to context vectors, forward and backward")
