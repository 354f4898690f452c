"""A tour of the attention gradient lab on a small character-level transformer.

Trains a 2-layer, 4-head model for a few steps on tinyshakespeare (the corpus shipped with
tinyattn), then: checks every node of one training step's graph against finite differences,
explains the gradient of layer 0's W_q, captures the gradient-routing maps (P, dP, dS) of a
held-out sequence, rolls the gradient out across layers, and tabulates how saturated each head's
softmax is. With ``--out`` the maps, the rollout and the scale lab are drawn there.

Run: ``python examples/lab/gradient_lab.py [--steps 40] [--out runs/lab]``
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import tinyattn as ta
from tinyattn import inspect
from tinyattn.tasks import CharDataset, default_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="training steps first (40)")
    parser.add_argument("--out", type=Path, help="write maps.png, rollout.png, scale.png here")
    args = parser.parse_args()

    data = CharDataset(default_corpus(), context_length=24)
    rng = np.random.default_rng(0)
    ta.manual_seed(0)
    config = ta.models.TransformerLMConfig(data.vocab_size, 24, embed_dim=32, num_heads=4,
                                           num_layers=2)
    model = ta.TransformerLM(config)
    optimizer = ta.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(args.steps):
        idx, targets = (ta.tensor(a) for a in data.batch("train", 16, rng))
        _, loss = model(idx, targets=targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"trained {args.steps} steps, loss {loss.item():.3f}")
    model.eval()

    idx, targets = (ta.tensor(a) for a in data.batch("eval", 4, rng))
    _, loss = model(idx, targets=targets)
    report = inspect.check_graph(loss)
    print("\n== check_graph:", report.summary())

    _, loss = model(idx, targets=targets)
    explanation = inspect.explain(model.blocks[0].attn.q_proj.weight, loss, names=model)
    print("\n== explain:", explanation.formula)
    fused = next(step for step in explanation.steps if step.symbol == "dQ₀")
    print(f"   {explanation.paths} paths from the loss; layer 0's fused attention sends "
          f"{fused.symbol} = {fused.rule.split('  ')[0]}")

    sequence = (idx[:1], targets[:1])
    maps = inspect.attention_gradients(model, sequence)
    print("\n== gradient-routing maps of one held-out sequence")
    print(maps)

    rollout = inspect.gradient_rollout(maps)
    print("\n== gradient rollout: gradient each input position receives, per layer and head")
    for layer, name in enumerate(rollout.layers):
        for head in range(rollout.per_head.shape[1]):
            amounts = rollout.per_head[layer, head]
            print(f"{name} head {head}: most to position {int(np.argmax(amounts)):2d}, "
                  f"total {amounts.sum():.3e}")

    print("\n== saturation per head")
    print(inspect.saturation(maps))

    if args.out:
        tokens = list(data.decode(idx.numpy()[0]))
        print("\nwrote", inspect.plot_attention_gradients(maps, args.out / "maps.png",
                                                          tokens=tokens),
              inspect.plot_gradient_rollout(rollout, args.out / "rollout.png", tokens=tokens))
        head_size = config.embed_dim // config.num_heads
        lab = inspect.scale_lab(model, (idx, targets), inspect.standard_scales(head_size, 8.0))
        print(lab)
        print("wrote", inspect.plot_scale_lab(lab, args.out / "scale.png"))


if __name__ == "__main__":
    main()
