#!/usr/bin/env python
"""Mutation check: plant realistic bugs in tinyattn one at a time and see whether the tests
catch them.

Each entry of :data:`MUTANTS` names a file, an exact snippet of it (which must occur there
exactly once), its replacement, the bug it stands for, and the tests that should catch it. For
every mutant the script changes a scratch copy of this working tree (uncommitted changes
included; the tree itself is never changed), runs ``python -m pytest -x -q -p no:cacheprovider
<tests>`` in it with the scratch copy first on ``PYTHONPATH``, restores the file, and reports
whether a test failed (caught), none did (SURVIVED), the snippet was not found exactly once
(stale: the code changed, update the entry) or the run took too long (timeout). It prints a
table and a score.

    python tools/mutants.py                      # every mutant: about 10 min on 2 cores
    python tools/mutants.py --list               # the mutants, checked for staleness
    python tools/mutants.py --only softmax-kernel-row-sum engine-unbroadcast-axis
    python tools/mutants.py --only 'attn-*' --tests tests/kernels/test_attention_kernel.py

numba's on-disk cache. The kernels are compiled with ``cache=True``; numba keys a function's
cache entry on the contents of *its own* source file only, so a function that inlines a helper
from another file (``fast_exp``, the row sums, the register tile) would load its old machine
code after that helper was mutated. The runs therefore use a cache directory of the scratch
copy (``NUMBA_CACHE_DIR``), warmed by the unmutated code; a mutant in ``tinyattn/kernels/`` runs
on a throwaway copy of it without the entries of the mutated module and of every module or test
file that imports it, directly or not, so that all of those are compiled again from the mutated
source. Nothing a mutant compiles reaches the shared cache.

Before the mutants, a baseline run of the selected test files on the unmutated copy must pass
(it also warms the cache), and two sanity mutants must be caught: a blatant one in an op's
rule (the runs import the scratch copy: the editable install points elsewhere, and the path
``tinyattn.__file__`` of a run is printed first) and one in ``fast_exp`` that only the softmax
kernel tests see, through kernels that inline it (a stale compiled kernel would hide it).

The script is a development tool: it is not part of the package, not collected by pytest (the
``testpaths`` are ``tests`` and ``tinyattn``) and not run by CI.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import datetime
import fnmatch
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# What is not copied into the scratch tree: version control, caches (bytecode and numba's
# compiled kernels included: the scratch tree compiles its own) and build output.
_IGNORED = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", "*.nbi", "*.nbc",
                                  ".pytest_cache", ".ruff_cache", ".hypothesis", "*.egg-info",
                                  "build", "dist", ".ipynb_checkpoints", "venv", ".venv")


@dataclass(frozen=True)
class Mutant:
    """One planted bug.

    ``tests`` are pytest arguments: files, node ids or ``-k EXPR`` selections, run in order
    (the quickest likely catcher first: ``-x`` stops at the first failure). ``reason`` documents
    why a mutant cannot be caught (an equivalent mutant); such a survivor is reported as
    ``survived (documented)``.
    """

    id: str
    file: str
    original: str
    replacement: str
    description: str
    tests: tuple[str, ...]
    reason: str = ""


def mutant(id: str, file: str, original: str, replacement: str, description: str,
           *tests: str, reason: str = "") -> Mutant:
    return Mutant(id, file, original, replacement, description, tuple(tests), reason)


# Frequently used selections.
HIGHER = "tests/test_higher_order.py"
FAST = "tests/test_fast_paths.py"
GRADCHECK = "tests/test_ops_gradcheck.py"
AUTOGRAD = "tests/test_autograd.py"

MUTANTS: list[Mutant] = [
    # ---- elementwise, reduction, shape and index rules (tinyattn/ops) -------------------------
    mutant("rule-mul-operands-swapped", "tinyattn/ops/arithmetic.py",
           "return (grad * b if b is not None else None, grad * a if a is not None else None)",
           "return (grad * a if a is not None else None, grad * b if b is not None else None)",
           "Mul's rule multiplies each gradient by its own operand instead of the other one",
           GRADCHECK, HIGHER),
    mutant("needs-input-grad-mul-saved", "tinyattn/ops/arithmetic.py",
           "ctx.save_for_backward(a if need_b else None, b if need_a else None)",
           "ctx.save_for_backward(a if need_a else None, b if need_b else None)",
           "Mul saves the operand of the input that needs a gradient, not the one its "
           "gradient is made of (needs_input_grad read the wrong way round)",
           AUTOGRAD, GRADCHECK, HIGHER),
    mutant("rule-div-sign", "tinyattn/ops/arithmetic.py",
           "-grad * a / (b * b) if need_b else None",
           "grad * a / (b * b) if need_b else None",
           "Div's gradient for the divisor loses its minus sign",
           GRADCHECK, HIGHER),
    mutant("rule-sub-sign", "tinyattn/ops/arithmetic.py",
           "return grad, (-grad if ctx.needs_input_grad[1] else None)",
           "return grad, (grad if ctx.needs_input_grad[1] else None)",
           "Sub passes +g to the subtrahend",
           GRADCHECK, HIGHER),
    mutant("rule-pow-exponent", "tinyattn/ops/arithmetic.py",
           "return grad * ctx.exponent * a ** (ctx.exponent - 1), None",
           "return grad * ctx.exponent * a ** ctx.exponent, None",
           "x^p's rule forgets to lower the exponent: p·x^p instead of p·x^(p−1)",
           GRADCHECK, HIGHER),
    mutant("pow-scalar-cube-squares", "tinyattn/ops/arithmetic.py",
           'return binary("mul", binary("mul", values, values), values)',
           'return binary("mul", values, values)',
           "x ** 3 squares instead of cubing (the products that replace numpy's pow)",
           GRADCHECK, "-k", "pow"),
    mutant("rule-tanh", "tinyattn/ops/unary.py",
           "binary(\"sub\", np.array(1, t.dtype), binary(\"mul\", t, t))",
           "binary(\"sub\", np.array(1, t.dtype), t)",
           "tanh's backward op uses 1 − y instead of 1 − y²",
           GRADCHECK, HIGHER),
    mutant("rule-tanh-output-detached", "tinyattn/ops/unary.py",
           "-2 * h * grad * y if need_y else None",
           "None",
           "tanh's backward op sends no gradient to tanh's output y: first derivatives are "
           "right, the second (create_graph) loses the −2y·dy term",
           HIGHER, GRADCHECK),
    mutant("rule-sqrt", "tinyattn/ops/unary.py",
           "return grad / (2 * y)",
           "return grad / y",
           "sqrt's rule forgets the factor ½",
           GRADCHECK, HIGHER),
    mutant("rule-sigmoid", "tinyattn/ops/unary.py",
           "binary(\"mul\", s, binary(\"sub\", np.array(1, s.dtype), s))",
           "binary(\"sub\", np.array(1, s.dtype), s)",
           "sigmoid's backward op drops the factor y of y(1 − y)",
           GRADCHECK, HIGHER),
    mutant("rule-sigmoid-second", "tinyattn/ops/unary.py",
           "h * grad * (1 - 2 * y) if need_y else None",
           "h * grad * (1 - y) if need_y else None",
           "sigmoid's backward op differentiates y(1 − y) as 1 − y instead of 1 − 2y: first "
           "derivatives are right, the second is not",
           GRADCHECK, HIGHER),
    mutant("rule-relu-kink", "tinyattn/ops/unary.py",
           "return where(y <= 0, 0.0, grad)",
           "return where(y < 0, 0.0, grad)",
           "relu's rule tests the output with < (never true: the output is >= 0), so negative "
           "inputs pass their gradient on",
           GRADCHECK, HIGHER),
    mutant("rule-mean-count", "tinyattn/ops/reduce.py",
           "        count = _reduced_count(shape, axes)\n        if count > 1:\n"
           "            grad = grad / count",
           "        count = shape[axes[0]] if axes else 1\n        if count > 1:\n"
           "            grad = grad / count",
           "mean's rule divides by the size of the first reduced dim only (wrong when several "
           "dims are reduced)",
           GRADCHECK, HIGHER, "tests/test_ops_prod_norm.py"),
    mutant("rule-var-correction", "tinyattn/ops/reduce.py",
           'divisor = _reduced_count(x.shape, axes) - ctx.kwargs["correction"]',
           "divisor = _reduced_count(x.shape, axes)",
           "var's rule ignores the correction (divides by N for the unbiased variance)",
           HIGHER, GRADCHECK, "tests/test_ops_prod_norm.py"),
    mutant("rule-logsumexp-shift", "tinyattn/ops/reduce.py",
           "return grad * unary.exp(x - _with_kept_axes(y, x.shape, axes, keepdim))",
           "return grad * unary.exp(x)",
           "logsumexp's rule forgets to subtract the output: e^x instead of softmax(x)",
           GRADCHECK, HIGHER, "tests/test_ops_prod_norm.py"),
    mutant("rule-cumsum-reverse", "tinyattn/ops/reduce.py",
           "return cumsum(t.flip(dim), dim).flip(dim)",
           "return cumsum(t, dim)",
           "cumsum's rule (and cumprod's) is a forward cumsum, not a reversed one",
           GRADCHECK, "tests/test_ops_prod_norm.py", HIGHER),
    mutant("rule-amax-ties", "tinyattn/ops/reduce.py",
           "return where(hit, grad / ties, 0.0)",
           "return where(hit, grad, 0.0)",
           "max/amax give the whole gradient to every tied maximum instead of sharing it",
           "tests/test_ops_prod_norm.py", GRADCHECK, HIGHER),
    mutant("rule-prod-one-zero", "tinyattn/ops/reduce.py",
           "return grad * nonzero_others * where(zero, 1.0, _prod_over(w, axes, keepdim=True))",
           "return grad * nonzero_others * where(zero, 0.0, _prod_over(w, axes, keepdim=True))",
           "prod's recorded rule (create_graph) gives the single zero of a slice no gradient",
           "tests/test_ops_prod_norm.py", HIGHER),
    mutant("rule-permute-inverse", "tinyattn/ops/shape.py",
           "inverse[axis] = position",
           "inverse[position] = axis",
           "permute's rule applies the permutation again instead of its inverse (same for "
           "swaps, wrong for 3-cycles)",
           GRADCHECK, HIGHER, "tests/test_ops_indexing_sorting.py"),
    mutant("rule-tile-axes", "tinyattn/ops/shape.py",
           "sum(dim=tuple(range(0, 2 * len(shape), 2)))",
           "sum(dim=tuple(range(1, 2 * len(shape), 2)))",
           "repeat/tile's rule sums over the original axes instead of the copies",
           GRADCHECK, HIGHER, "tests/test_ops_indexing_sorting.py"),
    mutant("rule-getitem-repeated-index", "tinyattn/ops/index.py",
           "index.put(out, v, accumulate=index.advanced is not None)",
           "index.put(out, v, accumulate=False)",
           "indexing's rule writes the gradient of a repeated index once instead of summing",
           GRADCHECK, HIGHER, "tests/test_ops_indexing_sorting.py"),
    mutant("rule-cat-offset", "tinyattn/ops/index.py",
           "            start += size\n        return tuple(grads)",
           "            start = size\n        return tuple(grads)",
           "cat's rule slices every input's gradient after the first input only",
           GRADCHECK, HIGHER, "tests/test_ops_indexing_sorting.py"),
    mutant("rule-where-branch", "tinyattn/ops/masking.py",
           "where(cond, 0.0, grad) if need_b else None, None)",
           "where(cond, grad, 0.0) if need_b else None, None)",
           "where's rule sends the second branch the gradient of the first",
           GRADCHECK, HIGHER),

    # ---- ops with a kernel fast path: the rule (create_graph) and the fast path --------------
    mutant("matmul-rule-transpose", "tinyattn/ops/matmul.py",
           "da = matmul(grad, (b.unsqueeze(-1) if b_column else b).mT)  # (..., M, K)",
           "da = matmul(grad, (b.unsqueeze(-1) if b_column else b))  # (..., M, K)",
           "matmul's rule forgets to transpose B in dA = G Bᵀ",
           FAST, HIGHER),
    mutant("matmul-fast-transpose", "tinyattn/ops/matmul.py",
           "da = None if b is None else from_numpy(product(grad, b.numpy().mT))",
           "da = None if b is None else from_numpy(product(grad, b.numpy()))",
           "matmul's fast path forgets to transpose B in dA = G Bᵀ",
           FAST, AUTOGRAD, GRADCHECK),
    mutant("linear-rule-bias-mean", "tinyattn/ops/linear.py",
           "dbias = grad_rows.sum(0) if len(needs) == 3 and needs[2] else None",
           "dbias = grad_rows.mean(0) if len(needs) == 3 and needs[2] else None",
           "Linear's rule averages the bias gradient over the rows instead of summing it",
           FAST, HIGHER),
    mutant("linear-fast-bias-mean", "tinyattn/ops/linear.py",
           "dbias = from_numpy(sums.astype(grad.dtype))  # (out,)",
           "dbias = from_numpy(sums.astype(grad.dtype) / len(grad_rows))  # (out,)",
           "Linear's fast path averages the bias gradient over the rows",
           FAST, "tests/test_parity_layers.py"),
    mutant("linear-frozen-weight-bias-mean", "tinyattn/ops/linear.py",
           "dbias = from_numpy(column_sums(grad_rows))  # (out,)",
           "dbias = from_numpy(column_sums(grad_rows) / len(grad_rows))  # (out,)",
           "Linear's fast path averages the bias gradient over the rows when the weight is "
           "frozen (the row sum of its own)",
           "tests/test_layers.py"),
    mutant("softmax-rule-row-sum", "tinyattn/ops/softmax.py",
           "return y * (grad - (grad * y).sum(ctx.dim, keepdim=True)), None",
           "return y * (grad - grad.sum(ctx.dim, keepdim=True)), None",
           "softmax's rule subtracts Σ g instead of Σ g ⊙ y",
           FAST, HIGHER),
    mutant("softmax-along-next-to-last", "tinyattn/ops/softmax.py",
           "if dim == arrays[0].ndim - 1:",
           "if dim >= arrays[0].ndim - 2:",
           "softmax along the next-to-last dim takes the path for the last one: its rows are "
           "normalised across the wrong dim (a gradient check cannot see it: the backward "
           "takes the same wrong dim)",
           "tests/test_module.py", "tests/test_tensor.py"),
    mutant("log-softmax-rule-exp", "tinyattn/ops/softmax.py",
           "return grad - y.exp() * grad.sum(ctx.dim, keepdim=True), None",
           "return grad - y * grad.sum(ctx.dim, keepdim=True), None",
           "log_softmax's rule uses the log-probabilities where the probabilities belong",
           FAST, HIGHER),
    mutant("layer-norm-plain-call-weight-shape", "tinyattn/functional/normalization.py",
           "param.dtype == input.dtype and\n                             param.shape == shape)",
           "param.dtype == input.dtype)",
           "layer_norm's quick check of a plain call takes a weight of the wrong shape: it "
           "reaches the op and fails there without naming what was wrong",
           "tests/test_errors_layers.py"),
    mutant("linear-plain-call-in-features", "tinyattn/functional/linear.py",
           "and input.ndim and input.shape[-1] == weight.shape[1]:",
           "and input.ndim:",
           "linear's quick check of a plain call takes an input whose last dim is not the "
           "weight's in_features: it reaches the kernel and fails there without naming what was "
           "wrong",
           "tests/test_errors_layers.py"),
    mutant("sdpa-plain-call-half", "tinyattn/functional/attention.py",
           "and query.dtype == key.dtype == value.dtype and query.dtype in FLOAT_DTYPES):",
           "and query.dtype == key.dtype == value.dtype):",
           "scaled_dot_product_attention's quick check takes float16 tensors, which the fused "
           "kernel does not take: they fail inside it instead of with an error naming the dtype",
           "tests/test_cpu_standins.py"),
    mutant("layer-norm-rule-ghat-mean", "tinyattn/ops/normalization.py",
           "dx = (g_hat - g_hat.mean(dims, keepdim=True)",
           "dx = (g_hat - grad.mean(dims, keepdim=True)",
           "layer norm's rule centres ĝ = g ⊙ w with the mean of g (right only for w = 1)",
           FAST, HIGHER),
    mutant("layer-norm-fast-stats-swapped", "tinyattn/ops/normalization.py",
           "layer_norm_backward(grad_rows, rows, w, ctx.mean, ctx.rstd)",
           "layer_norm_backward(grad_rows, rows, w, ctx.rstd, ctx.mean)",
           "layer norm's fast path passes the saved mean and rstd in the wrong order",
           FAST, "tests/test_parity_layers.py"),
    mutant("gelu-rule-sign", "tinyattn/ops/activation.py",
           "slope = cdf + x * density",
           "slope = cdf - x * density",
           "GELU's rule subtracts x φ(x) instead of adding it",
           FAST, HIGHER),
    mutant("cross-entropy-rule-denominator", "tinyattn/ops/loss.py",
           "weights = grad / ctx.count if ctx.count else grad * 0.0",
           "weights = grad / len(ctx.flat_target) if ctx.count else grad * 0.0",
           "cross-entropy's rule divides by every row, ignored ones included ('mean')",
           FAST, HIGHER),
    mutant("cross-entropy-count", "tinyattn/ops/loss.py",
           "count = int(np.count_nonzero(flat_target != ignore_index))",
           "count = int(flat_target.size)",
           "cross-entropy's 'mean' counts the ignored rows",
           "tests/test_losses.py", FAST, HIGHER),
    mutant("cross-entropy-fast-denominator", "tinyattn/ops/loss.py",
           "return np.full(n_rows, grad / count if count else 0.0)",
           "return np.full(n_rows, grad / n_rows if count else 0.0)",
           "cross-entropy's fast path divides by every row, ignored ones included ('mean')",
           FAST, "tests/test_losses.py"),
    mutant("kl-div-target-terms-unbroadcast", "tinyattn/functional/loss.py",
           "    if target.shape != shape:\n",
           "    if False:\n",
           "kl_div computes the target's own terms (t ln t, eᵗ) before broadcasting: over an "
           "empty broadcast their gradient is 0 · nan = nan instead of 0",
           "tests/test_losses.py"),
    mutant("kl-div-expanded-target-promotes", "tinyattn/functional/loss.py",
           "        if target.dtype != dtype:\n            target = target.to(dtype)\n",
           "",
           "kl_div's target, expanded to the broadcast shape, promotes as a dimensioned tensor: "
           "a 0-d float64 target makes a float32 input's loss float64 (PyTorch's is float32)",
           "tests/test_torch_corners.py"),
    mutant("advanced-index-layout-kept", "tinyattn/ops/index.py",
           "        return gathered if gathered.flags.c_contiguous else gathered.copy(order=\"C\")",
           "        return gathered",
           "an advanced index keeps numpy's layout: x[:, idx] is not contiguous, so a later "
           "view of it (after repeat_interleave(n, dim=1)) fails where PyTorch's works",
           "tests/test_torch_corners.py"),
    mutant("bce-logits-promoted-dtype", "tinyattn/functional/loss.py",
           "    if loss.dtype != target.dtype:  # PyTorch's loss is written in the target's dtype\n"
           "        loss = loss.to(target.dtype)\n",
           "",
           "binary_cross_entropy_with_logits promotes its operands: a float64 input and a "
           "float32 target give a float64 loss (PyTorch's has the target's dtype)",
           "tests/test_torch_corners.py"),
    mutant("regression-loss-operands-unexpanded", "tinyattn/functional/loss.py",
           "        input, target = input.expand(shape), target.expand(shape)\n",
           "",
           "the regression losses subtract operands of different shapes without expanding them "
           "first: a 0-d float64 input against a float32 tensor gives a float32 loss (PyTorch's "
           "is float64)",
           "tests/test_torch_corners.py"),
    mutant("smooth-l1-quadratic-unmasked", "tinyattn/functional/loss.py",
           "    return where(size >= bound, 0.0, diff)",
           "    return diff",
           "smooth_l1_loss and huber_loss square the unmasked difference: an infinite one "
           "gets the gradient 0 · ∞ = nan from the piece not taken",
           "tests/test_torch_corners.py"),
    mutant("zero-divisor-over-empty-broadcast", "tinyattn/ops/arithmetic.py",
           "if a.dtype.kind in \"iu\" and math.prod(shape) and (b.numpy() == 0).any():",
           "if a.dtype.kind in \"iu\" and (b.numpy() == 0).any():",
           "an integer zero divisor raises even over an empty broadcast, where PyTorch "
           "divides nothing and returns an empty result",
           "tests/test_torch_corners.py"),
    mutant("trunc-division-through-floats", "tinyattn/ops/arithmetic.py",
           "        q = np.asarray(np.floor_divide(x, y))\n",
           "        q = np.asarray(np.floor_divide(x.astype(float), y).astype(x.dtype))\n",
           "integer division with rounding_mode='trunc' goes through a float quotient, which "
           "loses the last digits of quotients past 2**53",
           "tests/test_torch_corners.py"),
    mutant("embedding-rule-overwrite", "tinyattn/ops/embedding.py",
           "return index_put(table, (indices,), grad, accumulate=True), None, None",
           "return index_put(table, (indices,), grad, accumulate=False), None, None",
           "embedding's rule writes a repeated row's gradient once instead of adding",
           FAST, HIGHER),
    mutant("embedding-rule-padding-zero", "tinyattn/ops/embedding.py",
           "if ctx.padding_idx is not None:",
           "if ctx.padding_idx:",
           "embedding's rule treats padding_idx=0 as no padding (a falsy test)",
           FAST, HIGHER, "tests/test_layers.py"),
    mutant("dropout-rule-new-mask", "tinyattn/ops/dropout.py",
           "return Dropout.apply(grad, ctx.p, ctx.seed), None, None",
           "return Dropout.apply(grad, ctx.p, ctx.seed + 1), None, None",
           "dropout's backward draws a fresh mask instead of reusing the forward's",
           "tests/test_layers.py", "tests/test_functional.py", HIGHER),
    mutant("dropout-keep-scale", "tinyattn/ops/dropout.py",
           "return 1.0 / (1.0 - p) if p < 1.0 else 0.0",
           "return 1.0 / p if p > 0.0 else 0.0",
           "inverted dropout scales kept weights by 1/p (the drop probability) instead of "
           "1/(1 − p)",
           "tests/test_attention.py", "tests/test_parity_attention.py"),
    mutant("fused-rule-dq-scale", "tinyattn/ops/attention.py",
           'dq = matmul(dscores, keys) * options["scale"]  # (..., H, T, D)',
           "dq = matmul(dscores, keys)  # (..., H, T, D)",
           "fused attention's rule forgets the score scale in dQ",
           FAST, HIGHER),
    mutant("fused-rule-gqa-groups", "tinyattn/ops/attention.py",
           "return grad.reshape(*lead, Hkv, group, L, D).sum(-3)  # (..., Hkv, L, D)",
           "return grad.reshape(*lead, group, Hkv, L, D).sum(-4)  # (..., Hkv, L, D)",
           "fused attention's rule sums every Hkv-th query head into a key/value head instead "
           "of its own group of consecutive heads",
           FAST, HIGHER, "tests/test_gqa_window.py"),
    mutant("fused-fast-drops-bias", "tinyattn/ops/attention.py",
           "grads = attention_backward(*four, oa.reshape(dout.shape), ctx.lse, dout, **options)",
           "grads = attention_backward(*four, oa.reshape(dout.shape), ctx.lse, dout,\n"
           "                                       **dict(options, bias=None))",
           "fused attention's fast path drops the float mask in the backward",
           FAST, "tests/test_attention.py"),

    # ---- the kernels (tinyattn/kernels): forward math and fast-path backward ------------------
    mutant("softmax-kernel-row-sum", "tinyattn/kernels/softmax.py",
           "dot = y.dtype.type(row_dot(grad[i], y[i]))",
           "dot = y.dtype.type(row_sum(grad[i]))",
           "the softmax backward kernel subtracts Σ g instead of Σ g ⊙ y",
           "tests/kernels/test_softmax_kernel.py", FAST),
    mutant("softmax-kernel-no-max-shift", "tinyattn/kernels/softmax.py",
           "y_row[j] = fast_exp(x_row[j] - m)",
           "y_row[j] = fast_exp(x_row[j])",
           "the softmax forward kernel exponentiates without subtracting the row max",
           "tests/kernels/test_softmax_kernel.py"),
    mutant("log-softmax-kernel-exp", "tinyattn/kernels/softmax.py",
           "else grad_row[j] - fast_exp(y_row[j]) * grad_sum",
           "else grad_row[j] - y_row[j] * grad_sum",
           "the log-softmax backward kernel uses log-probabilities where the probabilities "
           "belong",
           "tests/kernels/test_softmax_kernel.py", FAST),
    mutant("softmax-kernel-masked-row-divides", "tinyattn/kernels/softmax.py",
           "inv_total = dtype(0.0) if masked else dtype(1.0 / total)",
           "inv_total = dtype(1.0 / total)",
           "the softmax forward kernel divides a fully masked row by its zero sum (NaN, not 0)",
           "tests/kernels/test_softmax_kernel.py", FAST),
    mutant("softmax-kernel-nan-row-masked", "tinyattn/kernels/softmax.py",
           "return m, m == -np.inf and not has_nan",
           "return m, m == -np.inf",
           "a row of -inf and NaN counts as fully masked: zeros where NaN belongs",
           "tests/kernels/test_softmax_kernel.py", FAST),
    mutant("elementwise-kernel-scalar-first-sub", "tinyattn/kernels/elementwise.py",
           "out[o0 + k] = first - b[b0 + k]",
           "out[o0 + k] = b[b0 + k] - first",
           "the threaded arithmetic subtracts the wrong way round when the number comes first "
           "(1.0 - x)",
           "tests/kernels/test_elementwise_kernel.py"),
    mutant("elementwise-kernel-chunk-reads-first-chunk", "tinyattn/kernels/elementwise.py",
           "b, _run_start(b.size, b_every, i), _is_one(b.size, b_every)",
           "b, _run_start(b.size, b_every, i - start), _is_one(b.size, b_every)",
           "every chunk of the threaded arithmetic reads the first chunk of its second operand",
           "tests/kernels/test_elementwise_kernel.py"),
    mutant("elementwise-select-swapped", "tinyattn/kernels/elementwise.py",
           "first, second = a[a0 + k], b[b0 + k]",
           "second, first = a[a0 + k], b[b0 + k]",
           "the selection kernel takes the second operand where the condition holds (two arrays)",
           "tests/kernels/test_elementwise_kernel.py"),
    mutant("elementwise-run-from-start", "tinyattn/kernels/elementwise.py",
           "        return i % every",
           "        return 0",
           "a chunk that starts inside a repeat (a select's condition, an added bias) reads the "
           "repeating operand from its start",
           "tests/kernels/test_elementwise_kernel.py"),
    mutant("elementwise-runs-cross-rows", "tinyattn/kernels/elementwise.py",
           "return min(stop, i + span - i % span)",
           "return min(stop, i + span)",
           "a run that starts inside a row or a repeat runs on past its end, reading the row's "
           "value (or the repeat) for results of the next",
           "tests/kernels/test_elementwise_kernel.py"),
    mutant("elementwise-counts-per-run", "tinyattn/kernels/elementwise.py",
           "    return _last_use(a, b, out)\n",
           "    return 0\n",
           "the arithmetic's runs end their arrays in each branch: reference counting (atomic, "
           "shared by the threads) in every run of a row-wise op",
           "tests/kernels/test_elementwise_kernel.py"),
    mutant("elementwise-select-any-broadcast", "tinyattn/kernels/elementwise.py",
           "return own == shape[len(shape) - len(own):]",
           "return own == shape[len(shape) - len(own):] or len(own) == len(shape)",
           "the kernels take an operand or condition broadcast along a middle dim as if it "
           "repeated the result's trailing dims",
           "tests/kernels/test_elementwise_kernel.py"),
    mutant("layer-norm-kernel-var-n-1", "tinyattn/kernels/layer_norm.py",
           "row_squared_deviations(x[i], row_mean) / n_cols + eps)",
           "row_squared_deviations(x[i], row_mean) / (n_cols - 1) + eps)",
           "the layer norm kernel divides the variance by N − 1 (PyTorch uses the biased one)",
           "tests/kernels/test_layer_norm_kernel.py"),
    mutant("layer-norm-kernel-dx-weight", "tinyattn/kernels/layer_norm.py",
           "dx[i, j] = inv_std * (grad[i, j] * weight[j] - mean_g - x_hat * mean_g_xhat)",
           "dx[i, j] = inv_std * (grad[i, j] - mean_g - x_hat * mean_g_xhat)",
           "the layer norm backward kernel leaves the weight out of ĝ's own term",
           "tests/kernels/test_layer_norm_kernel.py", FAST),
    mutant("layer-norm-kernel-dweight", "tinyattn/kernels/layer_norm.py",
           "dweight_parts[chunk, j] += grad[i, j] * x_hat",
           "dweight_parts[chunk, j] += grad[i, j] * x[i, j]",
           "the layer norm backward kernel's dw sums g ⊙ x instead of g ⊙ x̂",
           "tests/kernels/test_layer_norm_kernel.py", FAST),
    mutant("matmul-pack-group-column", "tinyattn/kernels/matmul.py",
           "panel[row0 + p, g + q] = columns[first + g + q, p]",
           "panel[row0 + p, g + q] = columns[first + g, p]",
           "a copy of a transposed B's columns into panels (the packing, and the tasks' own "
           "copies) takes the first column of each group for all of the group's values past "
           "the last whole block of k",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-column-copy-block-rows", "tinyattn/kernels/matmul.py",
           "transpose_block(columns, first + g, p, panel, row0 + p, g)",
           "transpose_block(columns, first + g, p, panel, row0, g)",
           "a copy of a transposed B's columns into panels writes every transposed block of k "
           "over the panel's first rows",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("column-sums-kernel-chunk-start", "tinyattn/kernels/column_sums.py",
           "for i in range(start, stop):",
           "for i in range(start + 1, stop):",
           "the bias gradient's column sums skip the first row of every chunk",
           "tests/kernels/test_column_sums.py", "tests/test_parity_layers.py"),
    mutant("gelu-kernel-tanh-factor", "tinyattn/kernels/gelu_tanh.py",
           "out[i] = grad[i] * (s + two * x[i] * s * (one - s) * du_dx)",
           "out[i] = grad[i] * (s + x[i] * s * (one - s) * du_dx)",
           "the tanh-GELU backward kernel loses the 2 of σ(2u)'s derivative",
           "tests/kernels/test_gelu_kernel.py", FAST),
    mutant("gelu-kernel-density", "tinyattn/kernels/gelu.py",
           "x * _INV_SQRT_2PI * exp_float64(-0.5 * x * x, EXP_TAYLOR_13)",
           "x * _INV_SQRT_2PI * exp_float64(-x * x, EXP_TAYLOR_13)",
           "the float64 GELU backward kernel's density is e^(−x²) instead of e^(−x²/2)",
           "tests/kernels/test_gelu_kernel.py", FAST),
    mutant("gelu-kernel-f32-half", "tinyattn/kernels/gelu.py",
           "return (_HALF * x * t) * e if x < _ZERO else x * (_ONE - _HALF * t * e)",
           "return (_HALF * x * t) * e if x < _ZERO else x * (_ONE - t * e)",
           "the float32 GELU forward kernel forgets the ½ of ½ erfc for x >= 0",
           "tests/kernels/test_gelu_kernel.py"),
    mutant("cross-entropy-kernel-onehot", "tinyattn/kernels/cross_entropy.py",
           "dlogits[i, target[i]] -= grad_rows[i] * (1.0 - label_smoothing)",
           "dlogits[i, target[i]] -= grad_rows[i]",
           "the cross-entropy backward kernel subtracts the whole one-hot with label smoothing",
           "tests/kernels/test_cross_entropy_kernel.py", FAST),
    mutant("cross-entropy-kernel-smoothing", "tinyattn/kernels/cross_entropy.py",
           "loss[i] = (1.0 - label_smoothing) * nll + label_smoothing * smooth",
           "loss[i] = nll + label_smoothing * smooth",
           "the cross-entropy forward kernel keeps the full NLL with label smoothing",
           "tests/kernels/test_cross_entropy_kernel.py"),
    mutant("embedding-kernel-overwrite", "tinyattn/kernels/embedding.py",
           "dweight[row, j] += grad[p, j]",
           "dweight[row, j] = grad[p, j]",
           "the embedding backward kernel overwrites a repeated row instead of adding",
           "tests/kernels/test_embedding_kernel.py", FAST),
    mutant("dropout-kernel-no-scale", "tinyattn/kernels/dropout.py",
           "out[k] = x[k] * scale if kept(fold_key(seed, n), threshold) else 0.0",
           "out[k] = x[k] if kept(fold_key(seed, n), threshold) else 0.0",
           "the dropout kernel keeps elements unscaled (not inverted dropout)",
           "tests/kernels/test_dropout_kernel.py"),
    mutant("dropout-kernel-chunk-counter", "tinyattn/kernels/dropout.py",
           "_dropout_span(x[start:stop], seed, p, scale, out[start:stop], start)",
           "_dropout_span(x[start:stop], seed, p, scale, out[start:stop], 0)",
           "each parallel chunk of the dropout kernel restarts the counter at 0 (every chunk "
           "gets the same mask)",
           "tests/kernels/test_dropout_kernel.py"),
    mutant("counter-rng-key-offset", "tinyattn/kernels/counter_rng.py",
           "return _mix64(state + (np.uint64(key) + _ONE) * _GAMMA)",
           "return _mix64(state + np.uint64(key) * _GAMMA)",
           "the counter-based generator folds key n as n instead of n + 1 (key 0 leaves the "
           "state unmixed by γ)",
           "tests/kernels/test_counter_rng.py", "tests/kernels/test_dropout_kernel.py"),
    mutant("adamw-kernel-second-moment", "tinyattn/kernels/adamw.py",
           "v = v * beta2 + one_minus_beta2 * g * g",
           "v = v * beta2 + one_minus_beta2 * g * m",
           "the Adam kernel's second moment multiplies g by the new first moment",
           "tests/kernels/test_adamw_kernel.py"),
    mutant("matmul-kernel-edge-column", "tinyattn/kernels/matmul.py",
           "_copy_block(edge, first, 0, c, i0 + first, cj, MR - first, cols)",
           "_copy_block(edge, first, 0, c, i0 + first, cj, MR - first, cols - 1)",
           "the matmul kernel's right-edge tile copies one column too few back into C",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-kernel-small-inner", "tinyattn/kernels/matmul.py",
           "            for p in range(k):\n                a_ip = a_mat[i, p]",
           "            for p in range(k - 1):\n                a_ip = a_mat[i, p]",
           "the small-product matmul loop stops one short of the inner dimension",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-kernel-k-blocks", "tinyattn/kernels/matmul.py",
           "        accumulate = p0 > 0\n",
           "        accumulate = False\n",
           "each k-block of the matmul kernel overwrites the tile instead of adding to it",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-copied-panel-offset", "tinyattn/kernels/matmul.py",
           "                q0, j0 = -p0, 0\n",
           "                q0, j0 = 0, 0\n",
           "a task reads its copy of a panel of B at the k-block's row in B instead of from the "
           "copy's first row (every k-block after the first reads past the copy)",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-panels-never-copied", "tinyattn/kernels/matmul.py",
           "        if n > nr and m_panels // m_blocks >= _COPY_MIN_TILE_ROWS:\n",
           "        if False:\n",
           "the tasks of a product never copy the panels of a row-major B: each tile row reads "
           "a panel whose rows share a few L1 sets (up to 30% slower with cached operands)",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-column-copy-first-panel", "tinyattn/kernels/matmul.py",
           "_columns_into(copied, q0, b_rows, b_index[o] * n + cj, k, cols)",
           "_columns_into(copied, q0, b_rows, b_index[o] * n, k, cols)",
           "a task that copies its panels of a transposed B from B's columns copies the first "
           "panel of the matrix every time",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-column-copies-overlap", "tinyattn/kernels/matmul.py",
           "                q0, j0 = (jp - first_panel) * k, 0\n",
           "                q0, j0 = 0, 0\n",
           "a task with several panels of a transposed B copies each into the same rows of its "
           "buffer, so every k-block after the first reads the last panel copied",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-column-copy-when-tasks-split-rows", "tinyattn/kernels/matmul.py",
           "not b_contiguous and m_blocks == 1 and b_shape[0] == batch_out:",
           "not b_contiguous and b_shape[0] == batch_out:",
           "the tasks copy their panels of a transposed B even when several tasks read each panel "
           "(the tile rows split between them): every panel copied once per reader",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-column-copy-of-a-shared-b", "tinyattn/kernels/matmul.py",
           "not b_contiguous and m_blocks == 1 and b_shape[0] == batch_out:",
           "not b_contiguous and m_blocks == 1:",
           "the tasks copy their panels of a transposed B that a batch of A shares: every panel "
           "copied once per output matrix instead of packed once",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-wide-bt-rows-always-split", "tinyattn/kernels/matmul.py",
           "            batch_out * n_blocks % threads == 0:\n",
           "            False:\n",
           "a wide transposed B whose tile columns the threads share evenly still has A's rows "
           "split between tasks when there are few columns, so B is packed in a pass first",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-wide-bt-uneven-columns-unsplit", "tinyattn/kernels/matmul.py",
           "            batch_out * n_blocks % threads == 0:\n",
           "            batch_out * n_blocks >= 1:\n",
           "a wide transposed B with a few tile columns the threads cannot share evenly gets one "
           "task per column, leaving a thread idle for the last one",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-wide-b-shared-by-rows", "tinyattn/kernels/matmul.py",
           "    if n <= m:\n",
           "    if True:\n",
           "a product whose B is wider than A is tall shares out A's rows between the threads, "
           "so each thread reads all of B (a weight gradient gᵀ X 1.16× the time in a script)",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-wide-b-column-per-task", "tinyattn/kernels/matmul.py",
           "        n_blocks = min(n_panels, -(-_TASKS_PER_THREAD * threads // batch_out))\n",
           "        n_blocks = n_panels\n",
           "a row-major B wider than A is tall gets one task per tile column, each of which "
           "reads all of A (float64 Aᵀ @ g products 1.08–1.13× the time)",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-rows-not-cut-for-l2", "tinyattn/kernels/matmul.py",
           "        m_blocks = max(m_blocks, -(-m_panels // tile_rows))\n",
           "        m_blocks = max(m_blocks, 1)\n",
           "a task that shares out A's rows runs all of them whatever their size, so a product "
           "of many rows reads its slab of A from memory for every panel of B (nanoGPT's MLP "
           "at its default batch twice the time)",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-rows-cut-for-l2-by-all-of-k", "tinyattn/kernels/matmul.py",
           "block.a_block_bytes // (MR * kc * itemsize)",
           "block.a_block_bytes // (MR * k * itemsize)",
           "the tile rows a task keeps in L2 are counted with all of k, not one block of it: "
           "the rows of a deep product are cut into far more tasks than L2 needs",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-wide-b-rows-cut-for-l2", "tinyattn/kernels/matmul.py",
           "    if n <= m:  # the rows shared out",
           "    if True:  # the rows shared out",
           "a run of B's columns over all of A's rows is cut into blocks of rows that fit L2 "
           "too, so B, the larger operand there, is read once per block",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-wide-bt-in-runs", "tinyattn/kernels/matmul.py",
           "    else:  # a transposed B: one micro-tile column per task, which may copy it itself "
           "(below)\n        n_blocks = n_panels\n",
           "    else:  # a transposed B: one micro-tile column per task, which may copy it itself "
           "(below)\n        n_blocks = min(n_panels, -(-_TASKS_PER_THREAD * threads // "
           "batch_out))\n",
           "a transposed B wider than A is tall is cut into runs of tile columns too, so a task "
           "that copies its panels copies a whole run (19 MB per task for GPT-2's output head)",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-plan-for-one-thread", "tinyattn/kernels/matmul.py",
           "                      out.itemsize, get_num_threads())\n",
           "                      out.itemsize, 1)\n",
           "a product's plan is worked out for one thread whatever the thread count: on two "
           "threads a product of a few tile rows runs as one task, on one core",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-row-sums-skip-first-p", "tinyattn/kernels/matmul.py",
           "        for p in range(p0, p1):\n            values = a[p, r0:r1]",
           "        for p in range(p0 + 1, p1):\n            values = a[p, r0:r1]",
           "the row sums of a transposed A (a Linear's bias gradient) skip the first row of "
           "every k-block",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("data-address-of-the-last-element", "tinyattn/kernels/aligned.py",
           "(0,) * (ndim - 1) + (slice(0, 1),)",
           "(-1,) * (ndim - 1) + (slice(-1, None),)",
           "the address of a strided array is that of its last element: the attention reads "
           "the heads of a split projection from the wrong columns",
           "tests/kernels/test_aligned.py", "tests/kernels/test_attention_kernel.py"),
    mutant("run-tasks-entry-of-another-launch", "tinyattn/kernels/parallel.py",
           "        if signature[0] == launch._numba_type_:",
           "        if signature[0] == launch._numba_type_ or True:",
           "later launches of a kernel call the launcher compiled for whichever kernel came "
           "first, with this kernel's arguments",
           "tests/test_numba_safety.py"),
    mutant("matvec-dots-bias-dropped", "tinyattn/kernels/matvec.py",
           "            c[i, j] = total + bias[j] if add_bias else total\n",
           "            c[i, j] = total\n",
           "a product of few rows with a transposed B (a Linear on one token) drops the bias",
           "tests/kernels/test_matvec_kernel.py"),
    mutant("matvec-rows-skip-last-p", "tinyattn/kernels/matvec.py",
           "    for p in range(k):\n        b_row = b_mat[p, j0:j1]",
           "    for p in range(k - 1):\n        b_row = b_mat[p, j0:j1]",
           "a product of few rows with B in rows stops one short of the inner dimension",
           "tests/kernels/test_matvec_kernel.py"),
    mutant("matvec-weight-read-down-columns", "tinyattn/kernels/matvec.py",
           "    transposed = not b3.flags.c_contiguous  # then its last two axes swapped are\n",
           "    transposed = False\n",
           "a product of few rows reads a transposed weight as rows of B, down W's columns K "
           "values apart (right results; a cache line per value)",
           "tests/kernels/test_matvec_kernel.py"),
    mutant("matvec-blocks-split-lines", "tinyattn/kernels/matvec.py",
           "    return -(-width // align) * align\n",
           "    return width\n",
           "the column blocks of a B read in rows start anywhere in a cache line (right results; "
           "a task reads part lines at each edge)",
           "tests/kernels/test_matvec_kernel.py"),
    mutant("matvec-block-end-short", "tinyattn/kernels/matvec.py",
           "    return task // n_blocks, j0, min(n, j0 + width)\n",
           "    return task // n_blocks, j0, min(n, j0 + width - 1)\n",
           "each task of a product of few rows leaves the last column of its block unwritten",
           "tests/kernels/test_matvec_kernel.py"),
    mutant("matmul-row-sums-row-major-restart", "tinyattn/kernels/matmul.py",
           "            total = own[i]\n",
           "            total = 0.0\n",
           "the row sums of a row-major A start each k-block from zero: only the last k-block "
           "of each row is kept",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-row-sums-every-column-task", "tinyattn/kernels/matmul.py",
           "    sum_rows = has_row_sums and o == 0 and nb == 0",
           "    sum_rows = has_row_sums and o == 0",
           "every task over a tile row adds its rows of A to the sums, not only the one of the "
           "first tile column (a sum counted once per task when B is shared out by columns)",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("matmul-row-sums-every-matrix", "tinyattn/kernels/matmul.py",
           "    sum_rows = has_row_sums and o == 0 and nb == 0",
           "    sum_rows = has_row_sums and nb == 0",
           "one A multiplied by a batch of B is summed once per output matrix",
           "tests/kernels/test_matmul_kernel.py"),
    mutant("compile-ahead-helper-path", "tinyattn/kernels/compile_ahead.py",
           'f"sys.modules[{package.name!r}] = package; " \\\n',
           'f"" \\\n',
           "the compile-ahead helper imports the tinyattn of its working directory, which may "
           "be another checkout's: it compiles that one's kernels, and the process it was to "
           "help compiles all of its own",
           "tests/kernels/test_compile_ahead.py"),
    mutant("compile-ahead-started-first", "tinyattn/kernels/compile_ahead.py",
           "for queue in (self._expected, self._started, self._put_off):",
           "for queue in (self._started, self._expected, self._put_off):",
           "the helper compiles the backward of the families the process started before the "
           "families its layers expect, which the process needs sooner",
           "tests/kernels/test_compile_ahead.py"),
    mutant("compile-ahead-layers-expect-nothing", "tinyattn/nn/module.py",
           "        if self.kernel_families:\n",
           "        if False:\n",
           "building a layer does not tell the compile-ahead helper the kernel families it "
           "will run",
           "tests/kernels/test_compile_ahead.py"),
    mutant("families-layer-norm-forward-first", "tinyattn/kernels/families.py",
           "    layer_norm_backward(x, x, weight, np.zeros(2, dtype), np.ones(2, dtype))"
           "  # mean, rstd\n    layer_norm_forward(x, weight, weight, 1e-5)\n",
           "    layer_norm_forward(x, weight, weight, 1e-5)\n    layer_norm_backward(x, x, weight, "
           "np.zeros(2, dtype), np.ones(2, dtype))  # mean, rstd\n",
           "the layer norm family runs its forward first: a helper reaching it while the process "
           "compiles that forward puts the whole family off, backward included, to the end",
           "tests/kernels/test_compile_ahead.py::"
           "test_a_family_runs_its_backward_first_and_only_its_own_kernels"),
    mutant("families-gelu-both-forms", "tinyattn/kernels/families.py",
           "    gelu_forward(x, approximate)\n",
           "    gelu_forward(x, approximate)\n    gelu_forward(x, \"tanh\")\n",
           "the GELU family compiles the tanh form too: a helper spends its time on kernels an "
           "exact-GELU model never runs",
           "tests/kernels/test_compile_ahead.py::"
           "test_a_family_runs_its_backward_first_and_only_its_own_kernels"),
    mutant("families-matmul-tiny-few-rows", "tinyattn/kernels/families.py",
           "matmul(a[:, :MR, :], np.ones((inner, 3), dtype))",
           "matmul(a[:, :2, :], np.ones((inner, 3), dtype))",
           "the matmul family's tiny product has fewer rows than the tile: it compiles matvec's "
           "few-rows kernel instead of matmul's serial loop",
           "tests/kernels/test_compile_ahead.py::"
           "test_a_family_runs_its_backward_first_and_only_its_own_kernels"),
    mutant("gelu-layer-expects-exact-form", "tinyattn/nn/activation.py",
           'return ("gelu",) if self.approximate == "none" else ("gelu_tanh",)',
           'return ("gelu",)',
           "a tanh GELU layer tells the compile-ahead helper to compile the exact form",
           "tests/kernels/test_compile_ahead.py::"
           "test_layers_and_adam_expect_the_families_they_run"),
    mutant("claim-never-put-off", "tinyattn/kernels/cache_claims.py",
           "            if may_put_off and _putting_off:",
           "            if False:",
           "the helper waits for every kernel the other process is compiling, even with other "
           "families to compile",
           "tests/kernels/test_compile_ahead.py"),
    mutant("claim-put-off-nested", "tinyattn/kernels/jit.py",
           "outermost = _Compilations.under_way == 0",
           "outermost = True",
           "a function that a compilation under way calls is put off too: the caller's "
           "compilation fails and its work so far is lost",
           "tests/kernels/test_compile_ahead.py"),
    mutant("simd-transpose-pair-mask", "tinyattn/kernels/simd.py",
           "            high = ir.Constant(mask_type, [j + s if not j & s else lanes + j\n",
           "            high = ir.Constant(mask_type, [j if not j & s else lanes + j\n",
           "the block transpose's second vector of each pair keeps the first vector's own lanes "
           "instead of the ones it swaps out",
           "tests/kernels/test_simd_tile.py", "tests/kernels/test_matmul_kernel.py"),
    mutant("simd-transpose-round-short", "tinyattn/kernels/simd.py",
           "        while s < lanes:\n",
           "        while s < lanes // 2:\n",
           "the block transpose stops a round short: each element's row and lane are exchanged "
           "in all but the highest bit",
           "tests/kernels/test_simd_tile.py", "tests/kernels/test_matmul_kernel.py"),
    mutant("simd-tile-product-short", "tinyattn/kernels/simd.py",
           "    for t in range(t0, t1):\n        tile = tile_update_clamped(",
           "    for t in range(t0, t1 - 1):\n        tile = tile_update_clamped(",
           "the attention kernels' register tile product stops one term short",
           "tests/kernels/test_simd_tile.py", "tests/kernels/test_attention_kernel.py"),
    mutant("exp-kernel-range-reduction", "tinyattn/kernels/exp.py",
           "n = np.floor(x * _LOG2E + _HALF)",
           "n = np.floor(x * _LOG2E)",
           "float32 fast_exp truncates n = x / ln 2 instead of rounding it (r leaves "
           "[−ln2/2, ln2/2], the polynomial loses accuracy)",
           "tests/kernels/test_exp_kernel.py", "tests/kernels/test_softmax_kernel.py"),
    mutant("reductions-row-dot", "tinyattn/kernels/reductions.py",
           "total += a[j] * b[j]",
           "total += a[j] * a[j]",
           "the vector-lane dot product reads its first operand twice",
           "tests/kernels/test_reductions.py", "tests/kernels/test_softmax_kernel.py"),
    mutant("multinomial-cumulative-axis", "tinyattn/creation.py",
           "cdf = np.cumsum(rows / totals[:, None], axis=1)",
           "cdf = np.cumsum(rows / totals[:, None], axis=0)",
           "multinomial accumulates the weights down the rows instead of along each row: with "
           "several rows, every row but the first samples from sums of other rows' weights",
           "tests/test_torch_surface.py"),
    mutant("attn-kernel-scale", "tinyattn/kernels/attention.py",
           "_transpose_into(q_t, q_head[i0 : i0 + nq], nq, dtype(scale))",
           "_transpose_into(q_t, q_head[i0 : i0 + nq], nq, dtype(1.0))",
           "the fused attention forward kernel forgets the score scale",
           "tests/kernels/test_attention_kernel.py"),
    mutant("attn-kernel-dk-scale", "tinyattn/kernels/attention.py",
           "dk[b, j, dk_h0 + hk, d] = scale_t * dk_acc[j, d]",
           "dk[b, j, dk_h0 + hk, d] = dk_acc[j, d]",
           "the fused attention backward kernel forgets the score scale in dK",
           "tests/kernels/test_attention_kernel.py", FAST),
    mutant("attn-kernel-gqa-head", "tinyattn/kernels/attention.py",
           "hk = h // (n_heads // n_kv_heads)",
           "hk = h % n_kv_heads",
           "the fused attention forward kernel maps query heads to key/value heads round-robin "
           "instead of in consecutive groups",
           "tests/kernels/test_attention_kernel.py", "tests/test_gqa_window.py"),
    mutant("attn-kernel-window", "tinyattn/kernels/attention.py",
           "return (0 if is_causal else 1 - window_size), window_size - 1",
           "return (0 if is_causal else 1 - window_size), window_size",
           "the fused kernels' causal sliding window keeps one key too many",
           "tests/kernels/test_attention_kernel.py", "tests/test_gqa_window.py"),
    mutant("attn-kernel-causal-diagonal", "tinyattn/kernels/attention.py",
           "return (0 if is_causal else -unbounded), unbounded",
           "return (1 if is_causal else -unbounded), unbounded",
           "the fused kernels' causal band leaves out the diagonal (a query cannot see itself)",
           "tests/kernels/test_attention_kernel.py", "tests/test_attention.py"),
    mutant("attn-kernel-row-term", "tinyattn/kernels/attention.py",
           "dp_row[x] = p_row[x] * (dp_row[x] - row_delta[x])",
           "dp_row[x] = p_row[x] * dp_row[x]",
           "the fused attention backward kernel drops the softmax row term δ = g · o",
           "tests/kernels/test_attention_kernel.py", FAST),
    mutant("attn-kernel-masked-row-lse", "tinyattn/kernels/attention.py",
           "lse_safe[i] = lse[b, h, i] if lse[b, h, i] > -np.inf else np.inf",
           "lse_safe[i] = lse[b, h, i]",
           "the fused attention backward kernel recomputes the weights of a fully masked row "
           "as e^(−inf + inf) (NaN gradients)",
           "tests/kernels/test_attention_kernel.py", "tests/test_attention.py"),
    mutant("attn-kernel-online-rescale", "tinyattn/kernels/attention.py",
           "                acc_row[x] *= block_alpha[x]",
           "                acc_row[x] *= 1.0",
           "the online softmax does not rescale its accumulator when a later key block raises "
           "the running max",
           "tests/kernels/test_attention_kernel.py"),
    mutant("attn-kernel-dropout-query", "tinyattn/kernels/attention.py",
           "_query_states(query_states, head_state, i0)",
           "_query_states(query_states, head_state, _ZERO)",
           "the fused forward keys the dropout mask by the column within the query block "
           "instead of the query index (every block of 128 queries repeats the first's mask)",
           "tests/kernels/test_attention_kernel.py", "tests/test_attention.py"),
    mutant("attn-kernel-dropout-key", "tinyattn/kernels/attention.py",
           "row[x] = keep_scale if kept(fold_key(states[x], j), threshold) else 0.0",
           "row[x] = keep_scale if kept(fold_key(states[x], jj), threshold) else 0.0",
           "the fused kernels key the dropout mask by the row within the key block instead of "
           "the key index (every block of 64 keys repeats the first's mask)",
           "tests/kernels/test_attention_kernel.py", "tests/test_attention.py"),
    mutant("attn-kernel-head-stride-values", "tinyattn/kernels/attention.py",
           "(H > 1 and sh != W * item)",
           "(H > 1 and sh != W)",
           "the layout check compares a head's stride in bytes with its width in values, so "
           "the heads of a projection are never seen side by side in its rows: q, k and v are "
           "copied head-major on every call instead of read in place",
           "tests/kernels/test_attention_kernel.py"),
    mutant("attn-kernel-packed-rows-shifted", "tinyattn/kernels/attention.py",
           "    if not lowest <= c0 <= highest:\n"
           "        c0 = lowest\n",
           "",
           "the kernels take a head's column in a token row from its offset alone, so the "
           "heads of a packed projection whose buffer does not start at a row (an aligned "
           "one) are not read in place but copied",
           "tests/kernels/test_attention_kernel.py"),
    mutant("attn-kernel-packed-overlap", "tinyattn/kernels/attention.py",
           "            any(end != c0 for end, (c0, _) in zip(ends, spans[1:])) or \\\n",
           "",
           "q, k and v from overlapping columns (one view given three times) get their "
           "gradients written into one buffer: they overwrite each other",
           "tests/kernels/test_attention_kernel.py"),
    mutant("split-joined-unchecked-address", "tinyattn/ops/index.py",
           "                or a.__array_interface__[\"data\"][0] != address or memory_owner",
           "                or memory_owner",
           "the split's backward joins its pieces' gradients in place without checking that "
           "each starts where the one before ends: pieces out of order get the wrong values",
           GRADCHECK),
    mutant("split-joined-other-owner", "tinyattn/ops/index.py",
           " or memory_owner(a) is not owner:",
           ":",
           "the split's backward joins pieces that lie side by side but view different arrays: "
           "the joined view keeps only the first one's memory alive",
           GRADCHECK),
    mutant("attn-kernel-span-forward", "tinyattn/kernels/attention.py",
           "            st[jj, c0 + lo : c0 + first] = -np.inf  # the span outside the band: "
           "weight 0\n",
           "",
           "the forward's softmax runs over whole vectors but leaves the scores of the span "
           "before the band's first column as computed: masked keys get weight",
           "tests/kernels/test_attention_kernel.py"),
    mutant("attn-kernel-span-backward", "tinyattn/kernels/attention.py",
           "                    st[jj, :first] = 0.0  # scores outside the band may be anything\n",
           "",
           "the backward recomputes the weights over whole vectors and keeps those of the "
           "span before the band's first column: dV gets terms of masked keys",
           "tests/kernels/test_attention_kernel.py"),
    mutant("attn-kernel-span-rounding", "tinyattn/kernels/attention.py",
           "min(width, (stop + lanes - 1) & -lanes)",
           "min(width, stop & -lanes)",
           "the whole-vector span of a row is rounded down at its end: the band's last "
           "columns get no weight",
           "tests/kernels/test_attention_kernel.py"),
    mutant("attn-kernel-transpose-tail", "tinyattn/kernels/attention.py",
           "    for x in range(whole, n):\n        for d in range(src.shape[1]):\n"
           "            dst[d, x] = src[x, d] * scale\n",
           "",
           "the transposed copy of q and g moves whole runs of 8 queries only: the last "
           "T mod 8 queries keep stale values",
           "tests/kernels/test_attention_kernel.py"),
    mutant("jit-load-without-runtime", "tinyattn/kernels/jit.py",
           "        start_runtime(target_context)  # what cached code needs of the refresh\n",
           "",
           "a cached kernel loads without starting numba's runtime: its machine code calls "
           "runtime functions that were never linked",
           "tests/test_numba_safety.py"),
    mutant("runtime-c-functions-unknown", "tinyattn/kernels/jit.py",
           "        ll.add_symbol(name if name.startswith(\"_\") else \"NRT_\" + name, address)\n",
           "        pass\n",
           "the runtime starts without making its C functions known to LLVM's linker: the "
           "runtime's own library and every kernel call functions that cannot be resolved",
           "tests/test_numba_safety.py"),
    mutant("machine-cache-unchecked", "tinyattn/kernels/machine_cache.py",
           "return data if hashlib.sha256(data).digest() == digest else None",
           "return data",
           "a damaged or truncated file of saved machine code is read as if whole",
           "tests/kernels/test_machine_cache.py"),
    mutant("machine-cache-key-without-target", "tinyattn/kernels/machine_cache.py",
           "key = repr((name, tuple(target), numba.__version__",
           "key = repr((name, numba.__version__",
           "saved machine code is keyed without numba's target: another CPU's code is loaded",
           "tests/kernels/test_machine_cache.py"),
    mutant("claim-does-not-wait", "tinyattn/kernels/cache_claims.py",
           "            if time.monotonic() >= deadline:",
           "            if True:",
           "a claim held by another process is given up at once instead of waited for: both "
           "processes compile the function and write its index",
           "tests/kernels/test_compile_ahead.py"),
    mutant("claim-miss-not-retried", "tinyattn/kernels/jit.py",
           "                loaded = self._load_overload(sig, target_context)\n"
           "                if loaded",
           "                loaded = None\n                if loaded",
           "after waiting for another process's claim the cache is not looked in again: the "
           "function is compiled a second time",
           "tests/kernels/test_compile_ahead.py"),
    mutant("claim-kept-after-failure", "tinyattn/kernels/jit.py",
           "failed = getattr(ev, \"_exc_details\", None) is not None",
           "failed = ev.is_failed",
           "a compilation that raises keeps its function's claim (numba's is_failed answers "
           "inverted), so every other process waits for it",
           "tests/kernels/test_compile_ahead.py"),
    mutant("warmup-backward-rows-float64", "tinyattn/kernels/families.py",
           "cross_entropy_backward(logits, target, np.ones(2, dtype), np.ones(2, dtype))",
           "cross_entropy_backward(logits, target, np.ones(2, dtype), np.ones(2))",
           "warmup runs cross-entropy's backward, ahead of its forward, on rows of the wrong "
           "dtype: a training step then compiles that kernel again",
           "tests/test_warmup.py"),
    mutant("compile-ahead-not-asked", "tinyattn/kernels/compile_notice.py",
           "        request(module, dtype)  # a second process",
           "        request(module, None)  # a second process",
           "the helper is never asked for a family (no dtype): a first run compiles everything "
           "on one core",
           "tests/kernels/test_compile_ahead.py"),

    # ---- the engine (tinyattn/autograd, tinyattn/tensor.py) -----------------------------------
    mutant("engine-unbroadcast-axis", "tinyattn/autograd/engine.py",
           "extra + i for i, n in enumerate(shape) if n == 1 and grad.shape[extra + i] != 1)",
           "i for i, n in enumerate(shape) if n == 1 and grad.shape[extra + i] != 1)",
           "unbroadcast sums a stretched axis at its index in the input's shape, not shifted by "
           "the leading axes broadcasting added",
           AUTOGRAD, GRADCHECK),
    mutant("engine-node-accumulate", "tinyattn/autograd/engine.py",
           "buffer[slot] = g if held is None else add(held, g)",
           "buffer[slot] = g",
           "the engine keeps only the last gradient of an output used twice",
           AUTOGRAD),
    mutant("engine-leaf-accumulate", "tinyattn/autograd/engine.py",
           "leaf_grads[id(edge)] = (edge, g if held is None else add(held[1], g))",
           "leaf_grads[id(edge)] = (edge, g)",
           "the engine keeps only the last gradient of a leaf used twice",
           AUTOGRAD),
    mutant("engine-grad-overwritten", "tinyattn/tensor.py",
           "self._grad._data += grad._data",
           "self._grad._data[...] = grad._data",
           "a second backward overwrites .grad instead of accumulating into it",
           AUTOGRAD),
    mutant("engine-hook-replacement-dropped", "tinyattn/autograd/engine.py",
           "grads[slot] = grad = _run_hooks(hooks, grad)",
           "grad = _run_hooks(hooks, grad)",
           "a hook on a non-leaf tensor may not replace its gradient (the replacement is only "
           "retained, not sent on)",
           AUTOGRAD, "tests/test_hooks.py"),
    mutant("engine-retain-grad-output", "tinyattn/tensor.py",
           "self.grad_fn.retain(self._output_nr, self)",
           "self.grad_fn.retain(0, self)",
           "retain_grad on the second output of an op retains the first output's gradient",
           AUTOGRAD, "tests/test_tensor.py", HIGHER),
    mutant("view-version-shared-with-a-copy", "tinyattn/autograd/function.py",
           "if held is array or held is array.base or memory_owner(held) is memory_owner(array):",
           "if held is not None:",
           "the output of a view op that numpy had to copy shares its input's version counter: "
           "an in-place change of the copy is taken for a change of the input",
           "tests/test_inplace.py", AUTOGRAD),
    mutant("setitem-quick-path-in-a-graph", "tinyattn/tensor.py",
           "if type(value) in (float, int) and self.grad_fn is None and not self._requires_grad \\",
           "if type(value) in (float, int) \\",
           "a number written through a boolean mask into a tensor of a graph goes straight into "
           "its memory, unrecorded: the masked positions still pass gradient back",
           "tests/test_inplace.py", AUTOGRAD),
    mutant("broadcast-left-aligned", "tinyattn/validation.py",
           "for axis, n in enumerate(shape, ndim - len(shape)):",
           "for axis, n in enumerate(shape):",
           "the broadcast check aligns shapes at their first dims instead of their last",
           "tests/test_errors.py"),
    mutant("sigmoid-kernel-branches-swapped", "tinyattn/kernels/special.py",
           "ys[i] = (one if xs[i] >= 0 else e) / (one + e)",
           "ys[i] = (e if xs[i] >= 0 else one) / (one + e)",
           "the sigmoid kernel computes σ(−x) (the numerators of its two branches swapped)",
           "tests/kernels/test_special.py"),
    mutant("sigmoid-kernel-exponent-of-x", "tinyattn/kernels/special.py",
           "e = fast_exp(-abs(xs[i]))",
           "e = fast_exp(-xs[i])",
           "the sigmoid kernel takes e^(−x) instead of e^(−|x|): right for x >= 0, wrong below",
           "tests/kernels/test_special.py"),
    mutant("flip-rule-not-flipped-back", "tinyattn/ops/shape.py",
           "return Flip.apply(grad, axes=ctx.kwargs[\"axes\"])",
           "return grad",
           "Flip's rule passes the gradient on unreversed",
           "tests/test_ops_indexing_sorting.py"),
    mutant("roll-rule-not-rolled-back", "tinyattn/ops/shape.py",
           "return Roll.apply(grad, shifts=tuple(-s for s in ctx.kwargs[\"shifts\"]),",
           "return Roll.apply(grad, shifts=ctx.kwargs[\"shifts\"],",
           "Roll's rule rolls the gradient on by the shifts instead of back",
           "tests/test_ops_indexing_sorting.py"),
    mutant("cumprod-rule-divides-at-zeros", "tinyattn/ops/reduce.py",
           "before = Tensor(zeros_so_far == 0)",
           "before = Tensor(zeros_so_far >= 0)",
           "cumprod's first-order rule divides by x after a row's first zero too",
           "tests/test_ops_prod_norm.py"),
    mutant("cumprod-rule-first-zero-kept", "tinyattn/ops/reduce.py",
           "without_first = cumprod(where(first, 1.0, x), dim)",
           "without_first = cumprod(x, dim)",
           "cumprod's first-order rule keeps the first zero in the products it sends to it",
           "tests/test_ops_prod_norm.py"),
    mutant("cumprod-recorded-rule-masked", "tinyattn/ops/reduce.py",
           "        if is_grad_enabled():\n"
           "            # A recorded backward",
           "        if False:\n"
           "            # A recorded backward",
           "a recorded backward of cumprod at a zero takes the masked first-order path, whose "
           "derivative misses the zero's",
           "tests/test_ops_prod_norm.py"),
    mutant("unique-nans-one", "tinyattn/ops/index.py",
           "return_counts=True, equal_nan=False)\n"
           "            inverse = inverse.reshape(array.shape)",
           "return_counts=True, equal_nan=True)\n"
           "            inverse = inverse.reshape(array.shape)",
           "unique counts every NaN as one value (PyTorch keeps each)",
           "tests/test_ops_indexing_sorting.py"),
    mutant("clamp-kernel-low-wins", "tinyattn/kernels/elementwise.py",
           "            value = low if value < low else value\n"
           "            ys[i] = high if value > high else value",
           "            value = high if value > high else value\n"
           "            ys[i] = low if value < low else value",
           "the clamp kernel applies the upper bound first, so low wins where low > high",
           "tests/kernels/test_elementwise_kernel.py"),
    mutant("clamp-kernel-nan-to-low", "tinyattn/kernels/elementwise.py",
           "            ys[i] = low if value < low else value\n",
           "            ys[i] = value if value >= low else low\n",
           "the clamp kernel with a lower bound only turns NaN into the bound",
           "tests/kernels/test_elementwise_kernel.py"),
    mutant("clamp-rule-either-bound", "tinyattn/ops/unary.py",
           "inside = x <= high if inside is None else inside & (x <= high)",
           "inside = x <= high if inside is None else inside | (x <= high)",
           "Clamp's rule passes the gradient where x is within either bound, not both",
           "tests/kernels/test_elementwise_kernel.py", GRADCHECK),
    mutant("row-sums-kernel-mean-not-divided", "tinyattn/kernels/row_sums.py",
           "out[i] = row_sum(x[i]) / divisor",
           "out[i] = row_sum(x[i])",
           "the row-sum kernel returns sums where means were asked for",
           "tests/kernels/test_row_sums.py"),
    mutant("row-sums-kernel-squares-not-squared", "tinyattn/kernels/row_sums.py",
           "out[i] = row_dot(x[i], x[i]) / divisor",
           "out[i] = row_sum(x[i]) / divisor",
           "the row-sum kernel sums the values where their squares were asked for (the 2-norm)",
           "tests/kernels/test_row_sums.py"),
    mutant("row-sums-kernel-deviations-from-zero", "tinyattn/kernels/row_sums.py",
           "row_squared_deviations(x[i], row_sum(x[i]) / x.shape[1]) / divisor",
           "row_squared_deviations(x[i], 0.0) / divisor",
           "the row-sum kernel's deviations are taken from 0, not from the row's mean (var is "
           "the mean square)",
           "tests/kernels/test_row_sums.py"),
    mutant("cumsum-kernel-fourth-row-misread", "tinyattn/kernels/cumsum.py",
           "s3 += x[i + 3, j]",
           "s3 += x[i + 2, j]",
           "the running-sum kernel sums the third of four rows twice and never the fourth",
           "tests/kernels/test_cumsum.py"),
    mutant("cumsum-kernel-tail-rows-carry-on", "tinyattn/kernels/cumsum.py",
           "    while i < stop:\n        total = np.float64(0.0)\n",
           "    total = np.float64(0.0)\n    while i < stop:\n",
           "the running-sum kernel's rows after the last four start from the previous row's "
           "total",
           "tests/kernels/test_cumsum.py"),
    mutant("cumsum-any-dim-to-the-kernel", "tinyattn/ops/reduce.py",
           "if (dim == array.ndim - 1 and array.dtype in FLOAT_DTYPES",
           "if (array.dtype in FLOAT_DTYPES",
           "cumsum over any dim runs the last-dim kernel",
           "tests/kernels/test_cumsum.py"),
    mutant("trailing-sums-any-axes", "tinyattn/ops/reduce.py",
           "            or axes != tuple(range(ndim - len(axes), ndim))",
           "            or len(axes) > ndim",
           "sum and mean over leading dims go to the row-sum kernel as if they were trailing",
           "tests/kernels/test_row_sums.py"),
    mutant("row-maximum-chain-skips-a-lane", "tinyattn/kernels/reductions.py",
           "m2, m3 = _larger(row[j + 2], m2), _larger(row[j + 3], m3)",
           "m2, m3 = _larger(row[j + 2], m2), _larger(row[j + 2], m3)",
           "the row maximum (softmax, cross-entropy) never reads every eighth element, from the "
           "fourth",
           "tests/kernels/test_reductions.py", "tests/kernels/test_softmax_kernel.py",
           "tests/kernels/test_cross_entropy_kernel.py"),
    mutant("row-maximum-chains-not-joined", "tinyattn/kernels/reductions.py",
           "_larger(_larger(m4, m5), _larger(m6, m7)))",
           "_larger(m4, _larger(m6, m7)))",
           "the row maximum (softmax, cross-entropy) leaves out one of its eight chains when it "
           "joins them",
           "tests/kernels/test_reductions.py", "tests/kernels/test_softmax_kernel.py",
           "tests/kernels/test_cross_entropy_kernel.py"),
    mutant("sort-descending-positions-not-mapped-back", "tinyattn/kernels/top_k.py",
           "positions = n - 1 - np.flip(order, -1)",
           "positions = np.flip(order, -1)",
           "a descending sort returns positions in the reversed row instead of the row",
           "tests/test_ops_indexing_sorting.py"),
    mutant("sort-rule-zeros-of-the-output-shape", "tinyattn/ops/index.py",
           "zeros = from_numpy(np.zeros(ctx.in_shape, grad.dtype))",
           "zeros = from_numpy(np.zeros(grad.shape, grad.dtype))",
           "the rule of sort and topk scatters into zeros of the output's shape: topk's input "
           "has more positions than it returns",
           "tests/test_ops_indexing_sorting.py"),
    mutant("topk-kernel-ties-reversed", "tinyattn/kernels/top_k.py",
           "    if a == b:\n        return i < j\n",
           "    if a == b:\n        return i > j\n",
           "topk puts the later of equal values first (the stable order puts the earlier)",
           "tests/kernels/test_top_k.py", "tests/test_ops_indexing_sorting.py"),
    mutant("topk-kernel-nan-not-largest", "tinyattn/kernels/top_k.py",
           "        if b == b:  # only a\n            return largest\n",
           "        if b == b:  # only a\n            return not largest\n",
           "topk orders a NaN as the smallest value against a number in one direction",
           "tests/kernels/test_top_k.py", "tests/test_ops_indexing_sorting.py"),
    mutant("topk-kernel-root-not-sunk", "tinyattn/kernels/top_k.py",
           "                heap[0] = j\n                _sink(row, heap, 0, k, largest)\n",
           "                heap[0] = j\n",
           "a value that enters the heap stays at its root: the heap no longer has the last "
           "of the k best there",
           "tests/kernels/test_top_k.py", "tests/test_ops_indexing_sorting.py"),
    mutant("topk-kernel-heapsort-stops-early", "tinyattn/kernels/top_k.py",
           "for end in range(k - 1, 0, -1):",
           "for end in range(k - 1, 1, -1):",
           "the heapsort leaves the first two of the k in heap order",
           "tests/kernels/test_top_k.py", "tests/test_ops_indexing_sorting.py"),
    mutant("topk-kernel-quick-test-against-the-first-value", "tinyattn/kernels/top_k.py",
           "        last = row[heap[0]]  # the root's value\n",
           "        last = row[0]  # the root's value\n",
           "the quick test starts from the row's first value instead of the root's: values "
           "that belong among the k are turned away",
           "tests/kernels/test_top_k.py", "tests/test_ops_indexing_sorting.py"),
    mutant("cat-plain-call-mixed-dtypes", "tinyattn/ops/index.py",
           "if not (isinstance(t, Tensor) and t.dtype == dtype and len(t.shape) == len(shape)",
           "if not (isinstance(t, Tensor) and len(t.shape) == len(shape)",
           "cat's quick check takes tensors of different dtypes: numpy promotes them by its own "
           "rules (int64 with float32 gives float64, PyTorch float32)",
           "tests/test_torch_corners.py", "tests/test_ops_indexing_sorting.py",
           "tests/test_tensor.py"),
    mutant("engine-version-not-bumped", "tinyattn/tensor.py",
           "        self._data[...] = result._data\n        self._version.value += 1\n",
           "        self._data[...] = result._data\n",
           "an in-place op does not bump the version counter (a saved tensor changed in place "
           "goes unnoticed)",
           "tests/test_inplace.py", "tests/test_custom_function.py"),
    mutant("leaf-grad-shared-buffer-kept", "tinyattn/tensor.py",
           "                            and sys.getrefcount(base) == 3)",
           "                            and sys.getrefcount(base) >= 3)",
           "a leaf keeps, without a copy, a gradient that views a buffer other arrays also "
           "view: writing to .grad changes a gradient a hook kept",
           AUTOGRAD),
    mutant("engine-last-gradients-held", "tinyattn/autograd/engine.py",
           "        input_grads = grads = g = data = like = sent = held = None\n",
           "",
           "the engine still holds the last node's gradients when it hands gradients to the "
           "leaves: they look shared, and a leaf copies its gradient instead of keeping it",
           AUTOGRAD),
    mutant("engine-topological-order", "tinyattn/autograd/engine.py",
           "heapq.heappush(ready, (-edge.sequence_nr, id(edge), edge))",
           "heapq.heappush(ready, (edge.sequence_nr, id(edge), edge))",
           "the backward runs the earliest recorded op first instead of the latest: an op may "
           "run before every gradient of its outputs has arrived",
           AUTOGRAD),
    mutant("engine-study-order-unreversed", "tinyattn/autograd/engine.py",
           "return sorted(found.values(), key=_recorded, reverse=True)",
           "return sorted(found.values(), key=_recorded)",
           "topological_order lists the ops in the order they were recorded (inputs first): the "
           "study tools number and walk the graph from the wrong end",
           "tests/test_view.py", "tests/test_explain.py"),
    mutant("engine-create-graph-sum-unrecorded", "tinyattn/autograd/engine.py",
           "    add = operator.add if create_graph else _sum_arrays\n",
           "    add = _sum_arrays\n",
           "with create_graph=True the gradients that meet at one tensor are summed on arrays: "
           "the sum is not recorded, so a second derivative through a tensor used twice is "
           "wrong",
           HIGHER),
    mutant("engine-create-graph-ignored", "tinyattn/autograd/engine.py",
           "    _set_grad_enabled(create_graph)\n",
           "    _set_grad_enabled(False)\n",
           "create_graph=True records nothing (no second derivatives)",
           HIGHER),

    # ---- custom Function semantics (tinyattn/autograd/function.py) ----------------------------
    mutant("function-non-differentiable-ignored", "tinyattn/autograd/function.py",
           "        if out._data.dtype.kind == \"f\" and not (\n"
           "                ctx._non_differentiable and any(out is n for n in "
           "ctx._non_differentiable)):",
           "        if out._data.dtype.kind == \"f\" and not (\n"
           "                ctx._non_differentiable and all(out is n for n in "
           "ctx._non_differentiable)):",
           "mark_non_differentiable works only when every output is marked (any → all)",
           "tests/test_custom_function.py", "tests/test_ops_indexing_sorting.py"),
    mutant("function-once-differentiable-saved", "tinyattn/autograd/function.py",
           "        requiring += [s for s in ctx.saved_tensors if s is not None and "
           "s.requires_grad]\n",
           "",
           "a once_differentiable backward is refused a second time only when the incoming "
           "gradient requires grad, not when a saved input does",
           "tests/test_custom_function.py", HIGHER),
    mutant("function-needs-input-grad-tensors-only", "tinyattn/autograd/function.py",
           "            else:\n"
           "                needs.append(False)\n"
           "                edges.append(None)\n",
           "            else:\n"
           "                edges.append(None)\n",
           "needs_input_grad leaves out the non-tensor arguments (one entry per tensor instead "
           "of one per argument)",
           "tests/test_custom_function.py", AUTOGRAD),
    mutant("function-materialize-grads", "tinyattn/autograd/engine.py",
           "if len(grads) > 1 and node.materialize_grads and None in grads:",
           "if len(grads) > 1 and None in grads:",
           "set_materialize_grads(False) is ignored: unused outputs still get zeros",
           "tests/test_custom_function.py"),

    # ---- the gradient checker, initialisers, hooks, dtypes and attention layers' outputs -----
    mutant("gradcheck-nan-agrees", "tinyattn/gradcheck.py",
           "excess[np.isnan(excess)] = np.inf",
           "excess[np.isnan(excess)] = 0.0",
           "gradcheck counts a NaN gradient as agreeing with finite differences",
           "tests/test_gradcheck.py"),
    mutant("init-fan-mode-swapped", "tinyattn/nn/init.py",
           'fan = fan_in if mode.lower() == "fan_in" else fan_out',
           'fan = fan_out if mode.lower() == "fan_in" else fan_in',
           "Kaiming's mode reads the fan the wrong way round (fan_in scales by fan_out)",
           "tests/test_init.py"),
    mutant("pre-hook-single-value-unwrapped", "tinyattn/nn/module.py",
           "args = result if isinstance(result, tuple) else (result,)",
           "args = result",
           "a forward pre-hook that returns one value (not a tuple) replaces the arguments by "
           "that value itself, which forward then unpacks",
           "tests/test_module.py", "tests/test_parity_module.py"),
    mutant("to-dtype-skips-buffers", "tinyattn/nn/conversion.py",
           "for tensor in (*module._parameters.values(), *module._buffers.values()):",
           "for tensor in module._parameters.values():",
           "Module.to(dtype) converts the parameters but leaves the buffers in the old dtype",
           "tests/test_module.py"),
    mutant("interop-packs-key-rows-first", "tinyattn/interop.py",
           '    roles = ("q_proj", "k_proj", "v_proj")\n    packed = ',
           '    roles = ("k_proj", "q_proj", "v_proj")\n    packed = ',
           "packing separate projections for PyTorch stacks the key's rows before the query's",
           "tests/test_multihead_attention.py"),
    mutant("mha-weights-summed-over-heads", "tinyattn/nn/attention.py",
           "weights = weights.mean(dim=1)  # (B, T, S)",
           "weights = weights.sum(dim=1)  # (B, T, S)",
           "multi-head attention's averaged weights add the heads up instead of averaging",
           "tests/test_multihead_attention.py"),

    # ---- optimizers and schedules (tinyattn/optim, tinyattn/kernels/adamw.py, nn/utils.py) ----
    mutant("adamw-decay-without-lr", "tinyattn/kernels/adamw.py",
           "decay = 1.0 - lr * weight_decay if decoupled else 1.0",
           "decay = 1.0 - weight_decay if decoupled else 1.0",
           "AdamW's decoupled decay is not scaled by the learning rate",
           "tests/test_optim.py", "tests/test_parity_optim.py"),
    mutant("adam-bias-correction1", "tinyattn/kernels/adamw.py",
           "return decay, coupled_wd, -lr / bias_correction1, math.sqrt(bias_correction2),",
           "return decay, coupled_wd, -lr, math.sqrt(bias_correction2),",
           "Adam's step size leaves out the first moment's bias correction",
           "tests/test_optim.py", "tests/test_parity_optim.py"),
    mutant("amsgrad-no-running-max", "tinyattn/optim/adam.py",
           "np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)",
           "max_exp_avg_sq[...] = exp_avg_sq",
           "AMSGrad keeps the latest second moment instead of its running maximum (plain Adam)",
           "tests/test_optim.py", "tests/test_parity_optim.py"),
    mutant("sgd-momentum-ema", "tinyattn/optim/sgd.py",
           "buffer *= dtype(momentum)",
           "buffer *= dtype(1 - momentum)",
           "SGD's momentum buffer decays by 1 − μ instead of μ",
           "tests/test_optim.py", "tests/test_parity_optim.py"),
    mutant("clip-grad-norm-sum", "tinyattn/nn/utils.py",
           "total_norm = _vector_norm(per_param, norm_type)",
           "total_norm = per_param.sum()",
           "clip_grad_norm_ adds the per-parameter norms instead of taking their norm",
           "tests/test_optim.py", "tests/test_parity_optim.py", "tests/test_layers.py"),
    mutant("lr-warmup-starts-at-zero", "tinyattn/optim/lr_scheduler.py",
           "return base_lr * (step + 1) / (warmup_steps + 1)",
           "return base_lr * step / warmup_steps",
           "the warm-up starts at lr 0 and reaches base_lr one step late",
           "tests/test_optim.py", "tests/test_parity_optim.py"),
    mutant("lr-cosine-progress", "tinyattn/optim/lr_scheduler.py",
           "progress = (step - warmup_steps) / (total_steps - warmup_steps)",
           "progress = step / total_steps",
           "the cosine decay after warm-up measures progress from step 0, not from the end of "
           "the warm-up",
           "tests/test_optim.py", "tests/test_parity_optim.py"),

    # ---- masks, offsets and positions (ops/attention_masks.py, nn/attention.py) ---------------
    mutant("mask-causal-diagonal", "tinyattn/ops/attention_masks.py",
           "        allowed &= j <= i\n",
           "        allowed &= j < i\n",
           "the causal band of the composed path leaves out the diagonal",
           "tests/test_attention.py", "tests/test_kv_cache.py"),
    mutant("mask-window-composed", "tinyattn/ops/attention_masks.py",
           "allowed &= (i - j < window) if causal else (np.abs(i - j) < window)",
           "allowed &= (i - j <= window) if causal else (np.abs(i - j) < window)",
           "the composed path's causal sliding window keeps one key too many",
           "tests/test_gqa_window.py", "tests/test_attention.py"),
    mutant("mask-kv-cache-offset", "tinyattn/nn/attention.py",
           "mask = fold(mask, band(T, S, causal, window, past), bias, dtype)",
           "mask = fold(mask, band(T, S, causal, window), bias, dtype)",
           "with a KV cache the causal band is aligned top-left (the new queries cannot see "
           "the cached keys after the first T)",
           "tests/test_kv_cache.py", "tests/test_gqa_window.py"),
    mutant("mask-rope-offset", "tinyattn/nn/attention.py",
           "q = self.hook_rot_q(self.rotary.rotate(q, past))  # (B, H, T, D)",
           "q = self.hook_rot_q(self.rotary.rotate(q, 0))  # (B, H, T, D)",
           "with a KV cache the new queries are rotated as positions 0 … T − 1",
           "tests/test_kv_cache.py", "tests/test_positional.py"),
    mutant("mask-layer-polarity-mixed", "tinyattn/ops/attention_masks.py",
           "mask = from_numpy(np.where(mask.numpy(), -np.inf, 0.0).astype(dtype))",
           "mask = from_numpy(np.where(mask.numpy(), 0.0, -np.inf).astype(dtype))",
           "a layer's boolean mask merged with a float mask is read with SDPA's polarity "
           "(True = may attend)",
           "tests/test_attention.py", "tests/test_multihead_attention.py",
           "tests/test_parity_attention.py"),
    mutant("mask-key-padding-axis", "tinyattn/ops/attention_masks.py",
           "masks.append(mask.reshape(B, 1, 1, S))  # (B, 1, 1, S)",
           "masks.append(mask.reshape(B, 1, S, 1))  # (B, 1, 1, S)",
           "key_padding_mask masks queries instead of keys (right only when T = S and it is "
           "symmetric)",
           "tests/test_multihead_attention.py", "tests/test_parity_attention.py"),
    mutant("mask-fold-polarity", "tinyattn/ops/attention_masks.py",
           "return add(mask, from_numpy(np.where(allowed, 0.0, -np.inf).astype(dtype)))",
           "return add(mask, from_numpy(np.where(allowed, -np.inf, 0.0).astype(dtype)))",
           "a causal band folded into a float mask forbids the allowed keys",
           "tests/test_attention.py", "tests/test_multihead_attention.py",
           "tests/test_kv_cache.py"),
    mutant("mask-kernel-bias-polarity", "tinyattn/ops/attention_masks.py",
           "bias = np.where(bias, np.zeros((), np.float64), np.full((), -np.inf))",
           "bias = np.where(bias, np.full((), -np.inf), np.zeros((), np.float64))",
           "a boolean SDPA mask reaches the fused kernel with the layers' polarity (True = "
           "may not attend)",
           "tests/test_attention.py", FAST, "tests/test_parity_attention.py"),
    mutant("alibi-top-left", "tinyattn/functional/positional.py",
           "query_pos = np.arange(key_len - query_len, key_len)[:, None]  # (T, 1)",
           "query_pos = np.arange(query_len)[:, None]  # (T, 1)",
           "the ALiBi bias places the queries at the first T key positions, not the last "
           "(wrong while decoding with a cache)",
           "tests/test_positional.py", "tests/test_kv_cache.py"),
    mutant("rope-rotate-half-sign", "tinyattn/functional/positional.py",
           "return cat([-x[..., half:], x[..., :half]], dim=-1)",
           "return cat([x[..., half:], -x[..., :half]], dim=-1)",
           "rotate_half negates the wrong half: RoPE rotates by −θ (Llama's weights then "
           "give other scores)",
           "tests/test_positional.py", "tests/test_kv_cache.py"),

    # ---- dtype promotion (tinyattn/dtypes.py) -------------------------------------------------
    mutant("promote-float-tensor-wins", "tinyattn/dtypes.py",
           '    if lower is None or higher.kind == "f":\n        return higher\n',
           "    if lower is None:\n        return higher\n",
           "a float16 tensor times a Python float becomes float32 (the scalar's default dtype "
           "wins over the tensor's float dtype)",
           "tinyattn/dtypes.py", "tests/test_tensor.py", "tests/test_torch_surface.py"),
    mutant("promote-within-category", "tinyattn/dtypes.py",
           "        return a if category(a) > category(b) else b\n"
           "    return np.promote_types(a, b)",
           "        return a if category(a) > category(b) else b\n    return a",
           "within one category the left operand's dtype wins (uint8 + int8 stays uint8, "
           "float32 + float64 stays float32)",
           "tinyattn/dtypes.py", "tests/test_tensor.py", "tests/test_torch_surface.py"),

    # ---- serialization (tinyattn/serialization.py, tinyattn/restricted_pickle.py) -------------
    mutant("save-drops-offset", "tinyattn/serialization.py",
           "(Persistent(pid), offset, tuple(array.shape), strides, requires_grad,",
           "(Persistent(pid), 0, tuple(array.shape), strides, requires_grad,",
           "save writes every view of a shared storage at offset 0",
           "tests/test_serialization.py", "tinyattn/serialization.py"),
    mutant("save-byte-strides", "tinyattn/serialization.py",
           "            strides = tuple(s // itemsize for s in array.strides)\n",
           "            strides = tuple(s for s in array.strides)\n",
           "save writes a view's strides in bytes instead of elements",
           "tests/test_serialization.py"),
    mutant("load-ignores-offset", "tinyattn/serialization.py",
           "return flat[offset:offset + numel].reshape(size)",
           "return flat[:numel].reshape(size)",
           "load reads a contiguous tensor from the start of its storage, ignoring its offset",
           "tests/test_serialization.py"),
    mutant("save-zip-alignment", "tinyattn/serialization.py",
           "padding = -(handle.tell() + header) % 64",
           "padding = -handle.tell() % 64",
           "save aligns the local header, not the record's data, to 64 bytes",
           "tests/test_serialization.py"),
    mutant("unpickler-allows-any-builtin", "tinyattn/serialization.py",
           'if module == "builtins" and name in ("set", "bytearray", "complex"):',
           'if module == "builtins":',
           "the allow-list lets the pickle name any builtin (eval, exec, getattr …)",
           "tests/test_serialization.py"),
    mutant("unpickler-build-dunder", "tinyattn/serialization.py",
           'isinstance(key, str) and not key.startswith("__") for key in state):',
           "isinstance(key, str) for key in state):",
           "BUILD may set dunder attributes (__reduce_ex__ …) of an OrderedDict",
           "tests/test_serialization.py"),

    # ---- the data loader (tinyattn/utils/data) ------------------------------------------------
    mutant("data-drop-last-ignored", "tinyattn/utils/data/sampler.py",
           "        if batch and not self.drop_last:\n            yield batch",
           "        if batch:\n            yield batch",
           "BatchSampler yields the last, short batch with drop_last=True",
           "tests/test_data.py"),
    mutant("data-len-rounding", "tinyattn/utils/data/sampler.py",
           "return n // self.batch_size if self.drop_last else -(-n // self.batch_size)",
           "return -(-n // self.batch_size) if self.drop_last else n // self.batch_size",
           "BatchSampler's len rounds the wrong way for drop_last",
           "tests/test_data.py"),
    mutant("data-random-sampler-count", "tinyattn/utils/data/sampler.py",
           "for _ in range(total // n):",
           "for _ in range(-(-total // n)):",
           "RandomSampler without replacement draws whole permutations past num_samples",
           "tests/test_data.py"),
    mutant("data-collate-float-dtype", "tinyattn/utils/data/_utils/collate.py",
           "return Tensor(list(batch), dtype=np.float64)",
           "return Tensor(list(batch))",
           "default_collate makes Python floats float32 (PyTorch: float64)",
           "tests/test_data.py"),
    mutant("data-iterable-drop-last", "tinyattn/utils/data/dataloader.py",
           "if not batch or (len(batch) < size and loader.drop_last):",
           "if not batch:",
           "DataLoader over an IterableDataset yields the short last batch with drop_last",
           "tests/test_data.py"),
]


# Checks of the set-up, run before the mutants: each must be caught, or no result means anything.
SANITY: list[Mutant] = [
    # the runs import the scratch tree's tinyattn (not the editable install's)
    mutant("sanity-scratch-package", "tinyattn/ops/unary.py",
           "        return grad * y\n",
           "        return grad * y * 2.0\n",
           "exp's rule doubles its gradient (blatant)",
           "tests/test_ops_gradcheck.py", "-k", "exp"),
    # a kernel that inlines a mutated helper from another file is compiled again: the softmax
    # kernels inline fast_exp, and numba's own cache check looks at softmax.py only
    mutant("sanity-inlined-kernel-recompiled", "tinyattn/kernels/exp.py",
           "    return poly * two_pow_n\n",
           "    return poly * two_pow_n * np.float32(1.5)\n",
           "float32 fast_exp is 1.5 times too large (blatant; seen only through the log-softmax "
           "kernel's compiled code)",
           "tests/kernels/test_softmax_kernel.py"),
]


# ---- the scratch tree ----------------------------------------------------------------------


class Stale(Exception):
    """The mutant's snippet is not in its file exactly once."""


