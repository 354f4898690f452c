"""Bad input catalogue for tensors and primitive ops: each case asserts the exception type and
that the message names the op, the offending shapes/values and what was expected."""

import numpy as np
import pytest

import tinyattn as ta

X = ta.ones(2, 3)

CASES = [
    # (id, callable, exception type, regex the message must match)
    ("matmul-inner-dims", lambda: ta.ones(3, 4) @ ta.ones(5, 6), ValueError,
     r"matmul: shapes \(3, 4\) and \(5, 6\) do not align: 4 != 5"),
    ("matmul-batch-dims", lambda: ta.ones(2, 3, 4) @ ta.ones(3, 4, 5), ValueError,
     r"matmul \(batch dims\): shapes \(2,\) and \(3,\) are not broadcastable"),
    ("matmul-scalar", lambda: ta.tensor(2.0) @ ta.ones(2), ValueError,
     r"matmul: both operands need at least 1 dim"),
    ("add-broadcast", lambda: ta.ones(2, 3) + ta.ones(4), ValueError,
     r"add: shapes \(2, 3\) and \(4,\) are not broadcastable"),
    ("mul-broadcast", lambda: ta.ones(2, 3) * ta.ones(2), ValueError,
     r"mul: shapes \(2, 3\) and \(2,\) are not broadcastable"),
    ("where-broadcast", lambda: ta.where(ta.ones(2) > 0, ta.ones(3), 0.0), ValueError,
     r"where: shapes \(2,\) and \(3,\) and \(\) are not broadcastable"),
    ("reshape-size", lambda: X.reshape(4, 2), ValueError,
     r"reshape: cannot reshape a tensor of shape \(2, 3\) \(6 elements\) "
     r"into \(4, 2\) \(8 elements\)"),
    ("reshape-infer", lambda: X.reshape(-1, 4), ValueError,
     r"reshape: cannot reshape a tensor of shape \(2, 3\) \(6 elements\) into \(-1, 4\)"),
    ("reshape-two-minus-one", lambda: X.reshape(-1, -1), ValueError, r"at most one -1"),
    ("bad-dim-sum", lambda: X.sum(dim=2), IndexError,
     r"sum: dim 2 is out of range for a tensor of 2 dims \(expected a dim in \[-2, 1\]\)"),
    ("bad-dim-softmax", lambda: X.softmax(dim=-3), IndexError, r"softmax: dim -3 is out of range"),
    ("bad-dim-transpose", lambda: X.transpose(0, 5), IndexError,
     r"transpose: dim 5 is out of range"),
    ("float-dim", lambda: X.sum(dim=1.0), TypeError, r"sum: dim must be an int, got float"),
    ("permute-not-a-permutation", lambda: X.permute(0, 0), ValueError,
     r"permute: dims \(0, 0\) are not a permutation of 2 axes"),
    ("permute-count", lambda: X.permute(1, 0, 2), ValueError, r"permute: got 3 dims"),
    ("expand-incompatible", lambda: X.expand(2, 4), ValueError,
     r"expand: the tensor of shape \(2, 3\) cannot be expanded to \(2, 4\): "
     r"dim 1 has size 3"),
    ("cat-mismatch", lambda: ta.cat([ta.ones(2, 3), ta.ones(2, 4)], dim=0), ValueError,
     r"cat: tensor 1 has shape \(2, 4\), which does not match tensor 0's shape \(2, 3\)"),
    ("stack-mismatch", lambda: ta.stack([ta.ones(2), ta.ones(3)]), ValueError,
     r"stack: tensor 1 has shape \(3,\) but tensor 0 has \(2,\)"),
    ("cat-empty", lambda: ta.cat([]), ValueError, r"cat: expected a non-empty sequence"),
    ("split-sections", lambda: X.split([1, 1], dim=1), ValueError,
     r"split: sections \[1, 1\] must be non-negative and sum to the size 3"),
    ("chunk-zero", lambda: X.chunk(0), ValueError, r"chunk: chunks must be an int >= 1, got 0"),
    ("getitem-out-of-range", lambda: X[5], IndexError,
     r"getitem on a tensor of shape \(2, 3\): index 5 is out of bounds for axis 0 with size 2"),
    ("getitem-negative-out-of-range", lambda: X[:, -4], IndexError,
     r"getitem on a tensor of shape \(2, 3\): index -4 is out of bounds"),
    ("getitem-float-index", lambda: X[1.0], IndexError,
     r"getitem on a tensor of shape \(2, 3\): indices must be integers"),
    ("getitem-float-tensor-index", lambda: X[ta.tensor([0.0, 1.0])], IndexError,
     r"tensors used as indices must be long, int or bool tensors, got dtype float32"),
    ("getitem-mask-shape", lambda: X[np.ones((3, 2), dtype=bool)], IndexError,
     r"getitem on a tensor of shape \(2, 3\)"),
    ("masked-fill-int-mask", lambda: X.masked_fill(ta.ones(2, 3), 0.0), TypeError,
     r"masked_fill: the mask/condition must be a boolean tensor, got dtype float32"),
    ("masked-fill-shape", lambda: X.masked_fill(ta.ones(3, 3) > 0, 0.0), ValueError,
     r"masked_fill: shapes \(2, 3\) and \(3, 3\) are not broadcastable"),
    ("masked-fill-in-place-grows", lambda: ta.ones(3).masked_fill_(ta.ones(2, 3) > 0, 0.0),
     RuntimeError, r"masked_fill_: output with shape \(3,\) doesn't match the broadcast shape "
     r"\(2, 3\)"),
    ("int-requires-grad", lambda: ta.tensor([1, 2], requires_grad=True), TypeError,
     r"only floating point tensors can require gradients, got dtype int64"),
    ("bool-requires-grad", lambda: ta.tensor([True]).requires_grad_(), TypeError,
     r"only floating point tensors can require gradients, got dtype bool"),
    ("relu-of-bool", lambda: ta.tensor([True]).relu(), TypeError,
     r"relu: boolean inputs are not supported"),
    ("neg-of-bool", lambda: -ta.tensor([True]), TypeError, r"neg: negation.*bool"),
    ("mean-of-int", lambda: ta.arange(3).mean(), TypeError,
     r"mean: could not infer the output dtype"),
    ("int-to-negative-int-power", lambda: ta.arange(3) ** -1, TypeError,
     r"pow: integers to negative integer powers are not allowed"),
    ("matmul-mixed-dtypes", lambda: ta.ones(2, 2) @ ta.ones(2, 2, dtype=ta.float64), TypeError,
     r"matmul: expected all inputs to have the same dtype, got input float32, other float64"),
    ("view-of-non-contiguous", lambda: X.T.view(6), ValueError,
     r"view: size \[6\] is not compatible with the input's size and strides"),
    ("triu-1d", lambda: ta.triu(ta.ones(3)), ValueError,
     r"triu: expected a tensor of at least 2 dims, got shape \(3,\)"),
    ("t-of-3d", lambda: ta.ones(2, 3, 4).t(), ta.errors.ShapeError,
     r"t: expects a tensor of at most 2 dims, got shape \(2, 3, 4\)"),
    ("flip-twice", lambda: X.flip((1, -1)), ta.errors.ShapeError,
     r"flip: dims \(1, -1\) name the same axis twice"),
    ("flip-out-of-range", lambda: X.flip(2), IndexError, r"flip: dim 2 is out of range"),
    ("flip-of-array", lambda: ta.flip(np.ones(2), 0), TypeError, r"flip: input must be a"),
    ("item-of-many", lambda: X.item(), ValueError, r"item: only one-element tensors"),
    ("tensor-from-strings", lambda: ta.tensor(["a"]), TypeError,
     r"tensor: cannot make a tensor from data of dtype <U1"),
    ("zeros-negative", lambda: ta.zeros(-1), ValueError, r"non-negative int sizes, got \(-1,\)"),
    ("manual-seed-float", lambda: ta.manual_seed(1.5), TypeError,
     r"manual_seed: seed must be an int, got float"),
    ("add-string", lambda: X + "a", TypeError, r"expected a tensor, number or array, got str"),
    ("max-empty", lambda: ta.zeros(0).max(), ValueError, r"max: cannot reduce an empty dimension"),
    ("complex64", lambda: ta.ones(2).to(np.complex64), TypeError,
     r"to: dtype complex64 is not supported \(tinyattn computes in float32 and float64"),
    ("bfloat16", lambda: ta.ones(2).to(ta.bfloat16), TypeError,
     r"to: tinyattn has no bfloat16 storage"),
    ("gelu-of-int", lambda: ta.F.gelu(ta.arange(3)), TypeError,
     r"gelu: input must be a floating point tensor, got dtype int64"),
    ("embedding-1d-weight", lambda: ta.F.embedding(ta.tensor([0]), ta.ones(3)), ValueError,
     r"embedding: weight must have shape \(num_embeddings, embedding_dim\), got \(3,\)"),
    ("cross-entropy-0d", lambda: ta.F.cross_entropy(ta.tensor(1.0), ta.tensor(0)), ValueError,
     r"cross_entropy: input must have shape \(N, C\), \(C,\) or \(N, C, d1, ...\) with C >= 1"),
    ("cross-entropy-no-classes", lambda: ta.F.cross_entropy(ta.ones(2, 0), ta.tensor([0, 0])),
     ValueError, r"cross_entropy: input must have shape .* with C >= 1, got \(2, 0\)"),
    ("logical-of-float", lambda: ~X, TypeError,
     r"invert: ~ needs a bool or integer tensor, got dtype float32"),
]


