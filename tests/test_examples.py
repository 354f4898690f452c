"""Every example runs to completion (in fast mode where it has one) and prints its checks."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# script -> (extra arguments, lines that must appear in its output)
EXPECTED = {
    "01_simplified_attention.py": ([], ["d scores = P * (dP - rowsum(dP * P))",
                                        "d inputs vs finite differences"]),
    "02_trainable_qkv.py": ([], ["SelfAttention output == parameter-matrix output",
                                 "W_query.grad == q_proj.weight.grad^T"]),
    "03_causal_and_dropout.py": ([], ["weights (a) == weights (b)", "dK (a) == dK (b)",
                                      "gradient == upstream * mask / (1 - p)"]),
    "04_batched_causal_attention.py": ([], ["SelfAttention(causal=True) == CausalAttention",
                                            "of the batch == sum over examples"]),
    "05_multihead_wrapper_vs_split.py": ([], ["wrapper output == split-heads output",
                                              "head 1 v_proj.weight.grad"]),
    "06_eight_heads_d512.py": ([], ["MultiHeadAttention(512, 8) == the eight heads",
                                    "head 7 dW_v"]),
    "07_embedding_to_context.py": ([], ["unused rows have zero gradient",
                                        "gradcheck of the whole path w.r.t. the embedding "
                                        "table: True"]),
    "08_backprop_through_attention.py": (["--out", "{tmp}"], ["all checks passed",
                                                              "dQ = dS K * s",
                                                              "every row of dS sums to 0",
                                                              "fused vs composed (causal)"]),
    "09_second_order.py": (["--out", "{tmp}"], ["J == diag(p) - p p^T",
                                                "top eigenvalue of the full Hessian",
                                                "vs finite differences: True"]),
    "10_modern_attention.py": ([], ["dK of a shared head == the sum over its query heads",
                                    "dq == d q_rot rotated by",
                                    "dS == 0 outside the band",
                                    "cached logits == recomputed logits at every step",
                                    "greedy tokens identical"]),
    "11_numpy_notebook_on_tinyattn.py": ([], ["== the notebook's multi_head_attention(X, 2)",
                                              "two heads: dW_o (autograd) vs finite differences",
                                              "gradcheck of both functions w.r.t. all weights: "
                                              "True True"]),
    "12_embedding_heads_with_bmm.py": ([], ["bmm: dU_k == bmm(d out, stacked^T)",
                                            "repeat: dX == (sum over heads of d stacked)^T",
                                            "token 3 twice: its row gets the sum of both",
                                            "w.r.t. U_q, U_k, U_v and the table: True"]),
    "13_attention_returning_weights.py": ([], ["weights == its need_weights=True weights",
                                               "weights (B, H, T, T) == its per-head weights",
                                               "dlinear_out.weight == dout_proj.weight",
                                               "== the notebook's MultiHeadSelfAttention"]),
    "14_study_tools_on_notebook_classes.py": (["--out", "{tmp}"], [
        "trace: |grad| sent to the context == |G|", "MaskedFill",
        "dW_query.weight (from the trace's backward) vs finite differences",
        "MultiHeadAttention: True", "CausalAttention: True"]),
    "train_sequence_tasks.py": (["--fast", "--out", "{tmp}"], ["=== reverse ===",
                                                               "held-out token accuracy:"]),
    "train_char_lm.py": (["--fast", "--out", "{tmp}"], ["sample:", "eval loss:"]),
}


def test_every_example_is_covered():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_runs_and_prints_its_checks(script, tmp_path):
    extra, expected = EXPECTED[script]
    args = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    for line in expected:
        assert line in result.stdout, f"{script} did not print {line!r}"
    assert "FAIL" not in result.stdout
    if script.startswith("0"):
        assert "[ok]" in result.stdout or "all checks passed" in result.stdout