def _apply(path: Path, m: Mutant) -> str:
    """Write ``m`` into ``path``; return the original text (for :func:`_restore`)."""
    if not path.is_file():
        raise Stale(f"{m.file} does not exist")
    text = path.read_text()
    count = text.count(m.original)
    if count != 1:
        raise Stale(f"the original snippet occurs {count} times in {m.file} (expected once)")
    mutated = text.replace(m.original, m.replacement)
    try:
        ast.parse(mutated)
    except SyntaxError as err:
        raise Stale(f"the mutated {m.file} does not parse: {err}") from None
    path.write_text(mutated)
    _drop_bytecode(path)
    return text


def _restore(path: Path, text: str) -> None:
    path.write_text(text)
    _drop_bytecode(path)


def _drop_bytecode(path: Path) -> None:
    """Remove the module's .pyc: its validation (mtime in seconds, size) can miss a mutation
    written within the second, by the same number of bytes."""
    try:
        os.remove(importlib.util.cache_from_source(str(path)))
    except FileNotFoundError:
        pass


def _module_name(tree: Path, path: Path) -> str:
    parts = list(path.relative_to(tree).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: Path, path: Path) -> set[str]:
    """The modules ``path`` imports (absolute names; ``from p import m`` also names ``p.m``)."""
    module = _module_name(tree, path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = ".".join(p for p in (base if node.level else "", node.module or "") if p)
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def _names(tree: Path, path: Path) -> set[str]:
    """What an import of ``path`` may say: its dotted name, and for a test helper its bare
    name too (the tests import their helpers from their own directory)."""
    names = {_module_name(tree, path)}
    if path.relative_to(tree).parts[0] == "tests":
        names.add(path.stem)
    return names


def dependents(tree: Path, file: str) -> list[Path]:
    """``file`` and every Python file of the tree that imports it, directly or not."""
    files = [p for top in ("tinyattn", "tests") for p in (tree / top).rglob("*.py")]
    imported = {p: _imports(tree, p) for p in files}
    wanted = _names(tree, tree / file)
    found = {tree / file}
    changed = True
    while changed:
        changed = False
        for p in files:
            if p not in found and imported[p] & wanted:
                found.add(p)
                wanted |= _names(tree, p)
                changed = True
    return sorted(found)


def _cache_subdir(source: Path) -> str:
    """The directory under ``NUMBA_CACHE_DIR`` that numba files ``source``'s functions in."""
    from numba.core.caching import _CacheLocator

    return _CacheLocator.get_suitable_cache_subpath(str(source))


def isolated_cache(warm: Path, target: Path, stale_sources: list[Path]) -> None:
    """``target``: the warm cache (hard links: numba replaces files, it never writes into
    them) without the entries of ``stale_sources``, which will compile again."""
    drop: dict[str, set[str]] = {}
    for source in stale_sources:
        drop.setdefault(_cache_subdir(source), set()).add(source.stem + ".")
    target.mkdir(parents=True)
    if not warm.is_dir():
        return
    for directory in warm.iterdir():
        prefixes = tuple(drop.get(directory.name, ()))
        for entry in directory.iterdir():
            if prefixes and entry.name.startswith(prefixes):
                continue
            (target / directory.name).mkdir(exist_ok=True)
            os.link(entry, target / directory.name / entry.name)


class Workspace:
    """A scratch copy of the repository with its own warm numba cache."""

    def __init__(self, root: Path, index: int):
        self.tree = root / f"tree{index}"
        self.warm_cache = root / f"numba-cache{index}"
        self.logs = root / "logs"
        shutil.copytree(REPO, self.tree, ignore=_IGNORED, symlinks=True)
        self.warm_cache.mkdir()
        self.logs.mkdir(exist_ok=True)

    def env(self, cache: Path) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(self.tree), env.get("PYTHONPATH", "")) if p)
        env["NUMBA_CACHE_DIR"] = str(cache)
        env["TINYATTN_QUIET_COMPILE"] = "1"
        env["MPLBACKEND"] = "Agg"
        env.pop("PYTEST_ADDOPTS", None)
        return env

    def imported_package(self) -> str:
        """Where ``import tinyattn`` finds the package in a run (must be the scratch tree)."""
        result = subprocess.run([sys.executable, "-c", "import tinyattn; print(tinyattn.__file__)"],
                                cwd=self.tree, env=self.env(self.warm_cache), capture_output=True,
                                text=True, timeout=300)
        if result.returncode:
            raise SystemExit(f"mutants: importing tinyattn in the scratch tree failed:\n"
                             f"{result.stderr}")
        return result.stdout.strip()


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # caught, SURVIVED, survived (documented), stale, timeout, error
    seconds: float
    detail: str  # the failing test, or why stale / an error


