"""What the backward pass of attention keeps in memory: the composed path beside the fused one.

One causal multi-head attention layer, run once on each path; the memory ledger of each graph
lists every array saved for the backward pass. The composed path keeps the (B, H, T, T)
weights; the fused kernel keeps its output and one log-sum-exp per row, and recomputes the
weights in its backward. Then the same at growing T: the composed path's T²-sized memory grows
four-fold per doubling, the fused path's attention memory two-fold.

Run: ``python examples/lab/memory_ledger_side_by_side.py``
"""

from __future__ import annotations

import tinyattn as ta
from tinyattn import inspect

B, H, D = 2, 4, 12  # batch, heads, head size: D and H·D differ from every T used here,
# so that only the weights (and the mask) have two trailing dims of T


def ledger(impl: str, T: int) -> inspect.MemoryLedger:
    ta.manual_seed(0)
    layer = ta.nn.MultiHeadAttention(H * D, H, causal=True, impl=impl)
    x = ta.randn(B, T, H * D)
    return inspect.memory_ledger((layer(x) * ta.randn(B, T, H * D)).sum())


def attention_arrays(book: inspect.MemoryLedger) -> list[str]:
    """The arrays saved by the attention ops themselves (not by the projections)."""
    return [f"{e.name} {e.item} {e.shape} {e.nbytes:,} B" + (" T²" if e.quadratic else "")
            for e in book.entries if e.name in ("FusedAttention", "Softmax", "MaskedFill")
            or (e.name == "MatMul" and len(e.shape) == 4)]


def main() -> None:
    T = 64
    composed, fused = ledger("composed", T), ledger("fused", T)
    rows = [
        ("saved arrays", len(composed.entries), len(fused.entries)),
        ("bytes, every entry", f"{composed.total_bytes:,}", f"{fused.total_bytes:,}"),
        ("bytes, distinct memory", f"{composed.distinct_bytes:,}", f"{fused.distinct_bytes:,}"),
        ("bytes growing with T²", f"{composed.quadratic_bytes:,}", f"{fused.quadratic_bytes:,}"),
    ]
    print(f"MultiHeadAttention, B={B}, H={H}, T={T}, D={D}, float32, causal\n")
    print(f"{'':24s}{'composed':>22s}{'fused':>22s}")
    for label, left, right in rows:
        print(f"{label:24s}{left!s:>22s}{right!s:>22s}")
    print("\nsaved by the attention ops:")
    left, right = attention_arrays(composed), attention_arrays(fused)
    for i in range(max(len(left), len(right))):
        print(f"  {left[i] if i < len(left) else '':52s}  {right[i] if i < len(right) else ''}")
    print("\ncomposed path, every saved array:")
    print(composed)
    print("\nfused path, every saved array:")
    print(fused)
    print("\nas T doubles: bytes of the weights and mask (composed), of out and lse (fused)")
    print(f"{'T':>6s}{'composed':>14s}{'fused':>14s}")
    for length in (32, 64, 128, 256):
        sizes = []
        for impl in ("composed", "fused"):
            book = ledger(impl, length)
            sizes.append(book.quadratic_bytes if impl == "composed"  # P once, and the mask
                         else sum(e.nbytes for e in book.entries if e.name == "FusedAttention"
                                  and e.item in ("saved[3]", "saved[4]")))  # out and lse
        print(f"{length:6d}{sizes[0]:14,d}{sizes[1]:14,d}")
    print("\nthe composed path keeps the (B, H, T, T) weights; the fused path keeps out and lse")


if __name__ == "__main__":
    main()
