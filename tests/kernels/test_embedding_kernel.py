"""Embedding kernels: numpy twin, PyTorch parity, deterministic scatter-add, preconditions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_helpers import (
    DTYPES,
    assert_vjp_matches_central_difference,
    numba_threads,
)

from tinyattn.kernels import embedding as embedding_module
from tinyattn.kernels.embedding import (
    embedding_backward,
    embedding_backward_numpy,
    embedding_forward,
    embedding_forward_numpy,
)

TOL = {np.float32: 1e-5, np.float64: 1e-12}


def assert_matches_twin(weight, indices, grad, padding_idx):
    out = embedding_forward(weight, indices)
    assert out.shape == indices.shape + (weight.shape[1],) and out.dtype == weight.dtype
    np.testing.assert_array_equal(out, embedding_forward_numpy(weight, indices))
    tol = TOL[weight.dtype.type]
    dweight = embedding_backward(grad, indices, weight.shape[0], padding_idx)
    assert dweight.shape == weight.shape and dweight.dtype == grad.dtype
    np.testing.assert_allclose(
        dweight, embedding_backward_numpy(grad, indices, weight.shape[0], padding_idx),
        rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("num", "dim", "index_shape"),
                         [(1, 1, ()), (1, 3, (4,)), (5, 1, (2, 3)), (65, 128, (16, 64)),
                          (7, 33, (0,)), (9, 17, (3, 1, 5))])
@pytest.mark.parametrize("padding_idx", [None, 0])
def test_embedding_matches_numpy_twin(dtype, num, dim, index_shape, padding_idx):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((num, dim)).astype(dtype)
    indices = rng.integers(0, num, index_shape)
    grad = rng.standard_normal(index_shape + (dim,)).astype(dtype)
    assert_matches_twin(weight, indices, grad, padding_idx)


@settings(deadline=None, max_examples=25)
@given(num=st.integers(1, 20), dim=st.integers(0, 40),
       index_shape=st.lists(st.integers(0, 6), max_size=3).map(tuple),
       seed=st.integers(0, 2**16), dtype=st.sampled_from(DTYPES))
def test_embedding_matches_numpy_twin_on_generated_shapes(num, dim, index_shape, seed, dtype):
    rng = np.random.default_rng(seed)
    weight = rng.standard_normal((num, dim)).astype(dtype)
    indices = rng.integers(0, num, index_shape)
    grad = rng.standard_normal(index_shape + (dim,)).astype(dtype)
    assert_matches_twin(weight, indices, grad, int(rng.integers(0, num)))


def test_embedding_backward_sums_repeated_indices_and_zeroes_padding_row():
    indices = np.array([[2, 0, 2], [2, 1, 0]], dtype=np.int32)
    grad = np.arange(18, dtype=np.float64).reshape(2, 3, 3)
    dweight = embedding_backward(grad, indices, 4, padding_idx=1)
    np.testing.assert_array_equal(dweight[2], grad[0, 0] + grad[0, 2] + grad[1, 0])
    np.testing.assert_array_equal(dweight[0], grad[0, 1] + grad[1, 2])
    np.testing.assert_array_equal(dweight[1], 0)
    np.testing.assert_array_equal(dweight[3], 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_backward_is_bitwise_deterministic_across_thread_counts(dtype):
    rng = np.random.default_rng(1)
    indices = rng.integers(0, 5, (64, 64))  # many repeats per row: order of sums matters
    grad = rng.standard_normal((64, 64, 100)).astype(dtype)
    results = []
    for threads in (1, 2, 2):
        with numba_threads(threads):
            results.append(embedding_backward(grad, indices, 5, None))
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_serial_and_parallel_paths_agree_bitwise(dtype, monkeypatch):
    rng = np.random.default_rng(6)
    weight = rng.standard_normal((7, 40)).astype(dtype)
    indices = rng.integers(0, 7, (9, 13))  # repeats: the scatter-add sums in order
    grad = rng.standard_normal((9, 13, 40)).astype(dtype)
    runs = []
    for parallel in (False, True):
        # the size at which the kernels go parallel: these arrays in both paths
        monkeypatch.setattr(embedding_module, "_PARALLEL_MIN_ELEMENTS", grad.size + (not parallel))
        runs.append((embedding_forward(weight, indices),
                     embedding_backward(grad, indices, 7, 2)))
    for got, want in zip(runs[1], runs[0], strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(runs[0][0], embedding_forward_numpy(weight, indices))


def test_embedding_matches_torch_in_float64():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    weight = rng.standard_normal((11, 6))
    indices = rng.integers(0, 11, (4, 9))
    grad = rng.standard_normal((4, 9, 6))
    t_weight = torch.tensor(weight, requires_grad=True)
    t_out = torch.nn.functional.embedding(torch.from_numpy(indices), t_weight, padding_idx=3)
    t_out.backward(torch.from_numpy(grad))
    np.testing.assert_array_equal(embedding_forward(weight, indices), t_out.detach().numpy())
    np.testing.assert_allclose(embedding_backward(grad, indices, 11, 3), t_weight.grad.numpy(),
                               rtol=1e-13, atol=1e-14)


def test_embedding_backward_matches_central_differences():
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((5, 3))
    indices = np.array([[1, 4, 1], [0, 1, 3]])
    assert_vjp_matches_central_difference(lambda w: embedding_forward(w, indices),
                                          lambda v: embedding_backward(v, indices, 5, None),
                                          weight, rng)


@pytest.mark.parametrize("bad", [-1, 5, 2**33])
def test_out_of_range_index_fails_an_assert_before_the_kernel_reads_it(bad):
    indices = np.array([[0, bad], [1, 2]])
    with pytest.raises(AssertionError, match="index out of range for 5 embeddings"):
        embedding_forward(np.zeros((5, 2)), indices)
    with pytest.raises(AssertionError, match="index out of range for 5 embeddings"):
        embedding_backward(np.zeros((2, 2, 3)), indices, 5, None)


@pytest.mark.parametrize("call", [
    lambda: embedding_forward(np.zeros((5, 2)), np.array([1.0])),
    lambda: embedding_forward(np.zeros(5), np.array([1])),
    lambda: embedding_forward(np.zeros((5, 2), np.int64), np.array([1])),
    lambda: embedding_backward(np.zeros((3, 4)), np.array([0, 1]), 5, None),
    lambda: embedding_backward(np.zeros(()), np.zeros((), np.int64), 5, None),
    lambda: embedding_backward(np.zeros((2, 4)), np.array([0, 1]), 5, 5),
], ids=["float-indices", "1-d-weight", "int-weight", "grad-shape", "grad-0-d", "padding-idx"])
def test_inputs_outside_the_preconditions_fail_an_assert(call):
    with pytest.raises(AssertionError):
        call()