# A line of pytest's short summary: "FAILED tests/x.py::test_y[a b] - AssertionError: ...".
_FAILURE = re.compile(r"^(FAILED|ERROR) (.+?)(?: - .*)?$", re.MULTILINE)


def run_pytest(ws: Workspace, tests: tuple[str, ...], cache: Path, timeout: float,
               log: Path) -> tuple[str, str]:
    """Run the tests in the scratch tree: ``(status, detail)``."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rfE",
               *tests]
    with open(log, "w") as out:
        out.write(" ".join(command) + "\n\n")
        out.flush()
        process = subprocess.Popen(command, cwd=ws.tree, env=ws.env(cache), stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the run we started, and its children
            except ProcessLookupError:
                pass
            process.wait()
            return "timeout", f"no result after {timeout:.0f} s"
    output = log.read_text(errors="replace")
    failure = _FAILURE.search(output)
    if code in (1, 2) and failure:
        return "caught", failure.group(2)
    if code == 0:
        return "passed", ""
    if code < 0:
        return "caught", f"the run died of signal {-code}"
    tail = output.strip().splitlines()[-1:] or [""]
    return "error", f"pytest exit code {code}: {tail[0][:120]}"


def run_mutant(ws: Workspace, m: Mutant, tests: tuple[str, ...], timeout: float) -> Outcome:
    start = time.monotonic()
    path = ws.tree / m.file
    try:
        original = _apply(path, m)
    except Stale as err:
        return Outcome(m, "stale", 0.0, str(err))
    cache = ws.warm_cache
    temporary = None
    try:
        if m.file.startswith("tinyattn/kernels/"):
            temporary = Path(tempfile.mkdtemp(prefix="cache-", dir=ws.tree.parent))
            cache = temporary / "numba"
            isolated_cache(ws.warm_cache, cache, dependents(ws.tree, m.file))
        status, detail = run_pytest(ws, tests, cache, timeout, ws.logs / f"{m.id}.log")
    finally:
        _restore(path, original)
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    if status == "passed":
        status = "survived (documented)" if m.reason else "SURVIVED"
        detail = m.reason
    return Outcome(m, status, time.monotonic() - start, detail)


# ---- the report ----------------------------------------------------------------------------


def table(outcomes: list[Outcome], markdown: bool) -> str:
    """One row per mutant: id, file, outcome, seconds, the failed test (or a note), the bug
    (in plain text on a line of its own below the row)."""
    header = ("id", "file", "outcome", "s", "failed test / note", "the bug")
    rows = [(o.mutant.id, o.mutant.file.removeprefix("tinyattn/"), o.status,
             f"{o.seconds:.0f}", o.detail, o.mutant.description) for o in outcomes]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = []
    for row in [header, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[4])
        lines.append(f"    {row[5]}")
    return "\n".join(line.rstrip() for line in lines)


def score(outcomes: list[Outcome]) -> str:
    caught = sum(o.status == "caught" for o in outcomes)
    others = {}
    for o in outcomes:
        if o.status != "caught":
            others[o.status] = others.get(o.status, 0) + 1
    rest = ", ".join(f"{n} {status}" for status, n in sorted(others.items()))
    total = len(outcomes)
    percent = 100.0 * caught / total if total else 0.0
    return f"score: {caught}/{total} caught ({percent:.0f}%)" + (f"; {rest}" if rest else "")


def selected(patterns: list[str] | None) -> list[Mutant]:
    if not patterns:
        return list(MUTANTS)
    chosen = [m for m in MUTANTS if any(fnmatch.fnmatchcase(m.id, p) for p in patterns)]
    unknown = [p for p in patterns if not any(fnmatch.fnmatchcase(m.id, p) for m in MUTANTS)]
    if unknown:
        raise SystemExit(f"mutants: no mutant matches {', '.join(unknown)} (see --list)")
    return chosen


def check_list(mutants: list[Mutant]) -> list[str]:
    """Problems of the list itself: duplicate ids, stale snippets, missing test paths."""
    problems = []
    ids = [m.id for m in MUTANTS + SANITY]
    problems += [f"{i}: duplicate id" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for m in mutants:
        path = REPO / m.file
        count = path.read_text().count(m.original) if path.is_file() else 0
        if count != 1:
            problems.append(f"{m.id}: stale, the original snippet occurs {count} times in "
                            f"{m.file}")
        if m.original == m.replacement:
            problems.append(f"{m.id}: the replacement equals the original")
        args = iter(m.tests)
        for arg in args:
            if arg == "-k":
                next(args, None)
            elif not (REPO / arg.split("::")[0]).exists():
                problems.append(f"{m.id}: no test file {arg}")
    return problems


def test_files(selections: list[tuple[str, ...]]) -> list[str]:
    """The files of every selection (pytest arguments), in first-use order: what the baseline
    runs, whole."""
    files: list[str] = []
    for selection in selections:
        args = iter(selection)
        for arg in args:
            if arg == "-k":
                next(args, None)
                continue
            file = arg.split("::")[0]
            if file not in files:
                files.append(file)
    return files


def check_setup(ws: Workspace, files: tuple[str, ...], timeout: float) -> None:
    """The baseline (the unmutated tests pass; it also warms numba's cache) and the
    :data:`SANITY` mutants (caught); exit when either fails."""
    files += tuple(f for f in test_files([m.tests for m in SANITY]) if f not in files)
    print(f"baseline: the unmutated tree on {len(files)} test files ...", file=sys.stderr,
          flush=True)
    start = time.monotonic()
    status, detail = run_pytest(ws, files, ws.warm_cache, timeout * 4, ws.logs / "baseline.log")
    print(f"baseline: {status} in {time.monotonic() - start:.0f} s", file=sys.stderr)
    if status != "passed":
        raise SystemExit(f"mutants: the unmutated tests do not pass ({detail}); see "
                         f"{ws.logs / 'baseline.log'} (rerun with --keep)")
    for m in SANITY:
        outcome = run_mutant(ws, m, m.tests, timeout)
        print(f"sanity: {m.id}: {outcome.status} ({outcome.seconds:.0f} s) {outcome.detail}",
              file=sys.stderr, flush=True)
        if outcome.status != "caught":
            raise SystemExit(f"mutants: the sanity mutant {m.id} ({m.description}) was not "
                             "caught: the runs do not test the mutated code")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Plant each mutant of tinyattn in a scratch copy and run the tests that "
                    "should catch it (not part of CI).")
    parser.add_argument("--only", nargs="+", metavar="ID",
                        help="run these mutants (ids or shell patterns such as 'attn-*')")
    parser.add_argument("--list", action="store_true",
                        help="list the mutants, check them for staleness, run nothing")
    parser.add_argument("--jobs", type=int, default=1,
                        help="mutants run at once, each in its own scratch copy (default 1)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds before a mutant's test run is stopped (default 900)")
    parser.add_argument("--tests", nargs="+", metavar="ARG",
                        help="run these pytest arguments instead of each mutant's own tests")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the checks before the mutants: the unmutated run of the "
                             "selected tests (it must pass, and it warms numba's cache) and the "
                             "sanity mutants (they must be caught)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch directory (the trees and each run's log)")
    args = parser.parse_args(argv)
    mutants = selected(args.only)

    problems = check_list(mutants + SANITY)
    if args.list:
        for m in mutants:
            print(f"{m.id}  ({m.file})\n    {m.description}\n    tests: {' '.join(m.tests)}")
            if m.reason:
                print(f"    cannot be caught: {m.reason}")
        print(f"\n{len(mutants)} mutants" + ("; problems:\n  " + "\n  ".join(problems)
                                             if problems else "; none stale"))
        return 1 if problems else 0
    for problem in problems:
        print(f"mutants: {problem}", file=sys.stderr)

    jobs = max(1, min(args.jobs, len(mutants)))
    root = Path(tempfile.mkdtemp(prefix="tinyattn-mutants-"))
    started = time.monotonic()
    try:
        workspaces = [Workspace(root, i) for i in range(jobs)]
        for ws in workspaces:
            where = ws.imported_package()
            print(f"scratch tree {ws.tree}: tinyattn imported from {where}", file=sys.stderr)
            if not Path(where).resolve().is_relative_to(ws.tree.resolve()):
                raise SystemExit("mutants: the runs would not test the scratch copy")
        if not args.no_baseline:
            selections = [tuple(args.tests)] if args.tests else [m.tests for m in mutants]
            check_setup(workspaces[0], tuple(test_files(selections)), args.timeout)

        free = list(workspaces)
        lock = threading.Lock()
        done: list[Outcome] = []

        def work(m: Mutant) -> Outcome:
            with lock:
                ws = free.pop()
            try:
                outcome = run_mutant(ws, m, tuple(args.tests or m.tests), args.timeout)
            finally:
                with lock:
                    free.append(ws)
            with lock:
                done.append(outcome)
                print(f"[{len(done)}/{len(mutants)}] {m.id}: {outcome.status} "
                      f"({outcome.seconds:.0f} s) {outcome.detail}", file=sys.stderr,
                      flush=True)
            return outcome

        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            outcomes = list(pool.map(work, mutants))
    finally:
        if args.keep:
            print(f"scratch directory kept: {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)

    minutes = (time.monotonic() - started) / 60
    print(table(outcomes, args.markdown))
    print()
    print(f"{score(outcomes)} — {datetime.date.today().isoformat()}, {minutes:.0f} min with "
          f"--jobs {jobs}")
    return 0 if all(o.status == "caught" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
