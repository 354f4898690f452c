"""TransformerLM: training signal, loss, causality, sampling and errors."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.models import TransformerLM, TransformerLMConfig

TINY = TransformerLMConfig(vocab_size=11, context_length=8, embed_dim=16, num_heads=2,
                           num_layers=1)


def tiny_model(seed=0, **changes):
    ta.manual_seed(seed)
    config = TransformerLMConfig(**{**TINY.__dict__, **changes})
    return TransformerLM(config)


def test_tiny_model_overfits_one_batch():
    from tinyattn.optim import AdamW

    model = tiny_model()
    data = np.random.default_rng(0).integers(0, 11, (4, 9))
    idx, targets = ta.tensor(data[:, :-1]), ta.tensor(data[:, 1:])
    optimizer = AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    _, first_loss = model(idx, targets=targets)
    for _ in range(150):
        _, loss = model(idx, targets=targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.05:
            break
    assert first_loss.item() > 1.5 and loss.item() < 0.05


def test_loss_is_the_mean_cross_entropy_of_the_logits():
    model = tiny_model(1).double()
    rng = np.random.default_rng(1)
    idx, targets = rng.integers(0, 11, (2, 5)), rng.integers(0, 11, (2, 5))
    logits, loss = model(ta.tensor(idx), targets=ta.tensor(targets))
    z = logits.numpy() - logits.numpy().max(-1, keepdims=True)
    log_probs = z - np.log(np.exp(z).sum(-1, keepdims=True))
    expected = -np.take_along_axis(log_probs, targets[..., None], -1).mean()
    assert logits.shape == (2, 5, 11)
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-12)


def test_logits_never_depend_on_future_tokens():
    model = tiny_model(2).double()
    idx = np.random.default_rng(2).integers(0, 11, (1, 6))
    changed = idx.copy()
    changed[0, 4:] = (changed[0, 4:] + 1) % 11
    a, b = model(ta.tensor(idx)).numpy(), model(ta.tensor(changed)).numpy()
    np.testing.assert_array_equal(a[:, :4], b[:, :4])
    assert not np.allclose(a[:, 4:], b[:, 4:])


def test_generate_shape_and_determinism_under_manual_seed():
    model = tiny_model(3).eval()
    start = ta.tensor([[1, 2, 3], [4, 5, 6]])
    ta.manual_seed(7)
    first = model.generate(start, max_new_tokens=10)
    ta.manual_seed(7)
    again = model.generate(start, max_new_tokens=10)
    ta.manual_seed(8)
    other = model.generate(start, max_new_tokens=10)
    assert first.shape == (2, 13) and first.dtype == np.int64 and not first.requires_grad
    np.testing.assert_array_equal(first.numpy()[:, :3], start.numpy())
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    assert not np.array_equal(first.numpy(), other.numpy())
    assert ta.is_grad_enabled()
    assert np.all((0 <= first.numpy()) & (first.numpy() < 11))


def test_top_k_1_is_greedy_and_top_k_2_stays_in_the_top_two():
    model = tiny_model(4).eval()
    tokens = model.generate(ta.tensor([[0, 1]]), max_new_tokens=10, top_k=1).numpy()
    sampled = model.generate(ta.tensor([[0, 1]]), max_new_tokens=10, top_k=2,
                             temperature=5.0).numpy()
    for t in range(2, 12):  # past context_length 8: the model sees the last 8 tokens
        window = slice(max(0, t - 8), t)
        greedy_logits = model(ta.tensor(tokens[:, window])).numpy()[0, -1]
        assert tokens[0, t] == np.argmax(greedy_logits)
        top_two = np.argsort(model(ta.tensor(sampled[:, window])).numpy()[0, -1])[-2:]
        assert sampled[0, t] in top_two


def test_dropout_is_off_in_eval_mode():
    model = tiny_model(5, dropout=0.3)
    idx = ta.tensor([[1, 2, 3, 4]])
    assert not np.array_equal(model(idx).numpy(), model(idx).numpy())
    model.eval()
    np.testing.assert_array_equal(model(idx).numpy(), model(idx).numpy())


def test_bad_inputs_raise_clear_errors():
    model = tiny_model(6)
    with pytest.raises(ValueError, match="sequence length 9 exceeds context_length 8"):
        model(ta.tensor(np.zeros((1, 9), dtype=np.int64)))
    with pytest.raises(ValueError, match=r"integer Tensor of shape \(B, T\)"):
        model(ta.zeros(1, 4))
    with pytest.raises(ValueError, match="targets"):
        model(ta.tensor([[1, 2]]), targets=ta.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="temperature"):
        model.generate(ta.tensor([[1]]), 2, temperature=0.0)
    with pytest.raises(ValueError, match="top_k"):
        model.generate(ta.tensor([[1]]), 2, top_k=12)
    with pytest.raises(ValueError, match="config.num_heads"):
        TransformerLM(TransformerLMConfig(11, 8, 16, 0, 1))