@pytest.mark.parametrize("fn, error, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gets_a_clear_error(fn, error, message):
    with pytest.raises(error, match=message):
        fn()


def test_backward_errors_name_what_was_wrong():
    y = ta.ones(2, 3, requires_grad=True) * 2
    expected = r"only for one-element outputs; this tensor has shape \(2, 3\)"
    with pytest.raises(RuntimeError, match=expected):
        y.backward()
    expected = r"gradient has shape \(3,\) but the tensor has shape \(2, 3\)"
    with pytest.raises(ValueError, match=expected):
        y.backward(ta.ones(3))
    z = (ta.ones(2, requires_grad=True).exp()).sum()
    z.backward()
    with pytest.raises(RuntimeError, match=r"a second time \(op 'Sum'\).*retain_graph=True"):
        z.backward()


def test_matmul_mismatch_error_is_raised_before_any_kernel_runs():
    a = ta.ones(3, 4, requires_grad=True)
    with pytest.raises(ValueError, match=r"\(3, 4\) and \(3, 4\) do not align: 4 != 3"):
        a @ a
    assert a.grad is None


def test_the_broadcast_rule_is_numpys():
    """``validation.broadcast_shapes`` (the shape every broadcasting op checks) against
    numpy's ``broadcast_shapes``, on every combination of up to three shapes of up to three
    dims of sizes 0, 1, 2 and 3."""
    from itertools import product

    from tinyattn.validation import broadcast_shapes

    shapes = [()] + [s for ndim in (1, 2, 3) for s in product((0, 1, 2, 3), repeat=ndim)]
    rng = np.random.default_rng(0)
    for count in (1, 2, 3):
        for picks in rng.integers(len(shapes), size=(4000, count)):
            group = [shapes[i] for i in picks]
            try:
                want = tuple(np.broadcast_shapes(*group))
            except ValueError:
                with pytest.raises(ValueError, match="are not broadcastable"):
                    broadcast_shapes("op", *group)
            else:
                assert broadcast_shapes("op", *group) == want, group
